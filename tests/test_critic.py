"""MT-PPO's critic (critic.py): turn-level GAE by hand, the boundary where V(s_k) is read, the
whitening, and --algo mt_ppo / ppo through training, saving, resuming and evaluation."""
import json
import os

import pytest
import torch

import critic
import estimators
import train
from conftest import full_args
from policy import load_critic
from sample import Sample
from test_train import crash_at, strip_times, tiny_run


def close(a, b):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64), atol=1e-9)


# ---------------------------------------------------------------- GAE by hand
def test_gae_by_hand_on_a_two_turn_episode():
    """K = 2, R^T = 0.5, R^O = 1, V = [0.3, 0.6], gamma 0.9, lambda 0.5:
    delta_2 = 1 + 0 - 0.6 = 0.4; A_2 = 0.4
    delta_1 = 0.5 + 0.9 * 0.6 - 0.3 = 0.74; A_1 = 0.74 + 0.45 * 0.4 = 0.92."""
    r, played = critic.turn_rewards(torch.tensor([[[0.5]]]), torch.tensor([[1.0]]), torch.tensor([[2]]))
    assert close(r, [[[0.5, 1.0]]])
    A = critic.gae(r, torch.tensor([[[0.3, 0.6]]]), played, gamma=0.9, lam=0.5)
    assert close(A, [[[0.92, 0.4]]])


def test_gae_by_hand_on_three_turns_and_an_episode_that_answers_early():
    """K = 3. Episode a plays 3 turns: R^T = [0.2, 0.4], R^O = 1, V = [0.5, 0.25, 0.75], gamma 1, lambda 0.5:
      delta_3 = 1 - 0.75 = 0.25; delta_2 = 0.4 + 0.75 - 0.25 = 0.9; delta_1 = 0.2 + 0.25 - 0.5 = -0.05
      A_3 = 0.25; A_2 = 0.9 + 0.5 * 0.25 = 1.025; A_1 = -0.05 + 0.5 * 1.025 = 0.4625.
    Episode b answers at turn 1 (R^O = 0.5; its R^T_1 = 0.3 is not a call's: the last turn earns the
    outcome), V = [0.1, 9, 9] (values after its end are ignored): A_1 = 0.5 - 0.1 = 0.4, then 0, 0.
    PPO puts only R^O at the last turn: a's A_3 = 0.25, A_2 = 0.75 - 0.25 + 0.125 = 0.625,
    A_1 = 0.25 - 0.5 + 0.3125 = 0.0625."""
    R_T, R_O, turns = torch.tensor([[[0.2, 0.4], [0.3, 0.0]]]), torch.tensor([[1.0, 0.5]]), torch.tensor([[3, 1]])
    V = torch.tensor([[[0.5, 0.25, 0.75], [0.1, 9.0, 9.0]]])
    r, played = critic.turn_rewards(R_T, R_O, turns)
    assert close(critic.gae(r, V, played, gamma=1.0, lam=0.5), [[[0.4625, 1.025, 0.25], [0.4, 0.0, 0.0]]])
    r, played = critic.turn_rewards(R_T, R_O, turns, outcome_only=True)
    assert close(r, [[[0.0, 0.0, 1.0], [0.5, 0.0, 0.0]]])
    assert close(critic.gae(r, V, played, gamma=1.0, lam=0.5), [[[0.0625, 0.625, 0.25], [0.4, 0.0, 0.0]]])


def test_lambda_one_is_the_return_less_the_value_and_the_targets_are_the_returns():
    """gamma = lambda = 1 (the defaults): A_k = sum of the rewards from k on - V(s_k), whatever V is;
    the critic's target R_k = A_k + V(s_k) is the return itself."""
    R_T, R_O, turns = torch.tensor([[[0.2, 0.4]]]), torch.tensor([[1.0]]), torch.tensor([[3]])
    V = torch.tensor([[[0.5, 0.25, 0.75]]])
    r, played = critic.turn_rewards(R_T, R_O, turns)
    assert close(critic.gae(r, V, played), [[[1.6 - 0.5, 1.4 - 0.25, 1.0 - 0.75]]])
    samples = [Sample(ids=[])]
    for name, want in (("mt_ppo", [1.6, 1.4, 1.0]), ("ppo", [1.0, 1.0, 1.0])):
        critic.Critic.targets(type("C", (), {"args": full_args("--algo", name)})(), samples, R_T, R_O, turns, V,
                              estimators.BY_NAME[name].fn)
        assert close(samples[0].returns, want) and close(samples[0].values, [0.5, 0.25, 0.75])


def test_whitening_weighs_each_turn_by_its_tokens_and_skips_unplayed_turns():
    """A = [2, 0 | 1, (unplayed)] with tokens [1, 3 | 4, 7]: mean over the 8 tokens = (2 + 0 + 4) / 8
    = 0.75; unbiased var = (1.5625 + 3 * 0.5625 + 4 * 0.0625) / 7 = 0.5; the unplayed turn stays 0."""
    A = torch.tensor([[[2.0, 0.0], [1.0, 5.0]]], dtype=torch.float64)
    played = torch.tensor([[[True, True], [True, False]]])
    w = critic.whiten(A, torch.tensor([[[1, 3], [4, 7]]]), played)
    s = 0.5 ** 0.5
    assert close(w, [[[1.25 / s, -0.75 / s], [0.25 / s, 0.0]]])
    assert close(critic.whiten(A, torch.tensor([[[1, 3], [4, 7]]]), played, "none"), [[[2.0, 0.0], [1.0, 0.0]]])


def test_the_rows_put_zeros_on_unplayed_turns_and_give_credit_with_equal_rewards():
    """A critic's baseline is V, not the group: equal rewards still give advantages when V differs."""
    R_T, R_O, turns = torch.zeros(1, 2, 1), torch.ones(1, 2), torch.tensor([[2, 1]])
    V, tokens = torch.tensor([[[0.2, 0.9], [0.6, 0.0]]]), torch.tensor([[[3, 3], [3, 0]]])
    for name in ("mt_ppo", "ppo"):
        A = estimators.BY_NAME[name].fn(R_T, R_O, turns, 1.0, "group", values=V, tokens=tokens)
        assert A[0, 1, 1] == 0 and A.abs().sum() > 0


# ---------------------------------------------------------------- where V(s_k) is read
class PositionCritic(torch.nn.Module):
    """A stand-in critic whose output at each position is the token id there: V(s_k) names the token read."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))

    def forward(self, input_ids, attention_mask):
        return type("Out", (), {"logits": (input_ids.float() * self.w)[..., None]})


def test_the_value_of_turn_k_is_read_at_the_last_token_before_it():
    """Prompt 10 11 12, turn 1 = 20 21, tool result 30 31, turn 2 = 40 41: V(s_1) at 12, V(s_2) at 31.
    Reading one token later would see the turn's own first token (20, 40): the value would judge the
    action it is a baseline for."""
    s = Sample(ids=[10, 11, 12, 20, 21, 30, 31, 40, 41], turn=[0, 0, 0, 1, 1, 0, 0, 2, 2], starts=[3, 7])
    assert critic.boundaries(s, 2) == [2, 6]
    values = critic.turn_values(PositionCritic(), [s, Sample(ids=[10, 11, 20], turn=[0, 0, 1], starts=[2])], 2, bf16=False)
    assert values.tolist() == [[12.0, 31.0], [11.0, 0.0]]


def test_the_value_loss_by_hand_with_its_clip():
    """Values 12 and 31 (PositionCritic), targets 13 and 30, V_old 12 and 30.2: the first is inside the
    clip (V - V_old = 0), loss 1/2 (1); the second moved 0.8 > 0.5, clipped to 30.7, so the larger
    of (31 - 30)^2 = 1 and (30.7 - 30)^2 = 0.49 counts: 1/2 (1 + 1) / 2 = 0.5."""
    s = Sample(ids=[10, 11, 12, 20, 21, 30, 31, 40, 41], turn=[0, 0, 0, 1, 1, 0, 0, 2, 2], starts=[3, 7])
    s.returns, s.values = [13.0, 30.0], [12.0, 30.2]
    model = PositionCritic()
    log = critic.value_update(model, torch.optim.SGD(model.parameters(), lr=0.0), [s], 2,
                              full_args("--algo", "mt_ppo", micro_batch_size=8, bf16=False))
    assert abs(log["value_loss"] - 0.5) < 1e-6
    s.returns = [13.0, 32.0]  # now the clipped value is further from the target: (30.7 - 32)^2 = 1.69 > 1
    log = critic.value_update(model, torch.optim.SGD(model.parameters(), lr=0.0), [s], 2,
                              full_args("--algo", "mt_ppo", micro_batch_size=8, bf16=False))
    assert abs(log["value_loss"] - 0.5 * (1 + 1.69) / 2) < 1e-6


# ---------------------------------------------------------------- through train.py
@pytest.mark.parametrize("algo", ["mt_ppo", "ppo"])
def test_a_critic_row_trains_saves_resumes_and_evaluates(tmp_path, answering_model_dir, monkeypatch, algo):
    """A run crashed at step 4's save and resumed equals an uninterrupted one: its log, its policy and
    its critic (saved in checkpoint/critic, its AdamW state in trainer_state.pt)."""
    from transformers import AutoModelForTokenClassification
    trains = ("--steps", "4", "--num-generations", "4", "--algo", algo, "--critic-learning-rate", "1e-3")
    full, flags = tiny_run(tmp_path, answering_model_dir, "full", *trains)
    history = train.main(flags)
    assert all(h["value_loss"] > 0 and h["t_critic"] > 0 and h["t_values"] > 0 for h in history[1:])
    assert "eval_exact_match" in history[-1]
    crashed, flags = tiny_run(tmp_path, answering_model_dir, "crashed", *trains)
    with crash_at(monkeypatch, 4):
        with pytest.raises(SystemExit, match="stopped"):
            train.main(flags)
    train.main(["--resume", crashed])
    assert strip_times(os.path.join(crashed, "log.jsonl")) == strip_times(os.path.join(full, "log.jsonl"))
    a, b = (AutoModelForTokenClassification.from_pretrained(os.path.join(run, "checkpoint", "critic")).state_dict()
            for run in (full, crashed))
    assert all(torch.equal(a[k], b[k]) for k in a)
    first = load_critic(answering_model_dir, "cpu").state_dict()
    assert any(not torch.equal(a[k], first[k]) for k in a)  # the critic learned
    if algo == "mt_ppo":  # tools/credit.py on the checkpoint scores the critic's advantages beside the group rows'
        from tools import credit, credit_report
        measured = str(tmp_path / "credit.json")
        credit.main(["--model", os.path.join(full, "checkpoint"), "--states", "2", "--continuations", "2",
                     "--num-generations", "3", "--bootstrap", "10", "--json", measured, "--pair", "mt_ppo,ppo"])
        result = credit_report.read_result(measured)
        assert all({"mt_ppo", "ppo", "mt"} <= set(r["adv"]) and {"values", "tokens"} <= set(r["group"])
                   for r in result["records"])
        assert "mt_ppo-ppo" in result["figures"]["return"]["turn 1"]["differences"]
        again = json.loads(json.dumps(result))  # --from: the critic's rows again from the values kept
        assert credit.rescore(again, credit.scored(again)) == []
        assert [r["adv"] for r in again["records"]] == [pytest.approx(r["adv"], abs=1e-12) for r in result["records"]]


def test_the_critic_head_is_drawn_from_the_seed_and_leaves_the_random_numbers_as_they_were(tiny_model_dir):
    """Two loads with one seed give one critic, another seed another head; the caller's random
    numbers are where they were (a run's sampling does not depend on whether it has a critic)."""
    torch.manual_seed(5)
    state = torch.get_rng_state()
    a, b = load_critic(tiny_model_dir, "cpu", seed=0), load_critic(tiny_model_dir, "cpu", seed=0)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.score.weight, b.score.weight)
    assert not torch.equal(a.score.weight, load_critic(tiny_model_dir, "cpu", seed=1).score.weight)
    assert not a.training  # dropout off, as the policy's


def test_the_critic_flag_is_refused_where_no_critic_trains():
    import config
    with pytest.raises(SystemExit):
        config.parse_args(["--algo", "mt", "--critic-learning-rate", "1e-4"])
    assert config.parse_args(["--algo", "ppo", "--critic-learning-rate", "1e-4"]).critic_learning_rate == 1e-4
