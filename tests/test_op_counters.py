"""The op counters of the measurement scripts (scripts/decode_rows.py, scripts/update_ops.py):
what they count is what docs/benchmarks.md cites."""
import torch

from scripts.decode_rows import AtenCalls
from scripts.update_ops import OpTimer, is_shape


def test_aten_calls_counts_each_call_below_autograd():
    x = torch.ones(3, 4, requires_grad=True)
    with AtenCalls() as calls:
        y = (x * 2).sum()
    assert calls.calls == 2  # mul, sum
    with AtenCalls() as calls:
        y.backward()
    assert calls.calls > 0 and x.grad.eq(2).all()


def test_op_timer_names_ops_as_the_profiler_does_and_finds_the_vocabulary_blocks():
    a, b = torch.randn(2, 4), torch.randn(4, 6)
    with OpTimer(vocabulary_block=24) as timer:
        a @ b  # its second operand is a 4 x 6 block: 24 elements
        torch.zeros(4, 6)  # writes one
        torch.ones(5) + 1  # neither
    assert set(timer.seconds) == {"aten::mm", "aten::zeros", "aten::ones", "aten::add"}
    assert set(timer.block) == {"aten::mm", "aten::zeros"} and all(s >= 0 for s in timer.seconds.values())


def test_is_shape_takes_one_tensor_shape_only():
    assert is_shape([49152, 576]) and not is_shape([]) and not is_shape([[2, 3], [3]])
