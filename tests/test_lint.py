"""ruff's F rules (pyflakes: undefined names, unused imports, ...) over the whole tree, as CI runs
them (.ci/run, ruff.toml): code that no CPU test reaches, such as a CUDA test, is checked too."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ruff():
    here = os.path.join(os.path.dirname(sys.executable), "ruff")
    return here if os.path.exists(here) else shutil.which("ruff")


@pytest.mark.skipif(ruff() is None, reason="ruff is not installed (requirements.txt pins it)")
def test_the_tree_has_no_pyflakes_findings():
    run = subprocess.run([ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-1000:]


@pytest.mark.skipif(ruff() is None, reason="ruff is not installed (requirements.txt pins it)")
def test_an_undefined_name_is_found(tmp_path):
    """The check can fail: the bug that broke the CUDA test (a name used, never imported)."""
    (tmp_path / "broken.py").write_text("def f():\n    return gpu_step.GraphedSteps\n")
    run = subprocess.run([ruff(), "check", "--no-cache", "--config", os.path.join(ROOT, "ruff.toml"), str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "F821" in run.stdout
