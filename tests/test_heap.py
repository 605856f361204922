"""machinery/heap.py: freed memory reused without page faults on a CPU under glibc; nothing done
elsewhere. The page faults are counted in a fresh process each, so the test process's own heap
setting does not matter."""
import platform
import subprocess
import sys

import pytest

from machinery import heap

FAULTS = """
import resource, sys, torch
from machinery.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory("cpu")
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
torch.empty(64 << 20, dtype=torch.uint8).fill_(1)  # 64 MB, above glibc's 32 MB limit, freed at once
before = faults()
torch.empty(64 << 20, dtype=torch.uint8).fill_(1)  # the same size again
print(faults() - before)
"""


def page_faults(mode):
    return int(subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True,
                              check=True).stdout.split()[-1])


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_a_freed_block_is_reused_without_page_faults():
    default = page_faults("default")
    if default < 8000:  # 64 MB is 16,384 pages of 4 KB: this glibc reuses the block anyway
        pytest.skip(f"this machine's glibc already reuses the block ({default} page faults)")
    assert page_faults("keep") < 1000  # a few, for the interpreter's own small allocations


def test_nothing_is_changed_off_a_glibc_cpu(monkeypatch):
    called = []
    monkeypatch.setattr(heap.ctypes, "CDLL", lambda name: called.append(name))
    assert heap.keep_freed_memory("cuda") is False
    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("", ""))  # musl, or no C library found
    assert heap.keep_freed_memory("cpu") is False
    monkeypatch.setattr(heap.platform, "system", lambda: "Darwin")
    assert heap.keep_freed_memory("cpu") is False
    assert called == []
