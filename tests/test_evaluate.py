"""tools/evaluate.py: Table-5 metrics on scripted search episodes, Sokoban success and moves on
scripted moves, a run's settings read from its checkpoint, and clear errors."""
import json
import os
import shutil

import pytest
from test_train import DOCS, TURN1, TURN2, WRONG, ids

import sokoban
from moves import constant_successes
from tools import evaluate
import fast.decode
import rewards


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def search_flags(tmp_path, tiny_model_dir):
    questions = [{"question": "Capital of France?", "answers": ["Paris"]},
                 {"question": "Capital of Germany?", "answers": ["Berlin"]}]
    return ["--model", tiny_model_dir, "--corpus", write_jsonl(tmp_path / "corpus.jsonl", DOCS),
            "--train-questions", write_jsonl(tmp_path / "train.jsonl", questions),
            "--test-questions", write_jsonl(tmp_path / "test.jsonl", questions),
            "--one-shot", "false", "--bf16", "false", "--n", "2", "--json"]


def script(monkeypatch, tok, calls):
    calls = [[ids(tok, t) for t in row] for row in calls]
    monkeypatch.setattr(fast.decode, "generate_turn", lambda model, tok, prefixes, *a, **k: calls.pop(0))


@pytest.mark.parametrize("chunk, calls", [("2", [[TURN1, TURN1], [TURN2, WRONG]]),
                                          ("1", [[TURN1], [TURN2], [TURN1], [WRONG]])])
def test_search_metrics_as_rates_and_reward_units(tmp_path, tiny_model_dir, monkeypatch, capsys,
                                                  tokenizer, chunk, calls):
    script(monkeypatch, tokenizer, calls)
    out = evaluate.main(search_flags(tmp_path, tiny_model_dir) + ["--chunk", chunk])
    # both search "capital of France" (a valid call: tool rate 1); only France's result holds
    # its answer (0.5 of 2); France answers Paris, Germany answers Lyon (exact match 1 of 2)
    assert out["tool_execution"] == 1.0 and out["tool_execution_reward"] == pytest.approx(0.2)
    assert out["answer_in_results"] == 0.5 and out["answer_in_results_reward"] == pytest.approx(0.25)
    assert out["exact_match"] == 0.5 and out["exact_match_reward"] == 0.5
    episode = [{"role": "assistant", "content": "<reasoning>" + TURN1}, {"role": "user", "content": "obs"},
               {"role": "assistant", "content": "<reasoning>" + TURN2}]
    assert out["format"] == pytest.approx(rewards.xml_format_reward(episode) / 0.2)
    assert 0 < out["format"] <= 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last)["exact_match"] == 0.5 and {"tool_execution", "format"} <= json.loads(last).keys()


def test_sokoban_success_and_moves(tiny_model_dir, monkeypatch, tokenizer):
    monkeypatch.setattr(fast.decode, "generate_turn",
                        lambda model, tok, prefixes, *a, **k: [ids(tokenizer, "R</answer>")] * len(prefixes))
    out = evaluate.main(["--env", "sokoban", "--model", tiny_model_dir, "--n", "5", "--chunk", "2", "--bf16", "false",
                         "--max-turns", "2", "--size", "5", "--reverse-steps", "4", "--min-solution", "1", "--max-solution", "0"])
    # the executor plays R in each of its 2 turns: success and moves of "RR" on each test level
    levels = tuple(sokoban.level_for(10 ** 9 + i, 5, 1, 4) for i in range(5))
    played = [sokoban.play(level, "RR") for level in levels]
    assert out["success"] == pytest.approx(sum(sokoban.is_solved(p[0]) for p in played) / 5)
    assert out["moves"] == pytest.approx(sum(p[3] for p in played) / 5)
    # a constant answer: the same on another level's board, one answer sequence, no better than the best constant
    assert out["board_ablation_success"] == out["success"] and out["distinct_answers"] == 1
    assert out["best_constant_success"] == max(constant_successes(sokoban.solves, levels, 2).values()) >= out["success"]
    assert out["n"] == 5 and out["split"] == "test" and out["greedy"]


def test_a_checkpoint_brings_its_run_settings(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "checkpoint")
    (run / "args.json").write_text(json.dumps({"env": "sokoban", "algo": "at", "size": 6, "max_turns": 3,
                                               "learning_rate": 0.5}))
    _, args = evaluate.parse_args(["--model", str(run / "checkpoint"), "--max-turns", "1"])
    assert (args.env, args.size, args.max_turns) == ("sokoban", 6, 1)  # flags given here win
    assert args.learning_rate != 0.5  # only task settings are read


def test_clear_errors(tmp_path, tiny_model_dir):
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--n", "0"])
    _, args = evaluate.parse_args(["--env", "sokoban", "--policy", "per-role", "--model", tiny_model_dir])
    with pytest.raises(SystemExit, match="planner/ and executor/"):
        evaluate.load_policy(tiny_model_dir, args, "cpu")
    assert os.path.isdir(tiny_model_dir)


def test_a_test_question_longer_than_the_context_is_refused_before_any_episode(tmp_path, tiny_model_dir, monkeypatch):
    """The tiny model's context is 2048 tokens: a 3,000-word test question stops tools/evaluate.py
    with one line, before a single episode is played."""
    flags = search_flags(tmp_path, tiny_model_dir)
    long = [{"question": "why " * 3000 + "?", "answers": ["A"]}, {"question": "Q?", "answers": ["A"]}]
    flags[flags.index("--test-questions") + 1] = write_jsonl(tmp_path / "long.jsonl", long)
    monkeypatch.setattr(fast.decode, "generate_turn", lambda *a, **k: pytest.fail("an episode was played"))
    with pytest.raises(SystemExit, match=r"a prompt of \d+ tokens plus 128 new ones does not fit the model's context of 2048"):
        evaluate.main(flags)
