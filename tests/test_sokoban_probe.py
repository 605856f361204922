"""scripts/sokoban_probe.py: the optimal-move labels, the board-blind baseline and the loss on
the answer tokens only."""
import os
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import sokoban_probe  # noqa: E402

import sokoban  # noqa: E402


def test_optimal_moves_by_hand():
    # box right of the player, goal two cells further: R R solves it; any other move costs more
    assert sokoban_probe.optimal_moves(sokoban.parse_board(["######", "#@$ .#", "######"])) == ["R"]
    # the player must stand left of the box, one row down and one column right: D R or R D, then
    # the push R: 3 moves, and both first moves are optimal; up and left are not
    board = sokoban.parse_board(["######", "#@   #", "#  $.#", "#    #", "######"])
    assert sokoban.moves_left(board) == 3
    assert sokoban_probe.optimal_moves(board) == ["D", "R"]

def test_board_blind_baseline_by_hand():
    data = [([1], ["U"], 0), ([2], ["U", "L"], 0), ([3], ["D"], 1), ([4], ["R"], 1)]
    # turn 0: U is optimal on both boards; turn 1: D or R on one of two: (2 + 1) / 4
    assert sokoban_probe.blind_accuracy(data) == 0.75


def test_target_loss_counts_only_the_answer_tokens(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    rows = [([5, 6, 7, 8, 9], [10, 11]), ([5, 6], [12, 13, 14])]
    got = sokoban_probe.target_loss(model, rows, pad_id=0)
    losses = []
    for prompt, target in rows:  # unpadded, one row at a time
        logits = model(torch.tensor([prompt + target])).logits[0, len(prompt) - 1:-1]
        losses.append(torch.nn.functional.cross_entropy(logits, torch.tensor(target), reduction="sum"))
    assert got.item() == pytest.approx((sum(losses) / 5).item(), rel=1e-4)
