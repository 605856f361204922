"""The only private torch ops the project calls: oneDNN's (torch.ops.mkldnn._*), each behind a public
fallback, for a torch build without them or one that renames them.

    native_bf16()   whether oneDNN runs bf16 natively on this CPU (AVX512-BF16 / AMX)
    pack(w)         a Linear's weight laid out once in oneDNN's blocked format
    linear(x, w, b) a Linear over a packed weight

With the fallback a weight stays as it is and the Linear is F.linear (the same numbers in bf16;
tests/test_policy.py runs it), and no CPU counts as bf16-native (the run computes in fp32).
"""
import torch
import torch.nn.functional as F


def private(name):
    """torch.ops.mkldnn.<name>, or None where this torch build lacks it."""
    try:
        return getattr(torch.ops.mkldnn, name)
    except (AttributeError, RuntimeError):
        return None


PACK, LINEAR = private("_reorder_linear_weight"), private("_linear_pointwise")  # looked up once


def native_bf16():
    check = private("_is_mkldnn_bf16_supported")
    return bool(check and torch.backends.mkldnn.is_available() and check())


def pack(weight):
    return PACK(weight) if PACK and LINEAR else weight.contiguous()


def linear(x, weight, bias):
    """x in the weight's dtype, as autocast casts it."""
    if PACK and LINEAR:
        return LINEAR(x.to(weight.dtype), weight, bias, "none", [], "")
    return F.linear(x.to(weight.dtype), weight, bias)
