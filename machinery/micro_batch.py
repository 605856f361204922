"""How many rows an update runs through the model at once (`--micro-batch-size auto`), from the
memory free when the run starts.

A larger micro-batch does the same arithmetic in fewer, larger calls: on a CPU at 8 rows instead of
2 the bench's single-turn update ran 1.29x faster in bf16 and 1.31x in fp32 on the AVX2 kind (the
two-turn update 1.10x and 1.26x), for 3.2 GB more at peak with the bundled model
(docs/benchmarks.md); on a GPU a small micro-batch is launch-bound (speedlab/gpu_check.py measures
8, 16 and 32 rows). The rows' activations are held until the backward pass, so the rule is: the most
rows, up to MOST_ROWS of the device, whose activations take at most half of the memory free (in a
container, what its memory cgroup leaves), at about ROW_TOKENS tokens a row and bytes_per_token a
token.
"""
import os

import torch

PROC_MEMINFO, PROC_CGROUP, CGROUP_ROOT = "/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup"  # Linux's
PROC_STATM = "/proc/self/statm"
ROW_TOKENS = 4  # x max_completion_length: a search row's two turns and the tool result between them
MOST_ROWS = {"cpu": 8, "cuda": 32}  # beyond these a larger micro-batch measured no faster (docs/benchmarks.md)


def bytes_per_token(config):
    """What one trained token holds through backward, in bytes: the logits over the vocabulary (fp32,
    their bf16 copy and gradient: ~3 x 4 bytes a word) and each layer's activations (~18 x 4 bytes a
    hidden unit). Fitted to the bundled model: 1.85 MB a token, measured +3.2 GB for 6 more rows of
    288 tokens."""
    config = config.get_text_config()
    return 4 * (3 * config.vocab_size + 18 * config.num_hidden_layers * config.hidden_size)


def free_bytes(device):
    """(bytes free for this run, where that was read): the GPU's free memory; on a CPU what Linux
    reports available (MemAvailable), or less where the process's memory cgroup (a container's
    docker -m, Slurm, Kubernetes) allows less; (None, why) where neither can be read."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0], "the GPU's free memory"
    try:
        with open(PROC_MEMINFO) as f:
            free, where = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")), "MemAvailable"
    except (OSError, StopIteration, ValueError, IndexError):
        free, where = None, "the free memory could not be read"
    room = cgroup_room()
    if room is not None and (free is None or room[0] < free):
        return room
    return free, where


def cgroup_room():
    """(room, which files) under the tightest memory limit of this process's cgroup and of every
    cgroup above it (a limit set on a parent binds as well), or None where none has a limit or none
    can be read: v2 memory.max and memory.current, else v1 memory.limit_in_bytes and
    memory.usage_in_bytes, from the cgroup /proc/self/cgroup names under CGROUP_ROOT up to the root.
    room = limit - usage; where the usage cannot be read, limit - what this process holds already
    (its resident memory), never the host's memory."""
    try:
        with open(PROC_CGROUP) as f:
            lines = [line.strip().split(":", 2) for line in f if line.count(":") >= 2]
    except OSError:
        return None
    tightest = None
    for hierarchy, controllers, path in lines:
        v2 = hierarchy == "0" and controllers == ""
        if not v2 and "memory" not in controllers.split(","):
            continue
        names = ("memory.max", "memory.current") if v2 else ("memory.limit_in_bytes", "memory.usage_in_bytes")
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):  # this cgroup, then each parent
            folder = os.path.join(CGROUP_ROOT, "" if v2 else "memory", *parts[:depth])
            limit, usage = (read_number(os.path.join(folder, n)) for n in names)
            if limit is None or limit >= 2 ** 60:  # v2's "max", v1's "no limit" near 2^63, or unreadable
                continue
            of = "" if depth == len(parts) else f" of {'/' + '/'.join(parts[:depth])}"
            where = f"the memory cgroup's {names[0]} - {names[1]}{of}"
            if usage is None:
                usage, where = resident_bytes(), f"the memory cgroup's {names[0]}{of} - this process's memory ({names[1]} unreadable)"
            if tightest is None or limit - usage < tightest[0]:
                tightest = (max(limit - usage, 0), where)
    return tightest


def read_number(path):
    """The whole number in a cgroup file, or None (no file, unreadable, or "max")."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def resident_bytes():
    """What this process holds in memory now (resident pages, /proc/self/statm), 0 if unreadable."""
    try:
        with open(PROC_STATM) as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def auto_micro_batch(model, device, max_completion_length):
    """The micro-batch chosen for this model and machine; prints one line that says why."""
    row = ROW_TOKENS * max_completion_length * bytes_per_token(model.config)
    free, where = free_bytes(device)
    sizes = [n for n in (64, 32, 16, 8, 4, 2) if n <= MOST_ROWS["cuda" if str(device).startswith("cuda") else "cpu"]]
    rows = 2 if free is None else next((n for n in sizes if n * row <= free / 2), 1)
    why = where if free is None else f"{free / 2 ** 30:.1f} GiB free ({where}), about {row / 2 ** 30:.2f} GiB a row"
    print(f"micro-batch {rows} rows (auto: {why}; --micro-batch-size N to choose)")
    return rows
