"""Advantage formulas against numbers computed by hand (norm uses the unbiased std + 1e-4)."""
import pytest
import torch

from mtgrpo import group_norm, token_advantages, turn_advantages

# Hand values used below:
#   [1, 2, 3]:   mean 2, std sqrt((1 + 0 + 1) / 2) = 1        -> [-1, 0, 1] / 1.0001
#   [0, 0, .5]:  mean 1/6, std sqrt((1/36 + 1/36 + 1/9) / 2) = 0.288675
#                -> [-1/6, -1/6, 1/3] / 0.288775 = [-0.577150, -0.577150, 1.154301]
#   [1, 2, 3.5]: mean 13/6, std sqrt((49/36 + 1/36 + 64/36) / 2) = 1.258306
#                -> [-7/6, -1/6, 4/3] / 1.258406 = [-0.927098, -0.132443, 1.059541]
N1 = 1 / 1.0001
T = [-0.577150, -0.577150, 1.154301]


def close(a, b):
    assert torch.allclose(torch.as_tensor(a, dtype=torch.float64),
                          torch.as_tensor(b, dtype=torch.float64), atol=1e-5), (a, b)


def test_group_norm_by_hand():
    close(group_norm(torch.tensor([[1.0, 2.0, 3.0]])), [[-N1, 0, N1]])
    close(group_norm(torch.tensor([[0.0, 0.0, 0.5]])), [T])


def test_batch_and_no_scaling_by_hand():
    # [[1, 2, 3], [0, 0, 4]]: centred [-1, 0, 1] and [-4/3, -4/3, 8/3]; group stds 1 and 2.309401.
    # batch: std of all six, mean 5/3, sum of squares 40/3, std sqrt(40/3/5) = 1.632993 (+1e-4)
    r = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 4.0]], dtype=torch.float64)
    close(group_norm(r, "group"), [[-N1, 0, N1], [-0.577325, -0.577325, 1.154651]])
    close(group_norm(r, "batch"), [[-0.612335, 0, 0.612335], [-0.816447, -0.816447, 1.632893]])
    close(group_norm(r, "none"), [[-1, 0, 1], [-4 / 3, -4 / 3, 8 / 3]])
    equal = torch.tensor([[0.7, 0.7, 0.7], [0.0, 1.0, 2.0]], dtype=torch.float64)
    for scale in ("batch", "none"):  # an equal-reward group stays exactly 0, one sample too
        assert (group_norm(equal, scale)[0] == 0).all() and (group_norm(torch.tensor([[0.3]]), scale) == 0).all()
    adv = turn_advantages(r[:, :, None], torch.zeros(2, 3), "mt", scale="none")  # A_1 = R^T - mean
    close(adv[..., 0], [[-1, 0, 1], [-4 / 3, -4 / 3, 8 / 3]])


def test_equal_rewards_and_single_sample_give_zero_not_nan():
    close(group_norm(torch.tensor([[0.7, 0.7, 0.7]])), [[0, 0, 0]])
    close(group_norm(torch.tensor([[0.3]])), [[0]])
    for algo in ("or", "mr", "mt"):
        adv = turn_advantages(torch.ones(2, 1, 1), torch.ones(2, 1), algo)  # G = 1
        assert adv.shape == (2, 1, 2) and not adv.isnan().any() and (adv == 0).all()
        adv = turn_advantages(torch.full((1, 4, 1), 0.2), torch.full((1, 4), 1.9), algo)
        assert (adv == 0).all()


def test_k2_or_mr_mt():
    turn = torch.tensor([[[0.0], [0.0], [0.5]]])  # (1 group, G=3, K-1=1)
    outcome = torch.tensor([[1.0, 2.0, 3.0]])
    close(turn_advantages(turn, outcome, "or")[0], [[-N1, -N1], [0, 0], [N1, N1]])
    mr = [-0.927098, -0.132443, 1.059541]
    close(turn_advantages(turn, outcome, "mr")[0], [[m, m] for m in mr])
    # MT-GRPO, K = 2: A_1 = norm(R^T) + norm(R^O), A_2 = norm(R^O)
    close(turn_advantages(turn, outcome, "mt")[0],
          [[T[0] - N1, -N1], [T[1], 0], [T[2] + N1, N1]])


def test_k3_mt_with_alpha():
    # turn 1 rewards [0, 0, .5], turn 2 rewards [1, 2, 3], outcome [3, 2, 1], alpha = 0.5
    turn = torch.tensor([[[0.0, 1.0], [0.0, 2.0], [0.5, 3.0]]])
    outcome = torch.tensor([[3.0, 2.0, 1.0]])
    a = turn_advantages(turn, outcome, "mt", alpha=0.5)[0]
    # A_1 = nT1 + .5 nT2 + .25 nO ; A_2 = nT2 + .5 nO ; A_3 = nO
    close(a[:, 0], [T[0] - 0.5 * N1 + 0.25 * N1, T[1], T[2] + 0.5 * N1 - 0.25 * N1])
    close(a[:, 1], [-N1 + 0.5 * N1, 0, N1 - 0.5 * N1])
    close(a[:, 2], [N1, 0, -N1])
    # GRPO-MR: turn sums [1, 2, 3.5] + outcome [3, 2, 1] = [4, 4, 4.5] -> same norm as [0, 0, .5]
    close(turn_advantages(turn, outcome, "mr")[0], [[t, t, t] for t in T])


def test_groups_are_normalised_separately():
    turn = torch.tensor([[[0.0], [0.5]], [[0.0], [0.0]]])
    outcome = torch.tensor([[0.0, 0.0], [1.0, 3.0]])
    a = turn_advantages(turn, outcome, "mt")
    # two values a < b: +-((b - a) / 2) / ((b - a) / sqrt 2 + 1e-4)
    #   turn [0, .5] -> +-0.25 / 0.353653 = +-0.706907;  outcome [1, 3] -> +-1 / 1.414314 = +-0.707057
    close(a[0], [[-0.706907, 0], [0.706907, 0]])  # group 0: outcome [0, 0] gives 0
    close(a[1], [[-0.707057, -0.707057], [0.707057, 0.707057]])  # group 1: turn [0, 0] gives 0


def test_bad_input():
    with pytest.raises(ValueError, match="algo"):
        turn_advantages(torch.zeros(1, 2, 1), torch.zeros(1, 2), "ppo")
    with pytest.raises(ValueError, match="groups, G"):
        turn_advantages(torch.zeros(1, 2), torch.zeros(1, 2), "mt")


def test_token_broadcast_and_loss_mask():
    # prompt (0), turn 1, environment (0), turn 2: A_1 = 0.5, A_2 = -2
    adv, mask = token_advantages([0, 0, 1, 1, 0, 2], [0.5, -2.0])
    assert adv == [0, 0, 0.5, 0.5, 0, -2.0]
    assert mask == [0, 0, 1, 1, 0, 1]  # environment tokens carry no loss
    assert token_advantages([0, 0], [1.0]) == ([0.0, 0.0], [0, 0])  # no model token at all


def test_an_episode_without_a_tool_result_keeps_the_turn_level_form():
    """A decision pinned: the MT-GRPO reference code gives an episode with no tool result the
    merged norm(R^T + R^O) on all its tokens; this code keeps the paper's formula for every
    episode. G = 2: episode a searched (R^T 0.7, R^O 1.0), episode b answered at once (R^T 0,
    R^O 0.5; its only turn is turn 1).
      norm(R^T) = [0.35, -0.35] / (0.494975 + 1e-4) = [0.706964, -0.706964]
      norm(R^O) = [0.25, -0.25] / (0.353553 + 1e-4) = [0.706908, -0.706908]
      b's turn-1 tokens: A_1 = -1.413871   (merged, as the reference: norm([1.7, 0.5]) = -0.707024)"""
    A = turn_advantages(torch.tensor([[[0.7], [0.0]]]), torch.tensor([[1.0, 0.5]]), "mt")
    adv, mask = token_advantages([0, 0, 1, 1], A[0, 1].tolist())  # prompt, then b's turn-1 tokens
    assert adv == pytest.approx([0, 0, -1.413871, -1.413871], abs=1e-6) and mask == [0, 0, 1, 1]


def test_alpha_at_two_turns_weighs_the_outcome_in_the_first_turn_and_every_text_says_so():
    """At K = 2 the K-turn form gives A_1 = norm(R^T) + alpha * norm(R^O), A_2 = norm(R^O): alpha
    is not inert there. The docstring, the --alpha help, exercise 2 and the cheat sheet say so, and
    none says it has no effect at K = 2."""
    from pathlib import Path

    import config
    import mtgrpo
    R_T, R_O = [[[1.0], [2.0], [3.0]]], [[0.0, 0.0, 3.0]]
    half = turn_advantages(R_T, R_O, "mt", alpha=0.5)
    norm_T, norm_O = group_norm(torch.tensor([[1.0, 2.0, 3.0]])), group_norm(torch.tensor([[0.0, 0.0, 3.0]]))
    close(half[..., 0], norm_T + 0.5 * norm_O)
    close(half[..., 1], norm_O)
    close(half[0, :, 0], [-N1 - 0.288658, -0.288658, N1 + 0.577317])  # by hand: norm([0, 0, 3]) / 2
    assert not torch.allclose(half, turn_advantages(R_T, R_O, "mt", alpha=1.0))
    root = Path(__file__).resolve().parent.parent
    import dataclasses
    help_text = next(f.metadata["help"] for f in dataclasses.fields(config.Args) if f.name == "alpha")
    texts = {"mtgrpo.py": mtgrpo.__doc__, "--alpha": help_text,
             "ex2": (root / "exercises" / "ex2_turn_advantages.py").read_text()}
    for where, text in texts.items():
        flat = " ".join(text.split())
        assert "A_1 = norm(R^T) + alpha * norm(R^O)" in flat and "K = 2" in flat, where
    sheet = " ".join((root / "docs" / "cheatsheet.md").read_text().split())
    assert "A_1 = norm(R^T) + α·norm(R^O)" in sheet
    slides = " ".join((root / "lecture" / "slides.md").read_text().split())
    assert "at $K = 2$: $A_1 = \\mathrm{norm}(R^T) + \\alpha\\,\\mathrm{norm}(R^O)$" in slides
    for where, text in {**texts, "cheat sheet": sheet, "slides": slides}.items():
        flat = " ".join(text.split())
        assert not any(s in flat for s in ("any alpha", "no effect at K = 2", "the same at K = 2",
                                           "equals MT-GRPO at $K = 2$", "it is exactly MT-GRPO")), where


def test_the_quiz_keys_cancelling_pair_gives_the_search_turns_zero():
    """docs/quiz.md's answer to question 2: a good search with a wrong answer and a bad search with a
    right answer (R^T = [1, 0], R^O = [0, 1]) merge to the same GRPO-MR reward, and MT-GRPO's search
    turns get A_1 = 0 too (norm(R^T) and norm(R^O) cancel); only the answer turns are separated."""
    from pathlib import Path
    mt = turn_advantages([[[1.0], [0.0]]], [[0.0, 1.0]], "mt")
    close(mt[0, :, 0], [0.0, 0.0])
    close(mt[0, :, 1], [-0.707007, 0.707007])
    close(turn_advantages([[[1.0], [0.0]]], [[0.0, 1.0]], "mr"), [[[0.0, 0.0], [0.0, 0.0]]])
    key = " ".join((Path(__file__).resolve().parent.parent / "docs" / "quiz.md").read_text()
                   .split("## Answer key")[1].split())
    assert "Its search turns, though, get A_1 = 0 in that pair as well" in key
    assert "A_2 = −0.707 and +0.707" in key
