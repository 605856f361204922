"""The two-role seam (env_two_roles.py, task.Task): Sokoban and Plan-Path play exactly as before it
was cut free of their moves. A scripted sampler (seeded answers: moves, several moves, junk, an
answer left open) drives train.py's real step; the md5 of the step's rollout file (every prompt,
token, reward and advantage) and the evaluation's metrics were recorded on the code before the
seam (commit 7fb8886) and must not change."""
import hashlib
import json
import random

import pytest

import policy
import train

ANSWERS = ["<answer>U</answer>", "<answer>D</answer>", "<answer>L</answer>", "<answer>R</answer>",
           "<answer>U U</answer>", "<answer>L D</answer>", "move up", "<answer>R", "<answer>[\"right\", \"down\"]</answer>"]


def scripted(models, tok, args, stop_strings, greedy=False):
    """A sampler whose answers are drawn from ANSWERS by a seeded generator, in call order."""
    rng = random.Random(1)

    def sample(role, message_lists):
        texts = [rng.choice(ANSWERS) for _ in message_lists]
        return [(policy.prompt_ids(tok, m), tok(t, add_special_tokens=False)["input_ids"], t)
                for m, t in zip(message_lists, texts)]
    return sample


# (env, flags) -> (md5 of rollouts/step_1.jsonl, the evaluation's metrics), recorded at 7fb8886
RECORDED = {
    ('sokoban', 'at', ()): ('76ba2f5f5893c3484a6f29138f5d8954',
        {"eval_success": 0.0, "eval_turns": 4.0, "eval_one_turn": 0.0, "eval_moves": 3.8333333333333335, "eval_box_distance": 1.3333333333333333, "eval_reward_planner": -1.1062500000000004, "eval_reward_executor": -0.1845833333333332, "eval_board_ablation_success": 0.0, "eval_best_constant_success": 0.3333333333333333, "eval_distinct_answers": 6, "eval_success_each": "000000"}),
    ('sokoban', 'grpo', ('--moves-per-turn', '2', '--team-term', 'shared')): ('cf1a8b836e800901c5a0174f5d605988',
        {"eval_success": 0.0, "eval_turns": 4.0, "eval_one_turn": 0.0, "eval_moves": 5.0, "eval_box_distance": 1.6666666666666667, "eval_reward_planner": -0.6929166666666666, "eval_reward_executor": -0.3641666666666666, "eval_board_ablation_success": 0.0, "eval_best_constant_success": 0.5, "eval_distinct_answers": 6, "eval_success_each": "000000"}),
    ('planpath', 'at', ('--moves-per-turn', '2', '--team-term', 'shared')): ('0f45a72855dfd2df34ed3ad1abe130c6',
        {"eval_success": 0.0, "eval_turns": 4.0, "eval_one_turn": 0.0, "eval_moves": 5.0, "eval_distance": 4.666666666666667, "eval_reward_planner": -1.0091666666666668, "eval_reward_executor": -0.6749999999999997, "eval_board_ablation_success": 0.0, "eval_best_constant_success": 0.8333333333333334, "eval_distinct_answers": 6, "eval_success_each": "000000"}),
    ('planpath', 'gigpo', ('--single-agent',)): ('180bd7ea0cc756acda3e9d5c82d1a564',
        {"eval_success": 0.0, "eval_turns": 4.0, "eval_one_turn": 0.0, "eval_moves": 3.5, "eval_distance": 3.8333333333333335, "eval_reward_executor": -0.4970833333333331, "eval_board_ablation_success": 0.0, "eval_best_constant_success": 0.5, "eval_distinct_answers": 6, "eval_success_each": "000000"}),
}
CASES = [("sokoban", "at", ()), ("sokoban", "grpo", ("--moves-per-turn", "2", "--team-term", "shared")),
         ("planpath", "at", ("--moves-per-turn", "2", "--team-term", "shared")),
         ("planpath", "gigpo", ("--single-agent",))]


def play(tmp_path, tiny_model_dir, monkeypatch, env, algo, extra):
    monkeypatch.setattr(train, "chat_sampler", scripted)
    out = tmp_path / "run"
    train.main(["--env", env, "--algo", algo, "--model", tiny_model_dir, "--steps", "1", "--batch-size", "3",
                "--num-generations", "3", "--max-completion-length", "4", "--eval-n", "6", "--eval-every", "1",
                "--bf16", "false", "--out", str(out), *extra])
    rollouts = hashlib.md5((out / "rollouts" / "step_1.jsonl").read_bytes()).hexdigest()
    lines = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    evaluation = {k: v for line in lines for k, v in line.items() if k.startswith("eval_") and k != "eval_t"}
    return rollouts, evaluation


@pytest.mark.parametrize("env,algo,extra", CASES)
def test_the_games_play_as_before_the_seam(tmp_path, tiny_model_dir, monkeypatch, env, algo, extra):
    got = play(tmp_path, tiny_model_dir, monkeypatch, env, algo, extra)
    print(json.dumps([env, algo, list(extra), got]))
    assert got == RECORDED[(env, algo, extra)]
