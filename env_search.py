"""The search episode of MT-GRPO (Zeng et al. 2025, "Reinforcing Multi-Turn Reasoning in LLM
Agents via Turn-Level Credit Assignment", arXiv 2505.11821): the prompt, the tool call and the
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

Read top to bottom: the prompt and the worked example, parse_tool_call, format_result, SearchEnv.
"""
import json

import retrieval

TOOL_NAME = "wiki_search"
STOP_STRINGS = ["</tool>", "</answer>"]
MAX_TITLE_WORDS = 20  # a title shown is cut like a text (hit_lines): it cannot flood the context


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


def hit_lines(hits, max_words=120):
    """What the model reads of the hits: "Title: text" per hit, the title cut to MAX_TITLE_WORDS
    words and the text to max_words (truncate_words: 30 characters a word at most). A title is
    data too (a user's corpus, a remote server): a 5 MB one made a 5 MB observation. A fixed cap,
    not max_words, because a title is a name; the retrievers' hits keep the whole title, which
    questions.py's recall benchmark compares with the question's article."""
    return "\n\n".join(f"{retrieval.truncate_words(h['title'], MAX_TITLE_WORDS)}: "
                         f"{retrieval.truncate_words(h['text'], max_words)}" for h in hits)


def format_result(hits, max_words=120):
    """The observation of a successful search: the hit lines inside <result> tags."""
    return "<result>\n" + (hit_lines(hits, max_words) or "No results found.") + "\n</result>"


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
        return {"content": format_result(hits, self.max_words), "tool_results": hit_lines(hits, self.max_words)}
