"""--plain runs the step as the papers' code reads: transformers' generate and the per-row update,
and no code of the fast path on the way. The fast path is everything below the fast-path banner of
machinery/decode.py (the decode loop, its cache) and of loss.py (the fast update and its levers), all of
machinery/cpu_step.py (packed Linears, the written-out step), machinery/gpu_step.py (CUDA graphs)
and machinery/heap.py, and onednn's pack and call; policy.turn_generator and train.update are the
only places that choose between the two paths."""
import inspect
import sys

import pytest

import loss
import train
from machinery import cpu_step, decode, gpu_step, heap, onednn

# (module, the banner that opens its fast path, the banner that closes it or None: to the end)
BANNERS = [(decode, "# ---------------------------------------------------------------- the fast path", None),
           (loss, "# ================================================================ machinery: the same update, faster", None)]


def functions(module):
    """(code object, first line) of every function and method defined in the module."""
    for obj in vars(module).values():
        members = vars(obj).values() if inspect.isclass(obj) and obj.__module__ == module.__name__ else [obj]
        for f in members:
            f = getattr(f, "__wrapped__", f)
            if inspect.isfunction(f) and f.__module__ == module.__name__:
                yield f.__code__


def fast_path():
    """The code objects of the fast path."""
    fast = set(functions(heap)) | set(functions(cpu_step)) | set(functions(gpu_step))
    fast |= {onednn.pack.__code__, onednn.linear.__code__}
    for module, opens, closes in BANNERS:
        lines = list(enumerate(inspect.getsource(module).splitlines(), 1))
        start = next(i for i, line in lines if line.startswith(opens))
        end = next((i for i, line in lines if closes and i > start and line.startswith(closes)), len(lines) + 1)
        fast |= {c for c in functions(module) if start < c.co_firstlineno < end}
    return fast


def called(argv):
    """The code objects of every Python function called while train.main(argv) runs."""
    seen = set()

    def profile(frame, event, arg):
        if event == "call":
            seen.add(frame.f_code)
    sys.setprofile(profile)
    try:
        train.main(argv)
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("env", ["search", "planpath"])
def test_a_plain_step_calls_no_fast_path_function(tmp_path, tiny_model_dir, env):
    flags = ["--env", env, "--model", tiny_model_dir, "--steps", "1", "--batch-size", "1", "--num-generations", "2",
             "--max-completion-length", "4", "--max-turns", "2", "--eval-every", "1", "--eval-n", "1",
             "--beta", "0.04", "--num-iterations", "2", "--micro-batch-size", "2", "--bf16", "false"]
    fast = fast_path()
    names = {c.co_name for c in fast}
    assert {"generate_turn", "draw", "policy_update_fast", "keep_freed_memory", "capture", "leave_batch",
            "prompt_sets", "fill_logprobs_fast", "packed_linears", "decode_step", "pack", "linear"} <= names
    default = called([*flags, "--out", str(tmp_path / "default")]) & fast
    assert {"generate_turn", "policy_update_fast", "fill_logprobs_fast"} <= {c.co_name for c in default}
    plain = called([*flags, "--plain", "true", "--out", str(tmp_path / "plain")]) & fast
    assert not plain, sorted(f"{c.co_name} ({c.co_filename}:{c.co_firstlineno})" for c in plain)
