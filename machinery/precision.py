"""What a run computes in: bf16 autocast over fp32 weights where the hardware has native bf16, fp32
elsewhere. Used by the sampler (generation.py, fast/decode.py) and the update (loss.py, fast/update.py)
alike.
"""
import contextlib
import functools

import torch


def bf16_ok(device):
    """bf16 autocast on GPUs with native bf16 (compute capability 8.0 on: A100, L4, H100, RTX
    30xx) and on CPUs with native bf16 (AVX512-BF16 / AMX). Elsewhere bf16 is emulated and slower
    than fp32 (a T4, a V100, most laptop CPUs), so those compute in fp32."""
    if device.startswith("cuda"):
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return device == "cpu" and native_bf16_cpu()


@functools.lru_cache(maxsize=4)
def native_bf16_cpu(cpuinfo="/proc/cpuinfo"):
    """Whether this CPU computes bf16 natively, from public facts: the flags Linux lists for it
    (x86: avx512_bf16 or amx_bf16; Arm: bf16), and on x86 torch's kernels built for AVX512, which
    ATEN_CPU_CAPABILITY=avx2 turns off (such a CPU then runs as the AVX2 kind, docs/benchmarks.md).
    False where /proc/cpuinfo cannot be read (macOS, Windows): those compute in fp32."""
    try:
        with open(cpuinfo) as f:
            words = {w for line in f if line.startswith(("flags", "Features")) for w in line.split(":", 1)[1].split()}
    except (OSError, IndexError):
        return False
    if words & {"avx512_bf16", "amx_bf16"}:
        return torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    return "bf16" in words  # an Arm core's bf16 instructions


def precision_line(device, bf16=True):
    """The first line a run prints: what it computes in, and why."""
    if bf16 and bf16_ok(device):
        return f"compute: bf16 autocast over fp32 weights on {device}"
    if not bf16:
        return f"compute: fp32 on {device} (--bf16 false)"
    kind = "GPU (a T4 or V100: compute capability below 8.0)" if device.startswith("cuda") else \
        "CPU (no AVX512-BF16 or AMX)"
    return (f"compute: fp32 on {device}: this {kind} has no native bf16, so the run computes in fp32 "
            "(slower; rewards differ slightly from a bf16 machine's, see docs/training.md)")


def compute_dtype(tensor):
    """The dtype a turn computes in (its keys and values, packed weights): under autocast the
    autocast dtype (attention and the Linears compute in it anyway; keys leave the rotary
    embedding in fp32, values their projection in bf16), else the tensor's own."""
    kind = tensor.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else tensor.dtype


def autocast(device, enabled=True):
    """bf16 compute over fp32 weights: pure-bf16 weights would drop updates of lr ~ 1e-6."""
    if not (enabled and bf16_ok(device)):
        return contextlib.nullcontext()
    return torch.autocast(device.split(":")[0], dtype=torch.bfloat16)
