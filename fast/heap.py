"""Freed memory kept for the next allocation, on a CPU under Linux's glibc (elsewhere nothing changes).

glibc serves every block above 32 MB with a mapping of its own and hands it back to the kernel as
soon as it is freed, so the next block of that size starts as untouched pages that the kernel
faults in one 4 KB page at a time: ~1 us a page, 24-42 ms for the 113 MB of the bundled model's
embedding gradient, against 4-5 ms for a block used before. An update frees and allocates such blocks
in every micro-batch (the tied embedding's and LM head's gradients, its weight cast to bf16, the
logits over the vocabulary): 730,000-1,070,000 page faults in an update of the bench's 16 rows,
and none in a decode turn. Told to serve every block from its heap (no mapping of its own) and to
keep up to 1 GB free at the heap's top, glibc reuses most of those pages instead (not all: a freed
block serves torch's aligned request of its own size only once it has merged with a neighbour).
The cost: freed memory stays with the process, which keeps its high-water mark (+100-600 MB here).
Measured: docs/benchmarks.md#the-levers.
"""
import ctypes
import platform

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # mallopt's parameter numbers (glibc's malloc.h)
KEEP = {M_MMAP_MAX: 0, M_TRIM_THRESHOLD: 1 << 30}  # no block mapped alone; up to 1 GB kept free at the top


def keep_freed_memory(device="cpu"):
    """Make glibc reuse freed memory for the rest of the process, on a CPU run under glibc.
    True if set; False elsewhere (a GPU run, macOS, Windows, musl), where it changes nothing."""
    if device != "cpu" or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(param, value) == 1 for param, value in KEEP.items())  # mallopt answers 1 on success
