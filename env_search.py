"""The search episode of MT-GRPO (Zeng et al. 2025, "Reinforcing Multi-Turn Reasoning in LLM
Agents via Turn-Level Credit Assignment", arXiv 2505.11821v1): the prompt, the tool call and the
two-turn episode. The search tool it calls is retrieval.py; the trivia questions asked in it are
in questions.py.

The episode follows the paper's protocol (generation of a turn stops at STOP_STRINGS):

    turn 1 (model)  <reasoning>...</reasoning>
                    <tool>{"name": "wiki_search", "args": {"query": "..."}}</tool>
    environment     <result>\nTitle: text\n</result>
    turn 2 (model)  <reasoning>...</reasoning>\n<answer>...</answer>

With max_turns = K > 2 (train.py --max-calls K - 1) the model may search again after a result:
turns 1 .. K-1 may each call the tool, and the last turn that comes is the answer (this project's
K-turn extension of MT-GRPO: mtgrpo.py says how it differs from the paper and the authors' code).

Read top to bottom: the prompt and the worked example, parse_tool_call, SearchEnv (its result text is
retrieval.format_result), and the task as train.py and tools/ read it (TASK).
"""
import json
import sys

import questions
import retrieval
import rewards
from task import Task

TOOL_NAME = "wiki_search"
STOP_STRINGS = ["</tool>", "</answer>"]


# ---------------------------------------------------------------- the episode
SYSTEM_PROMPT = """\
Answer the trivia question with the help of a Wikipedia search tool.
First think inside <reasoning>...</reasoning>, then call the tool once:
<tool>{"name": "wiki_search", "args": {"query": "..."}}</tool>
The result comes back inside <result>...</result>. Then think inside <reasoning>...</reasoning>
and give a short final answer, just the name asked for, inside <answer>...</answer>."""


def system_prompt(max_turns=2):
    """SYSTEM_PROMPT, told how many searches it may make when the episode allows more than one."""
    if max_turns <= 2:
        return SYSTEM_PROMPT
    return SYSTEM_PROMPT.replace("call the tool once:", f"call the tool (up to {max_turns - 1} times, "
                                 "one call a turn, each after the last result):").replace(
        "Then think", "To search again, call the tool again; otherwise think")

# one_shot=True puts this worked example (not in the offline corpus) before the question as
# earlier chat turns. Small models copy a demonstrated exchange far more readily than a
# description: SmolLM2-135M made 0 valid calls in 16 samples with the example inside the
# system prompt and 4 in 16 with it as chat turns (docs/search.md, "Making a 135M model call the tool").
ONE_SHOT_EXAMPLE = [
    {"role": "user", "content": 'Which Wikipedia article is this about: "___ is a large shield '
                                'volcano on Mars, about 2.5 times as high as Mount Everest."?'},
    {"role": "assistant", "content": '<reasoning>I should search for a large volcano on Mars.'
                                     '</reasoning>\n<tool>{"name": "wiki_search", "args": '
                                     '{"query": "large shield volcano on Mars"}}</tool>'},
    {"role": "user", "content": "<result>\nOlympus Mons: Olympus Mons is a large shield volcano "
                                "on Mars. It is over 21.9 km high, about 2.5 times the elevation "
                                "of Mount Everest above sea level.\n</result>"},
    {"role": "assistant", "content": "<reasoning>The result describes Olympus Mons, the large "
                                     "shield volcano on Mars.</reasoning>\n<answer>Olympus Mons"
                                     "</answer>"},
]

NO_ACTION = ("Error: no tool call or answer found. Call the tool with <tool>{\"name\": "
             "\"wiki_search\", \"args\": {\"query\": \"...\"}}</tool> or give your final answer "
             "inside <answer>...</answer> tags.")


class ToolCallError(ValueError):
    """A malformed tool call; its message becomes the "Error: ..." observation."""


def parse_tool_call(turn_text):
    """The query of the first <tool>{"name": "wiki_search", "args": {"query": ...}}</tool>.
    Raises ToolCallError saying what is wrong: no or unclosed tag, bad JSON, not an object,
    unknown tool, missing or empty query."""
    start = turn_text.find("<tool>")
    if start < 0:
        raise ToolCallError("no <tool> tag")
    end = turn_text.find("</tool>", start)
    if end < 0:
        raise ToolCallError("the <tool> tag is not closed with </tool>")
    try:
        call = json.loads(turn_text[start + len("<tool>"):end])
    except (ValueError, RecursionError) as e:
        raise ToolCallError(f"invalid JSON inside <tool> ({e})") from None
    if not isinstance(call, dict):
        raise ToolCallError('the tool call must be a JSON object {"name": ..., "args": {...}}')
    if call.get("name") != TOOL_NAME:
        raise ToolCallError(f"unknown tool {call.get('name')!r}; the only tool is {TOOL_NAME}")
    args = call.get("args")
    query = args.get("query") if isinstance(args, dict) else None
    if not isinstance(query, str) or not query.strip():
        raise ToolCallError('wiki_search needs "args": {"query": "<non-empty text>"}')
    return query.strip()


def has_answer(turn_text):
    """True when the turn holds <answer>...</answer> (two find() calls: linear time, where the
    regex <answer>.*?</answer> is quadratic on "<answer>" * n)."""
    start = turn_text.find("<answer>")
    return start >= 0 and turn_text.find("</answer>", start + len("<answer>")) >= 0


class SearchEnv:
    """One episode: a question, its gold aliases and a shared retriever (anything with
    .search(query, k) -> [{"title", "text", "score"}]); cheap to create.

    messages   the prompt: [system (system_prompt), ONE_SHOT_EXAMPLE turns if one_shot, user question]
    completion the messages after the prompt: assistant turns and "user" observations; the
               observation of a search that ran also holds "tool_results", the hit lines the
               model reads ("" for no hits); rewards.py decides tool success from that key,
               never from the text
    done       True after an <answer>...</answer> or after max_turns model turns"""

    def __init__(self, question, answers, retriever, max_turns=2, k=1, max_words=120,
                 one_shot=False):
        retrieval.check_at_least_one(k=k, max_words=max_words)
        self.question, self.answers, self.retriever = question, list(answers), retriever
        self.max_turns, self.k, self.max_words = max_turns, k, max_words
        self.messages = ([{"role": "system", "content": system_prompt(max_turns)}]
                         + (ONE_SHOT_EXAMPLE if one_shot else [])
                         + [{"role": "user", "content": question}])
        self.completion, self.turns, self.done = [], 0, False

    def step(self, turn_text):
        """Record a model turn; return the observation for the next turn, or None when the
        episode is over (an answer, or the turn limit: a tool call in the last turn is not run).
        A turn containing <tool> is a tool call; if it is invalid, or the search fails, the
        observation is "Error: ..." (the call still counts as an attempt in rewards.py)."""
        if self.done:
            raise RuntimeError("step() called on a finished episode")
        self.completion.append({"role": "assistant", "content": turn_text})
        self.turns += 1
        if has_answer(turn_text) or self.turns >= self.max_turns:
            self.done = True
            return None
        message = self._run_tool(turn_text) if "<tool>" in turn_text else {"content": NO_ACTION}
        self.completion.append({"role": "user", **message})
        return message["content"]

    def _run_tool(self, turn_text):
        """The observation message of a tool call: an error, or the hits with tool_results."""
        try:
            hits = self.retriever.search(parse_tool_call(turn_text), self.k)
        except (ToolCallError, retrieval.RetrieverError) as e:
            return {"content": f"Error: {e}"}
        return {"content": retrieval.format_result(hits, self.max_words), "tool_results": retrieval.hit_lines(hits, self.max_words)}


# ---------------------------------------------------------------- the task (task.py)
def load(args):
    """The retriever and the training and test questions (questions.py) of the flags."""
    retriever = retrieval.make_retriever(args.retriever_url or None, args.corpus or None, args.max_words)
    if args.retriever_url:
        retrieval.check_retriever(retriever)
    train_qs, test_qs = questions.train_test_questions(args.train_questions, args.test_questions, args.corpus)
    if note := questions.overlap_note(train_qs, test_qs):  # the same file for both, a copy, an overlap
        print(note, file=sys.stderr)
    return retriever, train_qs, test_qs


def make_env(item, retriever, args):
    """A fresh episode of one question, up to --max-calls + 1 turns (MT-GRPO's K)."""
    return SearchEnv(item["question"], item["answers"], retriever, args.max_calls + 1, k=args.top_k,
                     max_words=args.max_words, one_shot=args.one_shot)


TASK = Task(
    "search", "tool", "Wikipedia search, then answer (MT-GRPO paper)", "question",
    # rates are fractions of the maximum; rewards are in reward units
    table=(("reward", "total reward (max 2.6)"), ("tool_execution_rate", "tool execution rate"),
           ("answer_in_results_rate", "answer in results rate"), ("exact_match_rate", "exact match rate"),
           ("xml_format_rate", "xml format rate (0.4 free)")),
    plot=("tool_execution_rate", "exact_match_rate", "reward"), each="exact_match_each",
    flags=("max_calls", "top_k", "max_words", "retriever_url", "corpus", "train_questions", "test_questions"),
    prefill="<reasoning>", load=load, make_env=make_env, stop_strings=STOP_STRINGS, rubric=rewards.MT_GRPO,
    pairs=(("mt", "mr"), ("mt", "or"), ("mr", "or")))
