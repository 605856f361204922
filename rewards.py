"""The six reward functions of MT-GRPO (Zeng et al. 2025, arXiv 2505.11821v1), at the paper's scales.

    turn reward R^T (credited to turn 1, max 0.7) = tool_execution (0.2) + answer_in_results (0.5)
    outcome reward R^O (max 1.9) = answer_presence (0.5) + exact_match (1.0)
                                   + xml_format (0.2) + xml_tag_usage (0.2)

Every function is pure and takes `completion`: the messages after the prompt, as SearchEnv makes
them (assistant turns and "user" observations alternating), `answers`: the gold aliases, and
`tags`: the task's XML tags (TAGS, the paper's, by default). Malformed text never raises; it earns
what the rules give it. A tool-use task declares its tags and its rubric (its turn and outcome
rewards, each a function of that signature with its maximum): MT_GRPO is the paper's, search's;
env_calc.py's calculator reuses four of these functions with its own tags and one of its own.

Sources (the paper's public code, built on willccbb/verifiers):
  SiliangZeng/Multi-Turn-RL-Agent verifiers/examples/triviaqa_search.py: turn vs outcome rewards
                         verifiers/parsers/xml_parser.py: XMLParser.get_format_reward_func and
                         get_xml_reward_func (0.2 weights, tag usage clamped at 0), used with
                         XMLParser(fields=["reasoning", ("tool", "answer")])
  SiliangZeng/verifiers  verifiers/rubrics/triviaqa_rubric.py: answer and search-result rewards
                         verifiers/rubrics/tool_rubric.py: tool execution
                         verifiers/rubrics/rubric.py: the final answer (get_last_answer)
"""
import re
import string
from dataclasses import dataclass


@dataclass(frozen=True)
class Tags:
    """A tool-use task's XML tags: the model thinks in <think>, calls its tool in <call>, reads the
    result in <result> and answers in <answer>."""
    think: str = "reasoning"
    call: str = "tool"
    result: str = "result"
    answer: str = "answer"

    @property
    def field_sets(self):
        """The format rewards' fields: the source's XMLParser(fields=["reasoning", ("tool", "answer")])."""
        return (self.think,), (self.call, self.answer)


TAGS = Tags()  # the paper's


# ---------------------------------------------------------------- reading an episode


def tag_content(text, tag):
    """Stripped content of the first <tag>...</tag> in text, or None. Same match as the source's
    regex <tag>\\s*(.*?)\\s*</tag> followed by strip(): the first <tag>, up to the first </tag>
    after it. Two find() calls take linear time, where that regex is quadratic on "<tag>" * n."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = text.find(opening)
    if start < 0:
        return None
    end = text.find(closing, start + len(opening))
    return text[start + len(opening):end].strip() if end >= 0 else None


def assistant_turns(completion):
    """The texts of the model's turns."""
    return [m["content"] for m in completion if m["role"] == "assistant"]


def tool_exchanges(completion, tags=TAGS):
    """(turn, observation message) for every assistant turn that attempts a tool call and is
    followed by an observation. An attempt is a turn containing "<tool>" (the call tag): the source
    counts only complete <tool>...</tool> pairs, we also count an unclosed tag (a generation cut off
    by the token limit), which SearchEnv answers with an "Error: ..." observation."""
    return [(turn["content"], reply)
            for turn, reply in zip(completion, completion[1:])
            if turn["role"] == "assistant" and f"<{tags.call}>" in turn["content"]
            and reply["role"] == "user"]


def tool_results(observation):
    """The hit lines of a search that ran, as SearchEnv recorded them, or None for a failed call.
    The source parses the observation text instead (a <result> not starting with "Error:"), which
    a tool name echoed in an error or a document titled "Error" can forge (docs/search.md)."""
    return observation.get("tool_results")


def final_answer(completion, tags=TAGS):
    """Content of <answer> in the last assistant turn that has one, or None (get_last_answer)."""
    for turn in reversed(assistant_turns(completion)):
        answer = tag_content(turn, tags.answer)
        if answer is not None:
            return answer
    return None


def contains_alias(text, answers):
    """True when some non-blank gold alias, lowercased, is a substring of text lowercased."""
    text = text.lower()
    return any(a.strip() and a.lower() in text for a in answers)


# ---------------------------------------------------------------- turn rewards


def tool_execution_reward(completion, answers=(), tags=TAGS):
    """0.2 × successful tool calls / attempted tool calls; 0.0 with no attempt.
    Source: ToolRubric.tool_execution_reward_func."""
    exchanges = tool_exchanges(completion, tags)
    if not exchanges:
        return 0.0
    return 0.2 * sum(tool_results(obs) is not None for _, obs in exchanges) / len(exchanges)


def answer_in_results_reward(completion, answers, tags=TAGS):
    """0.5 if a gold alias (lowercased) is a substring of the first tool result (lowercased),
    else 0.0. The first tool result is the observation of the first attempted call; an error
    there gives 0. Source: TrivialQAToolRubric.exist_answer_in_search_results."""
    exchanges = tool_exchanges(completion, tags)
    results = tool_results(exchanges[0][1]) if exchanges else None
    return 0.5 if results is not None and contains_alias(results, answers) else 0.0


# ---------------------------------------------------------------- outcome rewards


def normalize_answer(text):
    """SQuAD normalisation: lowercase, drop punctuation, drop the articles a/an/the, collapse
    whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match(answer, aliases, normalize=False):
    """1.0 if answer.lower().strip() equals some alias.lower().strip(), else 0.0 (the paper's
    rule). normalize=True compares SQuAD-normalised strings instead (an option, not the paper's).
    A None or blank answer never matches."""
    clean = normalize_answer if normalize else (lambda s: s.lower().strip())
    target = clean(answer) if answer is not None else ""
    return 1.0 if target and any(target == clean(a) for a in aliases) else 0.0


def answer_presence_reward(completion, answers, tags=TAGS):
    """0.5 if a gold alias (lowercased) is a substring of the final <answer> (lowercased), else
    0.0. Source: TrivialQAToolRubric.exist_answer_reward_func."""
    answer = final_answer(completion, tags)
    return 0.5 if answer is not None and contains_alias(answer, answers) else 0.0


def exact_match_reward(completion, answers, tags=TAGS):
    """1.0 if the final <answer> is exactly a gold alias (see exact_match), else 0.0.
    Source: TrivialQAToolRubric.exact_match_reward_func."""
    return exact_match(final_answer(completion, tags), answers)


def turn_format_score(turn, tags=TAGS):
    """Format score of one assistant turn, in [0, 1] (see xml_format_reward)."""
    field_sets = tags.field_sets
    parsed = [any(tag_content(turn, t) is not None for t in fs) for fs in field_sets]
    present = [p or any(f"<{t}>" in turn or f"</{t}>" in turn for t in fs)
               for p, fs in zip(parsed, field_sets)]
    score = 0.4 * sum(present) / len(field_sets) if any(parsed) else 0.0
    score += 0.2  # "correct spacing": always true in the source, see xml_format_reward
    stripped = turn.strip()
    score += 0.2 if any(stripped.startswith(f"<{t}>") for t in field_sets[0]) else 0.0
    score += 0.2 if any(stripped.endswith(f"</{t}>") for t in field_sets[-1]) else 0.0
    return score


def xml_format_reward(completion, answers=(), tags=TAGS):
    """0.2 × the mean format score of the assistant turns (0.0 with no assistant turn), in
    [0, 0.2]. Source: XMLParser.get_format_reward_func. A turn scores, out of 1.0:
      0.4 × (field sets present) / 2, if at least one tag parses as <tag>...</tag>; the field
            sets are {reasoning} and {tool, answer}; a set is present when one of its tags
            parses or its opening or closing tag merely occurs;
      0.2   for "correct spacing", which the source tests by comparing a stripped and an
            unstripped parse made with the same regex: it always holds, even for empty text;
      0.2   if the stripped turn starts with <reasoning>;
      0.2   if the stripped turn ends with </tool> or </answer>."""
    turns = assistant_turns(completion)
    return 0.2 * sum(turn_format_score(t, tags) for t in turns) / len(turns) if turns else 0.0


def turn_tag_score(turn, tags=TAGS):
    """Tag-usage score of one assistant turn, at most 1, negative for repeated tags (see
    xml_tag_usage_reward)."""
    points = checks = 0
    for tag in (t for fs in tags.field_sets for t in fs):
        opened, closed = turn.count(f"<{tag}>"), turn.count(f"</{tag}>")
        if opened or closed:
            points += (1 - abs(opened - 1)) + (1 - abs(closed - 1))
            checks += 2
    return points / checks if checks else 0.0


def xml_tag_usage_reward(completion, answers=(), tags=TAGS):
    """0.2 × the mean tag-usage score of the assistant turns (0.0 with no assistant turn).
    Source: XMLParser.get_xml_reward_func. For each tag of reasoning, tool, answer that occurs
    in a turn (opening or closing), the turn earns 1 - |#<tag> - 1| and 1 - |#</tag> - 1| out
    of 2 checks; its score is points / checks (0 if no tag occurs). Exactly one opening and one
    closing tag of every tag used gives the maximum 0.2. Repeated tags cost points: a turn can
    score below 0, but, as in the MT-GRPO source, the mean over turns is clamped at 0 (the
    unclamped form is willccbb/verifiers', which the MT-GRPO authors revised)."""
    turns = assistant_turns(completion)
    return max(0.0, 0.2 * sum(turn_tag_score(t, tags) for t in turns) / len(turns)) if turns else 0.0


# ---------------------------------------------------------------- grouped as in MT-GRPO
@dataclass(frozen=True)
class Rubric:
    """A tool-use task's rewards: its tags, and name -> (function, maximum in reward units) for the
    turn reward R^T of a call's turn and for the outcome reward R^O. Every function takes
    (completion, answers, tags)."""
    tags: Tags
    turn: dict
    outcome: dict

    @property
    def maxima(self):
        return {name: top for name, (_, top) in {**self.turn, **self.outcome}.items()}


MT_GRPO = Rubric(TAGS, turn={"tool_execution": (tool_execution_reward, 0.2),
                             "answer_in_results": (answer_in_results_reward, 0.5)},
                 outcome={"answer_presence": (answer_presence_reward, 0.5), "exact_match": (exact_match_reward, 1.0),
                          "xml_format": (xml_format_reward, 0.2), "xml_tag_usage": (xml_tag_usage_reward, 0.2)})
MAXIMA = MT_GRPO.maxima  # in reward units


def reward_components(completion, answers, rubric=MT_GRPO):
    """All the rubric's rewards (the paper's six), in reward units, keyed by name."""
    return {name: fn(completion, answers, rubric.tags) for name, (fn, _) in {**rubric.turn, **rubric.outcome}.items()}


def turn_reward(completion, answers, rubric=MT_GRPO):
    """R^T, the turn-level reward of turn 1: tool execution + answer in search results (≤ 0.7)."""
    return sum(fn(completion, answers, rubric.tags) for fn, _ in rubric.turn.values())


def turn_rewards(completion, answers, max_turns=2, rubric=MT_GRPO):
    """[R^T_1 .. R^T_{K-1}] for an episode of up to K = max_turns turns: model turn k earns the
    turn reward of its own tool call, the rubric's turn rewards of that call and its result alone
    (search: 0.2 if the search ran + 0.5 if a gold alias is in its result, ≤ 0.7); a turn without
    a call, the last turn and turns never played earn 0. With K = 2 this is [turn_reward], the
    paper's: the only call is turn 1's."""
    out, k = [0.0] * (max_turns - 1), 0
    for message, reply in zip(completion, completion[1:] + [None]):
        if message["role"] != "assistant":
            continue
        k += 1
        if k < max_turns and reply is not None and reply["role"] == "user" and f"<{rubric.tags.call}>" in message["content"]:
            out[k - 1] = turn_reward([message, reply], answers, rubric)
    return out


def outcome_reward(completion, answers, rubric=MT_GRPO):
    """R^O, the outcome reward: answer presence + exact match + XML format + XML tag usage
    (≤ 1.9)."""
    return sum(fn(completion, answers, rubric.tags) for fn, _ in rubric.outcome.values())


def score_episodes(envs, rubric=MT_GRPO):
    """Rewards of finished episodes (each with .completion, .answers, .turns played and .max_turns K):
    R^T per episode as a list of K - 1 turn rewards (turn_rewards; [R^T_1] for two turns), R^O per
    episode, and the mean of every component in reward units and as a rate (`<name>_rate`: the
    fraction of its maximum), plus turn, outcome and total, the turns played and the fraction of
    episodes that stopped after one turn (one_turn: an agent that no longer calls the tool)."""
    comps = [reward_components(e.completion, e.answers, rubric) for e in envs]
    turn = [turn_rewards(e.completion, e.answers, e.max_turns, rubric) for e in envs]
    outcome = [outcome_reward(e.completion, e.answers, rubric) for e in envs]
    means = {k: sum(c[k] for c in comps) / len(comps) for k in rubric.maxima}
    means.update({f"{k}_rate": means[k] / top for k, top in rubric.maxima.items()})
    means.update(turn_reward=sum(map(sum, turn)) / len(turn), outcome_reward=sum(outcome) / len(outcome))
    means["reward"] = means["turn_reward"] + means["outcome_reward"]
    means.update(turns=sum(e.turns for e in envs) / len(envs), one_turn=sum(e.turns == 1 for e in envs) / len(envs))
    if any(e.max_turns > 2 for e in envs):  # K turns (train.py --max-calls): how often the model searched
        means["calls"] = sum(len(tool_exchanges(e.completion, rubric.tags)) for e in envs) / len(envs)
    return turn, outcome, means
