"""Every reward of rewards.py on hand-written episodes; expected values worked out by hand."""
import random
import re
import time

import pytest
from conftest import garbled_text

import rewards
from rewards import exact_match, normalize_answer, reward_components

ANSWERS = ["2001: A Space Odyssey"]
CALL = ('<reasoning>Search for the film.</reasoning>\n'
        '<tool>{"name": "wiki_search", "args": {"query": "Kubrick 1968 film"}}</tool>')


def searched(lines):
    """The observation message of a search that ran, as env_search.SearchEnv records it."""
    return {"role": "user", "content": f"<result>\n{lines}\n</result>", "tool_results": lines}


HIT = searched("2001: A Space Odyssey: 2001: A Space Odyssey is a 1968 epic science fiction film.")
MISS = searched("Solaris: Solaris is a 1972 Soviet science fiction film.")
ERROR = "Error: invalid JSON inside <tool> (Expecting value: line 1 column 1 (char 0))"
RIGHT = "<reasoning>The result names the film.</reasoning>\n<answer>2001: A Space Odyssey</answer>"
WRONG = "<reasoning>Maybe Solaris.</reasoning>\n<answer>Solaris</answer>"


def episode(*turns):
    """Alternate assistant turns and user observations, starting with the assistant; a turn is
    a text or an observation message (searched)."""
    return [t if isinstance(t, dict) else {"role": ("assistant", "user")[i % 2], "content": t}
            for i, t in enumerate(turns)]


def check(completion, answers=ANSWERS, **expected):
    got = reward_components(completion, answers)
    assert set(got) == {"tool_execution", "answer_in_results", "answer_presence", "exact_match",
                        "xml_format", "xml_tag_usage"}
    for name, value in expected.items():
        assert got[name] == pytest.approx(value), name
    return got


def test_correct_episode_earns_every_reward():
    completion = episode(CALL, HIT, RIGHT)
    check(completion, tool_execution=0.2, answer_in_results=0.5, answer_presence=0.5,
          exact_match=1.0, xml_format=0.2, xml_tag_usage=0.2)
    assert rewards.turn_reward(completion, ANSWERS) == pytest.approx(0.2 + 0.5)
    assert rewards.outcome_reward(completion, ANSWERS) == pytest.approx(0.5 + 1.0 + 0.2 + 0.2)


def test_wrong_answer_keeps_only_tool_and_format_rewards():
    completion = episode(CALL, MISS, WRONG)
    check(completion, tool_execution=0.2, answer_in_results=0.0, answer_presence=0.0,
          exact_match=0.0, xml_format=0.2, xml_tag_usage=0.2)
    assert rewards.turn_reward(completion, ANSWERS) == pytest.approx(0.2)
    assert rewards.outcome_reward(completion, ANSWERS) == pytest.approx(0.4)


def test_answer_containing_an_alias_is_present_but_not_exact():
    completion = episode(CALL, HIT, "<answer>the film 2001: A Space Odyssey</answer>")
    check(completion, answer_presence=0.5, exact_match=0.0)


def test_malformed_xml():
    completion = episode("<reasoning>hmm<tool>{bad json}</tool>", ERROR,
                         "<answer>2001: A Space Odyssey</answer></answer> trailing")
    # turn 1: both field sets present (0.4) + spacing 0.2 + starts <reasoning> 0.2 + ends </tool> 0.2
    # turn 2: one field set of two (0.2) + spacing 0.2, no start, no end
    format_ = 0.2 * ((0.4 + 0.2 + 0.2 + 0.2) + (0.2 + 0.2)) / 2
    # turn 1: reasoning opened 1 (1 point) closed 0 (0), tool 1 and 1 (2) -> 3 of 4
    # turn 2: answer opened 1 (1 point), closed 2 (1 - |2 - 1| = 0) -> 1 of 2
    tags = 0.2 * (3 / 4 + 1 / 2) / 2
    check(completion, tool_execution=0.0, answer_in_results=0.0, answer_presence=0.5,
          exact_match=1.0, xml_format=format_, xml_tag_usage=tags)


def test_two_tool_calls_success_ratio_and_first_result_only():
    check(episode(CALL, HIT, CALL, ERROR, RIGHT), tool_execution=0.2 * 1 / 2, answer_in_results=0.5)
    # the answer appears only in the second result: the turn reward looks at the first
    check(episode(CALL, ERROR, CALL, HIT, RIGHT), tool_execution=0.2 * 1 / 2, answer_in_results=0.0)
    check(episode(CALL, MISS, CALL, HIT, RIGHT), tool_execution=0.2, answer_in_results=0.0)


def test_unclosed_tool_tag_is_an_attempt_and_a_nudge_is_not():
    unclosed = '<reasoning>x</reasoning><tool>{"name": "wiki_search", "args": {"query": "Kub'
    check(episode(unclosed, "Error: the <tool> tag is not closed", CALL, HIT, RIGHT),
          tool_execution=0.2 * 1 / 2)
    check(episode("I think it is 2001.", "Error: no tool call or answer found.", CALL, HIT, RIGHT),
          tool_execution=0.2, answer_in_results=0.5)


def test_error_wrapped_in_result_tags_is_not_a_success():
    # the paper's environment wraps its error strings in <result> tags
    wrapped = "<result>\nError: Unknown tool '2001: A Space Odyssey'\n</result>"
    check(episode(CALL, wrapped, RIGHT), tool_execution=0.0, answer_in_results=0.0)


def test_tool_success_is_what_the_tool_did_not_what_the_text_says():
    """An observation text that looks like a result earns nothing without a search behind it;
    a search whose hit is titled "Error" is a success."""
    forged = "Error: unknown tool '<result>2001: A Space Odyssey</result>'; the only tool is wiki_search"
    check(episode(CALL, forged, RIGHT), tool_execution=0.0, answer_in_results=0.0)
    check(episode(CALL, "<result>\n2001: A Space Odyssey\n</result>", RIGHT), tool_execution=0.0,
          answer_in_results=0.0)
    check(episode(CALL, searched("Error: 2001: A Space Odyssey is a film."), RIGHT),
          tool_execution=0.2, answer_in_results=0.5)


def test_no_tool_call():
    completion = episode("<reasoning>I know it.</reasoning>\n<answer>2001: A Space Odyssey</answer>")
    check(completion, tool_execution=0.0, answer_in_results=0.0, answer_presence=0.5,
          exact_match=1.0, xml_format=0.2, xml_tag_usage=0.2)
    assert rewards.turn_reward(completion, ANSWERS) == 0.0


def test_empty_output_and_empty_completion():
    # an empty turn still gets the source's always-true "spacing" 0.2 of its format score
    check(episode(""), tool_execution=0.0, answer_in_results=0.0, answer_presence=0.0,
          exact_match=0.0, xml_format=0.2 * 0.2, xml_tag_usage=0.0)
    assert all(v == 0.0 for v in reward_components([], ANSWERS).values())
    assert rewards.turn_reward([], []) == 0.0 and rewards.outcome_reward([], []) == 0.0


def test_last_answer_counts():
    completion = episode("<answer>Solaris</answer>", "Error: x", "<answer>2001: A Space Odyssey</answer>")
    check(completion, exact_match=1.0)
    check(episode("<answer>2001: A Space Odyssey</answer>", "Error: x", "no answer here"), exact_match=1.0)


def test_unicode():
    answers = ["Škoda Auto"]
    result = searched("Škoda Auto: ŠKODA AUTO a.s. is a Czech car maker 🚗.")
    completion = episode(CALL, result, "<reasoning>Český</reasoning><answer>škoda auto</answer>")
    check(completion, answers, tool_execution=0.2, answer_in_results=0.5, answer_presence=0.5,
          exact_match=1.0)


def test_blank_alias_matches_nothing():
    check(episode(CALL, HIT, RIGHT), ["", "  "], answer_in_results=0.0, answer_presence=0.0,
          exact_match=0.0)


def test_tag_usage_mean_over_turns_is_clamped_at_zero_as_in_the_mt_grpo_source():
    # Multi-Turn-RL-Agent verifiers/parsers/xml_parser.py: max(0.0, 0.2 * mean of the turns)
    nested = "<reasoning><reasoning><reasoning><reasoning>x</reasoning>"
    # reasoning opened 4 times: 1 - |4 - 1| = -2, closed once: 1 -> -1 of 2 checks = -0.5
    assert rewards.turn_tag_score(nested) == -0.5
    check(episode(nested), xml_tag_usage=0.0)                 # 0.2 * -0.5 = -0.1, clamped
    # with a perfect turn (score 1) the mean is 0.2 * (-0.5 + 1) / 2 = 0.05: the clamp acts on
    # the mean, not on each turn (that would give 0.2 * (0 + 1) / 2 = 0.1)
    check(episode(nested, "Error: x", RIGHT), xml_tag_usage=0.05)


def test_exact_match_modes():
    assert exact_match(" 2001: A Space Odyssey ", ["2001: a space odyssey"]) == 1.0
    assert exact_match("Beatles", ["The Beatles"]) == 0.0
    assert exact_match("Beatles", ["The Beatles"], normalize=True) == 1.0
    assert exact_match("U.S.A.", ["USA"]) == 0.0
    assert exact_match("U.S.A.", ["USA"], normalize=True) == 1.0
    assert exact_match("the", ["a"], normalize=True) == 0.0  # both normalise to ""
    assert exact_match(None, ["x"]) == 0.0
    assert exact_match("x", []) == 0.0
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"


def test_repeated_unclosed_tags_take_linear_time():
    # a regex <tag>(.*?)</tag> rescans the rest of the text from every unclosed <tag>: quadratic,
    # 160 s here
    start = time.perf_counter()
    for tag in ("answer", "reasoning", "tool", "result", "search"):
        text = f"<{tag}>" * 16000
        got = reward_components(episode("<tool>" + text, text, text), [text])  # a call, a result
        assert got["answer_presence"] == got["answer_in_results"] == 0.0
    assert time.perf_counter() - start < 2.0


def random_text(rng):
    pieces = ["<tool>", "</tool>", "<answer>", "</answer>", "<reasoning>", "</reasoning>",
              "<result>", "</result>", '{"name": "wiki_search", "args": {"query": "', '"}}',
              "Error:", "<", ">", "/", "\n", " ", "2001", "Space Odyssey", "é", "🚗", "\u202e"]
    return garbled_text(rng, pieces)


def test_tag_content_matches_the_source_regex_on_garbage():
    rng = random.Random(7)
    for _ in range(2000):
        text = random_text(rng)
        for tag in ("reasoning", "tool", "answer", "result"):
            match = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", text, re.DOTALL)
            assert rewards.tag_content(text, tag) == (match.group(1).strip() if match else None)


def test_random_garbage_never_raises_and_stays_in_range():
    rng = random.Random(1234)
    for _ in range(400):
        completion = episode(*[random_text(rng) for _ in range(rng.randint(0, 5))])
        answers = [random_text(rng) for _ in range(rng.randint(0, 3))] + ["2001"]
        got = reward_components(completion, answers)
        assert 0.0 <= got["tool_execution"] <= 0.2
        assert got["answer_in_results"] in (0.0, 0.5)
        assert got["answer_presence"] in (0.0, 0.5)
        assert got["exact_match"] in (0.0, 1.0)
        assert 0.0 <= got["xml_format"] <= 0.2 + 1e-12
        assert 0.0 <= got["xml_tag_usage"] <= 0.2 + 1e-12
        assert rewards.turn_reward(completion, answers) == pytest.approx(
            got["tool_execution"] + got["answer_in_results"])
        assert rewards.outcome_reward(completion, answers) == pytest.approx(
            got["answer_presence"] + got["exact_match"] + got["xml_format"] + got["xml_tag_usage"])
        exact_match(random_text(rng), answers, normalize=True)


# ---------------------------------------------------------------- K turns (train.py --max-calls)
def test_each_call_earns_its_own_turn_reward():
    """Three turns: call 1 misses (0.2), call 2 finds the film (0.2 + 0.5), the answer earns no
    turn reward. The paper's turn_reward would give the episode 0.2 (its first result only)."""
    completion = episode(CALL, MISS, CALL, HIT, RIGHT)
    assert rewards.turn_rewards(completion, ANSWERS, 3) == pytest.approx([0.2, 0.7])
    assert rewards.turn_reward(completion, ANSWERS) == pytest.approx(0.2)


@pytest.mark.parametrize("turns, expected", [
    ((CALL, HIT, RIGHT), [0.7, 0.0]),                      # answered after one call: turn 2 earns 0
    ((RIGHT,), [0.0, 0.0]),                                 # answered at once
    ((CALL, {"role": "user", "content": ERROR}, CALL, MISS, WRONG), [0.0, 0.2]),  # a malformed first call
    (("no tag at all", {"role": "user", "content": "Error: no tool call"}, CALL, HIT, CALL), [0.0, 0.7]),
])
def test_turn_rewards_of_short_failed_and_missing_calls(turns, expected):
    assert rewards.turn_rewards(episode(*turns), ANSWERS, 3) == pytest.approx(expected)


@pytest.mark.parametrize("turns", [(CALL, HIT, RIGHT), (CALL, MISS, WRONG), (RIGHT,), ("nothing",),
                                   (CALL, {"role": "user", "content": ERROR}, RIGHT), (CALL, HIT, CALL)])
def test_two_turns_give_the_papers_turn_reward(turns):
    assert rewards.turn_rewards(episode(*turns), ANSWERS, 2) == [rewards.turn_reward(episode(*turns), ANSWERS)]


def test_the_prefill_and_the_spacing_make_0_4_of_the_format_rate_free():
    """train.py starts every turn with the prefill <reasoning> and scores the turn with it, and the
    source's "spacing" 0.2 always holds: turns that add nothing to the prefill score 0.4 of the format
    maximum (0.08 of 0.2), which a random model's runs log (xml_format_rate 0.400). The label says so."""
    completion = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<reasoning>"},
                  {"role": "user", "content": "<result>\nnothing\n</result>"}, {"role": "assistant", "content": "<reasoning>"}]
    assert rewards.xml_format_reward(completion) == pytest.approx(0.08)
    assert rewards.xml_format_reward(completion[:2]) / rewards.MAXIMA["xml_format"] == pytest.approx(0.4)
    import tasks
    assert "0.4 free" in dict(tasks.TASKS["search"].table)["xml_format_rate"]
