"""tools/scale_trl.py against our trainer on the same scripted rollouts: the episodes' tokens, the
per-token advantages, no loss on environment tokens, and the loss and its gradient equal
loss.policy_update's (TRL loss_type dapo = ours token, grpo = ours seq); one TRL step runs."""
import json

import pytest
import torch
from transformers import AutoModelForCausalLM

pytestmark = pytest.mark.scale  # requirements-scale.txt; without it the module is skipped whole:
pytest.importorskip("trl")  # tools/scale_trl.py stops at its import without TRL

import loss  # noqa: E402
import retrieval  # noqa: E402
import rewards  # noqa: E402
from tools import scale_trl  # noqa: E402
import train  # noqa: E402
from test_train import DOCS, TURN1, TURN2, WRONG, args_for, scripted  # noqa: E402

QUESTION = {"question": "Capital of France?", "answers": ["Paris"]}


def make_trainer(tmp_path, model_dir, *flags):
    qa = tmp_path / "train.jsonl"
    qa.write_text(json.dumps(QUESTION) + "\n")
    task, config = scale_trl.parse(["--model", model_dir, "--train_questions", str(qa), "--output_dir",
                                    str(tmp_path / "out"), "--use_cpu", "--bf16", "false", "--num_generations", "2",
                                    "--per_device_train_batch_size", "2", "--max_steps", "1", "--save_strategy", "no",
                                    "--activation_checkpointing", "false", "--temperature", "0.7", *flags])
    retriever = retrieval.BM25Retriever(DOCS)
    trainer = scale_trl.TurnLevelGRPOTrainer(
        model=model_dir, reward_funcs=scale_trl.reward_funcs(rewards.MT_GRPO), args=config,
        train_dataset=scale_trl.training_set([QUESTION], retriever, scale_trl.run_args(task)),
        rollout_func=scale_trl.make_rollout(task, retriever), algo=task.algo, alpha=task.alpha)
    return trainer, retriever


def both_sides(monkeypatch, tmp_path, tiny_model_dir, tokenizer, *flags):
    """TRL's batch and our samples for one group of G = 2 scripted episodes: episode 0 searches
    and answers right, episode 1 answers wrong at once."""
    trainer, retriever = make_trainer(tmp_path, tiny_model_dir, *flags)
    trainer.model.eval()
    scripted(monkeypatch, tokenizer, [[TURN1, WRONG], [TURN2]])
    batch = trainer._generate_and_score_completions([dict(trainer.train_dataset[0]) for _ in range(2)])
    scripted(monkeypatch, tokenizer, [[TURN1, WRONG], [TURN2]])
    samples = train.tool_step({"policy": None}, tokenizer, [QUESTION], retriever,
                                args_for(one_shot=True, temperature=0.7))[0]
    return trainer, batch, samples


def test_trl_sees_the_same_tokens_and_per_token_advantages(monkeypatch, tmp_path, tiny_model_dir, tokenizer):
    trainer, batch, samples = both_sides(monkeypatch, tmp_path, tiny_model_dir, tokenizer)
    prompt = batch["prompt_ids"].shape[1]
    for i, s in enumerate(samples):
        n = int(batch["completion_mask"][i].sum())
        assert s.ids[:prompt] == batch["prompt_ids"][i].tolist()  # one question: no prompt padding
        assert s.ids[prompt:] == batch["completion_ids"][i, :n].tolist()
        assert batch["advantages"][i, :n].tolist() == pytest.approx(s.adv[prompt:], abs=1e-6)
        assert batch["tool_mask"][i, :n].tolist() == s.mask[prompt:]
    # hand check (G = 2, std of two values = |d| / sqrt 2): episode 0 wins the turn and the outcome,
    # so A_1 = 1/sqrt2 + 1/sqrt2 on its turn-1 tokens and A_2 = 1/sqrt2 on turn 2, episode 1 the negatives
    good, bad = batch["advantages"]
    turn = [k for k in samples[0].turn[prompt:]]
    assert good[turn.index(1)].item() == pytest.approx(2 ** 0.5, abs=1e-3)
    assert good[turn.index(2)].item() == pytest.approx(2 ** -0.5, abs=1e-3)
    assert good[turn.index(0)].item() == 0  # the search result between the turns
    assert bad[0].item() == pytest.approx(-(2 ** 0.5), abs=1e-3)
    logged = {name: trainer._metrics["eval"][f"rewards/{name}/mean"][-1] for name in rewards.MAXIMA}
    assert logged["tool_execution"] == pytest.approx(0.1) and logged["exact_match"] == pytest.approx(0.5)


def test_environment_tokens_carry_no_loss(monkeypatch, tmp_path, tiny_model_dir, tokenizer):
    trainer, batch, samples = both_sides(monkeypatch, tmp_path, tiny_model_dir, tokenizer)
    env_tokens = (batch["tool_mask"] == 0) & (batch["completion_mask"] == 1)
    assert env_tokens.sum() > 10  # the <result> block and the chat headers around it
    before = trainer.compute_loss(trainer.model, batch).item()
    poisoned = dict(batch, advantages=torch.where(env_tokens, 1e6, batch["advantages"]))
    assert trainer.compute_loss(trainer.model, poisoned).item() == pytest.approx(before, abs=1e-6)


@pytest.mark.parametrize("trl_loss,ours", [("dapo", "token"), ("grpo", "seq")])
def test_loss_and_gradient_equal_policy_update(monkeypatch, tmp_path, tiny_model_dir, tokenizer, trl_loss, ours):
    trainer, batch, samples = both_sides(monkeypatch, tmp_path, tiny_model_dir, tokenizer, "--loss_type", trl_loss)
    theirs_model, our_model = trainer.model, AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()  # same weights
    theirs = trainer.compute_loss(theirs_model, batch)
    theirs.backward()
    before = [p.detach().clone() for p in our_model.parameters()]
    args = args_for(temperature=0.7, beta=0.0, epsilon=0.2, epsilon_high=0.2, loss_type=ours,
                    max_grad_norm=1e9, micro_batch_size=1)
    got = loss.policy_update(our_model, torch.optim.SGD(our_model.parameters(), lr=1.0), samples, args)
    assert got["loss"] == pytest.approx(theirs.item(), abs=1e-6)
    assert theirs.item() != 0  # the two episodes' token counts differ, so the weighted sum is not 0
    for p, q, b in zip(theirs_model.parameters(), our_model.parameters(), before):
        if p.grad is not None:
            torch.testing.assert_close(b - q.detach(), p.grad, rtol=1e-4, atol=1e-7)  # SGD lr 1: step = -grad


def test_one_trl_step_runs_and_logs_rewards(tmp_path, tiny_model_dir):
    trainer, _ = make_trainer(tmp_path, tiny_model_dir, "--max_completion_length", "8")
    trainer.train()
    logged = trainer.state.log_history[0]
    assert "rewards/tool_execution/mean" in logged and "rewards/exact_match/mean" in logged
    assert trainer.state.global_step == 1


def test_bad_flags_are_one_line_errors(capsys):
    for flags in (["--algo", "at"], ["--loss_type", "bnpo"], ["--num_generations", "1"], ["--env", "sokoban"]):
        with pytest.raises(SystemExit):
            scale_trl.parse(flags)
        assert "error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        scale_trl.parse(["--algo", "igpo"])  # its information gain needs train.py's model calls
    assert "its inputs beyond the rewards are made by train.py only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        scale_trl.parse(["--algo", "mt_ppo"])  # a critic: TRL's GRPOTrainer has none
    assert "it learns a critic, and TRL's GRPOTrainer trains none" in capsys.readouterr().err


def test_merged_reward_advantages_equal_trls_own(monkeypatch, tmp_path, tiny_model_dir, tokenizer):
    """TRL's reward is the sum of the six rewards, R^T + R^O: GRPO-MR's. So with --algo mr our
    per-token advantages must equal the sequence advantages TRL computed itself (its own
    normalisation, before the override) on every model token: a check independent of mtgrpo."""
    trainer, batch, _ = both_sides(monkeypatch, tmp_path, tiny_model_dir, tokenizer, "--algo", "mr")
    trls_own = list(trainer._logs["advantages"])[-2:]
    assert trls_own[0] == pytest.approx(2 ** -0.5, abs=1e-3)  # two episodes: +-1/sqrt2
    for i, a in enumerate(trls_own):
        model_tokens = (batch["tool_mask"][i] == 1) & (batch["completion_mask"][i] == 1)
        assert batch["advantages"][i][model_tokens].tolist() == pytest.approx([a] * int(model_tokens.sum()), abs=1e-5)
