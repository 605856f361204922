"""--plain runs the step as the papers' code reads: generation.py's `generate` and loss.py's update,
and no function of the package `fast` on the way; without --plain the step runs fast's decode loop
and update (the converse). policy.fast_path is the one seam between the two, and the only place the
lesson imports `fast` (tests/test_atgrpo.py checks the imports). A traced --plain step enters the
root's files and machinery/'s plumbing only."""
import inspect
import os
import sys

import pytest

import fast
import train
from fast import cpu_step, decode, gpu_step, heap, onednn, update

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = (decode, cpu_step, gpu_step, onednn, heap, update)


def functions(module):
    """The code object of every function and method defined in the module."""
    for obj in vars(module).values():
        members = vars(obj).values() if inspect.isclass(obj) and obj.__module__ == module.__name__ else [obj]
        for f in members:
            f = getattr(f, "__wrapped__", f)
            if inspect.isfunction(f) and f.__module__ == module.__name__:
                yield f.__code__


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


def project_files(codes):
    """The project's files (relative to the root) whose code ran; not the tests' own, nor a virtual
    environment's inside the project."""
    paths = {os.path.relpath(c.co_filename, ROOT) for c in codes if c.co_filename.startswith(ROOT + os.sep)}
    return {p for p in paths if not p.startswith((".", "tests" + os.sep)) and "site-packages" not in p}


@pytest.mark.parametrize("env", ["search", "planpath"])
def test_a_plain_step_calls_no_function_of_the_fast_package(tmp_path, tiny_model_dir, env):
    flags = ["--env", env, "--model", tiny_model_dir, "--steps", "1", "--batch-size", "1", "--num-generations", "2",
             "--max-completion-length", "4", "--eval-every", "1", "--eval-n", "1",
             "--beta", "0.04", "--num-iterations", "2", "--micro-batch-size", "2", "--bf16", "true",
             *(["--max-turns", "2"] if env == "planpath" else [])]
    quick = {c for module in FAST for c in functions(module)}
    assert {"generate_turn", "draw", "policy_update", "fill_logprobs", "keep_freed_memory", "capture", "leave_batch",
            "prompt_sets", "packed_linears", "decode_step", "pack", "linear"} <= {c.co_name for c in quick}
    default = called([*flags, "--out", str(tmp_path / "default")])
    ran = {(c.co_name, os.path.basename(c.co_filename)) for c in default & quick}
    assert {("generate_turn", "decode.py"), ("policy_update", "update.py"), ("fill_logprobs", "update.py"),
            ("keep_freed_memory", "heap.py")} <= ran
    plain = called([*flags, "--plain", "true", "--out", str(tmp_path / "plain")])
    assert not plain & quick, sorted(f"{c.co_name} ({c.co_filename}:{c.co_firstlineno})" for c in plain & quick)
    files = project_files(plain)
    assert files and all(os.sep not in f or f.startswith("machinery" + os.sep) for f in files), sorted(files)
    assert not any(f.startswith("fast" + os.sep) for f in project_files(plain)), sorted(files)


def test_the_seam_answers_by_plain_alone():
    assert train.fast_path(train.parse_args(["--plain", "true"])) is None
    assert train.fast_path(train.parse_args([])) is fast
