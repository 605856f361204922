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


def test_a_huge_title_is_cut_and_an_unclosed_answer_takes_linear_time():
    class Huge:
        def search(self, query, k=1):
            return [{"title": "T " * 2_000_000, "text": "x", "score": 1.0}]
    observation = es.SearchEnv("Q", ["A"], Huge()).step(CALL % "x")
    assert observation == "<result>\n" + "T " * (es.MAX_TITLE_WORDS - 1) + "T…: x\n</result>"
    Huge.search = lambda self, query, k=1: [{"title": "T" * 5_000_000, "text": "x" * 5_000_000, "score": 1.0}]
    observation = es.SearchEnv("Q", ["A"], Huge(), max_words=10).step(CALL % "x")  # no spaces to cut at
    assert observation == f"<result>\n{'T' * 30 * es.MAX_TITLE_WORDS}…: {'x' * 300}…\n</result>"
    env, t0 = es.SearchEnv("Q", ["A"], Huge(), max_turns=3), time.perf_counter()
    env.step("<answer>" * 20000)
    assert time.perf_counter() - t0 < 1.0 and not env.done  # the regex took ~10 s
