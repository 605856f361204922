"""fast/heap.py: freed memory reused instead of faulted in anew on a CPU under glibc; nothing
done elsewhere. The page faults are counted in a fresh process each, so the test process's own heap
setting does not matter."""
import platform
import subprocess
import sys

import pytest

from fast import heap

FAULTS = """
import resource, sys, torch
from fast.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory("cpu")
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
torch.manual_seed(0)
emb = torch.nn.Embedding(50000, 320)  # 64 MB, above glibc's 32 MB limit; tied to the output, as in SmolLM2
ids = torch.randint(0, 50000, (2, 64))
def step():  # forward and backward: gradient blocks of 64 MB allocated and freed every time
    logits = emb(ids) @ emb.weight.T
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
step(); step()
before = faults()
for _ in range(6):
    step()
print(faults() - before)
"""


def page_faults(mode):
    return int(subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True,
                              check=True).stdout.split()[-1])


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_freed_blocks_are_reused_instead_of_faulted_in_anew():
    default = page_faults("default")  # 6 steps x a few 64 MB blocks of 16,384 pages: ~310,000 here
    if default < 6 * 16384:
        pytest.skip(f"this machine's glibc already reuses the blocks ({default} page faults)")
    # Kept, most blocks are reused (47,000-106,000 faults here); not all, as a freed block serves an
    # aligned request of its own size only once it has merged with a neighbour, which depends on
    # where the heap starts: the best of two processes.
    assert min(page_faults("keep") for _ in range(2)) < default / 2


def test_nothing_is_changed_off_a_glibc_cpu(monkeypatch):
    called = []
    monkeypatch.setattr(heap.ctypes, "CDLL", lambda name: called.append(name))
    assert heap.keep_freed_memory("cuda") is False
    monkeypatch.setattr(heap.platform, "libc_ver", lambda: ("", ""))  # musl, or no C library found
    assert heap.keep_freed_memory("cpu") is False
    monkeypatch.setattr(heap.platform, "system", lambda: "Darwin")
    assert heap.keep_freed_memory("cpu") is False
    assert called == []
