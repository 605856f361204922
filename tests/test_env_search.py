"""env_search.py: the prompt and the worked example, tool calls good and malformed, the episode's
observations and turn limit. The search tool: test_retrieval.py; questions: test_questions.py."""
import random
import time

import pytest
from conftest import CALL, garbled_text

import env_search as es
import retrieval
import rewards



# ---------------------------------------------------------------- the episode
def test_prompt_messages_and_one_shot(capitals):
    system = {"role": "system", "content": es.SYSTEM_PROMPT}
    question = {"role": "user", "content": "Which city?"}
    assert es.SearchEnv("Which city?", ["Paris"], capitals).messages == [system, question]
    for part in ("<reasoning>", '<tool>{"name": "wiki_search", "args": {"query": "..."}}</tool>',
                 "<result>", "<answer>"):
        assert part in es.SYSTEM_PROMPT
    one_shot = es.SearchEnv("Which city?", ["Paris"], capitals, one_shot=True).messages
    assert one_shot == [system, *es.ONE_SHOT_EXAMPLE, question]
    example = one_shot[1:-1]
    assert [m["role"] for m in example] == ["user", "assistant", "user", "assistant"]
    assert es.parse_tool_call(example[1]["content"]) == "large shield volcano on Mars"
    assert example[2]["content"].startswith("<result>\nOlympus Mons: ")
    assert "<answer>Olympus Mons</answer>" in example[3]["content"]
    hits = example[2]["content"].removeprefix("<result>\n").removesuffix("\n</result>")
    completion = [example[1], {**example[2], "tool_results": hits}, example[3]]  # as SearchEnv records it
    assert rewards.xml_format_reward(completion) == pytest.approx(0.2)  # the maximum
    assert rewards.reward_components(completion, ["Olympus Mons"]) == pytest.approx(
        {"tool_execution": 0.2, "answer_in_results": 0.5, "answer_presence": 0.5,
         "exact_match": 1.0, "xml_format": 0.2, "xml_tag_usage": 0.2})
    assert es.STOP_STRINGS == ["</tool>", "</answer>"]


def test_valid_call_then_answer(capitals):
    env = es.SearchEnv("Which city is the capital of France?", ["Paris"], capitals)
    observation = env.step(CALL % "capital of France")
    assert observation == "<result>\nParis: Paris is the capital and largest city of France.\n</result>"
    assert not env.done and env.completion[-1] == {"role": "user", "content": observation, "tool_results":
                                                   "Paris: Paris is the capital and largest city of France."}
    assert env.step("<reasoning>It says Paris.</reasoning>\n<answer>Paris</answer>") is None
    assert env.done and [m["role"] for m in env.completion] == ["assistant", "user", "assistant"]
    got = rewards.reward_components(env.completion, env.answers)
    assert (got["tool_execution"], got["answer_in_results"], got["exact_match"]) == (0.2, 0.5, 1.0)
    with pytest.raises(RuntimeError):
        env.step("more")


def test_k_hits_and_no_hits(capitals):
    observation = es.SearchEnv("Q", ["A"], capitals, k=2).step(CALL % "capital city")
    assert observation.count(": ") == 2 and "Paris: " in observation and "Berlin: " in observation
    assert es.SearchEnv("Q", ["A"], capitals, max_words=3).step(CALL % "Germany") == \
        "<result>\nBerlin: Berlin is the…\n</result>"
    assert es.SearchEnv("Q", ["A"], capitals).step(CALL % "zzz") == "<result>\nNo results found.\n</result>"


@pytest.mark.parametrize("turn, problem", [
    ('<tool>{"name": "wiki_search", "args": {"query": "x"}}', "not closed"),
    ('<tool>{"name": wiki_search}</tool>', "invalid JSON"),
    ('<tool>["wiki_search", "x"]</tool>', "JSON object"),
    ('<tool>{"name": "google", "args": {"query": "x"}}</tool>', "unknown tool 'google'"),
    ('<tool>{"args": {"query": "x"}}</tool>', "unknown tool None"),
    ('<tool>{"name": "wiki_search"}</tool>', "query"),
    ('<tool>{"name": "wiki_search", "args": {"q": "x"}}</tool>', "query"),
    ('<tool>{"name": "wiki_search", "args": {"query": "  "}}</tool>', "query"),
    ('<tool>{"name": "wiki_search", "args": {"query": 5}}</tool>', "query"),
])
def test_invalid_calls_give_error_observations(capitals, turn, problem):
    env = es.SearchEnv("Q", ["A"], capitals)
    observation = env.step(turn)
    assert observation.startswith("Error: ") and problem in observation and not env.done
    assert rewards.tool_execution_reward(env.completion) == 0.0
    assert rewards.tool_exchanges(env.completion) == [(turn, {"role": "user", "content": observation})]


def test_no_action_answer_and_turn_limit(capitals):
    env = es.SearchEnv("Q", ["A"], capitals, max_turns=3)
    assert env.step("I am thinking.") == es.NO_ACTION and es.NO_ACTION.startswith("Error:")
    assert env.step("<answer>Paris") == es.NO_ACTION  # an unclosed answer does not end it
    assert env.step(CALL % "Paris") is None and env.done  # turn 3 of 3: the call is not run
    assert len(env.completion) == 5
    env = es.SearchEnv("Q", ["A"], capitals)
    assert env.step(CALL % "Paris").startswith("<result>")
    assert env.step(CALL % "Berlin") is None and env.done and len(env.completion) == 3
    assert es.SearchEnv("Q", ["A"], capitals).step("<answer>Paris</answer>") is None


def test_three_turns_search_twice_and_are_told_so(capitals):
    env = es.SearchEnv("Q", ["Paris"], capitals, max_turns=3)
    assert "up to 2 times" in env.messages[0]["content"] and "once" not in env.messages[0]["content"]
    assert es.system_prompt(2) == es.SYSTEM_PROMPT  # the paper's two turns: its prompt, unchanged
    assert env.step(CALL % "capital of Germany").startswith("<result>")
    assert env.step(CALL % "capital of France").startswith("<result>") and not env.done  # a second search runs
    assert env.step("<answer>Paris</answer>") is None and env.done
    assert rewards.turn_rewards(env.completion, env.answers, 3) == [0.2, 0.7]


def test_a_failing_retriever_gives_an_error_observation():
    class Down:
        def search(self, query, k):
            raise retrieval.RetrieverError("server down")
    assert es.SearchEnv("Q", ["A"], Down()).step(CALL % "x") == "Error: server down"


def random_text(rng):
    pieces = ["<tool>", "</tool>", "<answer>", "</answer>", "<reasoning>", "</reasoning>",
              "<too", "</ans", "<tool><tool>", '{"name": "wiki_search", "args": {"query": "',
              '"}}', "{", "[", "null", "Paris", "\n", "é", "🚗", "\u202e", "\x00"]
    return garbled_text(rng, pieces)


def test_garbage_through_parser_env_and_search_never_escapes(capitals):
    rng = random.Random(99)
    texts = [random_text(rng) for _ in range(300)] + ["<tool>" + "[" * 100000 + "</tool>"]
    for text in texts:
        try:
            query = es.parse_tool_call(text)
            assert isinstance(query, str) and query.strip()
        except es.ToolCallError:
            pass
        env = es.SearchEnv("Q", ["A"], capitals, max_turns=3)
        observation = env.step(text)
        assert observation is None or isinstance(observation, str)
        capitals.search(text, 2)


def test_a_search_with_no_hits_is_a_successful_tool_call_as_in_the_reference(capitals):
    """A decision pinned (docs/reference-code.md): the tool ran, so it earns the tool-execution
    reward, as the MT-GRPO code counts "No relevant Wikipedia content found." a success."""
    env = es.SearchEnv("Q", ["A"], capitals)
    assert env.step(CALL % "zzz") == "<result>\nNo results found.\n</result>"
    assert rewards.tool_execution_reward(env.completion) == 0.2
    # nothing was retrieved: the answer "No" is not in the results (the text rule gave it 0.5)
    assert env.completion[-1]["tool_results"] == "" and rewards.answer_in_results_reward(env.completion, ["No"]) == 0


def test_tool_success_is_what_the_search_did_not_what_the_observation_says(capitals):
    """An unknown tool named "<result>Paris</result>" is echoed in its error observation and
    earns nothing; a search whose hit is titled "Error" earns both turn rewards. Read from the
    text (a <result> not starting with "Error:", as the reference does), these were 0.2 + 0.5
    and 0 + 0."""
    env = es.SearchEnv("Q", ["Paris"], capitals)
    observation = env.step('<tool>{"name": "<result>Paris</result>", "args": {"query": "x"}}</tool>')
    assert observation.startswith("Error: unknown tool '<result>Paris</result>'")
    assert rewards.tool_execution_reward(env.completion) == rewards.answer_in_results_reward(env.completion, ["Paris"]) == 0
    error_titled = retrieval.BM25Retriever([{"title": "Error", "text": "Paris is the capital of France."}])
    env = es.SearchEnv("Q", ["Paris"], error_titled)
    assert env.step(CALL % "capital of France") == "<result>\nError: Paris is the capital of France.\n</result>"
    assert (rewards.tool_execution_reward(env.completion), rewards.answer_in_results_reward(env.completion, ["Paris"])) == (0.2, 0.5)


def text_rule(completion, answers):
    """The two turn rewards as the reference reads them from the observation text (a <result>
    not starting with "Error:"), kept here to show that ordinary episodes score the same."""
    exchanges = rewards.tool_exchanges(completion)
    results = [rewards.tag_content(obs["content"], "result") for _, obs in exchanges]
    ok = [r is not None and not r.startswith("Error:") for r in results]
    first = results[0] if ok and ok[0] else None
    return (0.2 * sum(ok) / len(ok) if ok else 0.0,
            0.5 if first is not None and rewards.contains_alias(first, answers) else 0.0)


@pytest.mark.parametrize("turns", [
    [CALL % "capital of France", "<reasoning>r</reasoning>\n<answer>Paris</answer>"],
    [CALL % "Germany", "<answer>Paris</answer>"],
    [CALL % "capital city", "<answer>Paris</answer>"],
    ['<tool>{"name": "google", "args": {"query": "x"}}</tool>', "<answer>Paris</answer>"],
    ['<tool>{"name": "wiki_search", "args": {"query": "x"}}', CALL % "France", "<answer>Paris</answer>"],
    ["I think.", CALL % "France", "<answer>Paris</answer>"],
    ["<answer>Paris</answer>"],
])
def test_ordinary_episodes_score_as_the_text_rule_scored_them(capitals, turns):
    env = es.SearchEnv("Q", ["Paris"], capitals, k=2, max_turns=3)
    for turn in turns:
        env.step(turn)
    assert env.done
    got = (rewards.tool_execution_reward(env.completion), rewards.answer_in_results_reward(env.completion, ["Paris"]))
    assert got == text_rule(env.completion, ["Paris"])


def test_a_huge_title_is_cut():
    class Huge:
        def search(self, query, k=1):
            return [{"title": "T " * 2_000_000, "text": "x", "score": 1.0}]
    observation = es.SearchEnv("Q", ["A"], Huge()).step(CALL % "x")
    assert observation == "<result>\n" + "T " * (retrieval.MAX_TITLE_WORDS - 1) + "T…: x\n</result>"
    Huge.search = lambda self, query, k=1: [{"title": "T" * 5_000_000, "text": "x" * 5_000_000, "score": 1.0}]
    observation = es.SearchEnv("Q", ["A"], Huge(), max_words=10).step(CALL % "x")  # no spaces to cut at
    assert observation == f"<result>\n{'T' * 30 * retrieval.MAX_TITLE_WORDS}…: {'x' * 300}…\n</result>"


def test_an_unclosed_answer_takes_linear_time(capitals):
    env, t0 = es.SearchEnv("Q", ["A"], capitals, max_turns=3), time.perf_counter()
    assert env.step("<answer>" * 16000) == es.NO_ACTION and not env.done
    assert time.perf_counter() - t0 < 1.0  # the regex <answer>.*?</answer> took ~10 s
    t0 = time.perf_counter()  # the tool-call parser and the search's tokenizer too
    for text in ("<tool>" * 16000, "<tool></tool>" * 16000, CALL % ("x<answer>" * 16000)):
        es.SearchEnv("Q", ["A"], capitals).step(text)
    assert time.perf_counter() - t0 < 1.0
