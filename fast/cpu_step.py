"""The one-token decode step on a CPU, made cheaper: the Linears over weights packed once for
oneDNN, and the step itself written out op by op. fast/decode.py's loop enters both for each
turn; read it first. Each is kept because it measured at least 1.15x on the bench's generation
(docs/benchmarks.md, the lever table); each computes the model's own logits (bit for bit, or in
fp32 up to oneDNN's summation order: tests/test_policy.py, tests/test_decode_step.py).
"""
import contextlib
import functools
import weakref

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import CausalLMOutputWithPast

from fast import onednn
from machinery.precision import compute_dtype


# Linear weights packed once for oneDNN: F.linear hands a kernel the plain weight at every call;
# packed, the weight is laid out in oneDNN's own blocked format once. In bf16 oneDNN runs the
# Linear either way and the numbers are the same bit for bit; in fp32 F.linear runs MKL, whose
# sums oneDNN adds up in another order (tests/test_policy.py checks both).
PACKED = weakref.WeakKeyDictionary()  # key -> (the parameters and their versions, dtype, packed weight, bias)


def packable(model, greedy=False):
    """Whether a turn's Linears are packed, on a CPU: under bf16 autocast where oneDNN has native
    bf16 kernels (the same numbers as F.linear, which runs oneDNN there too); in fp32 for sampled
    turns only. An fp32 sum in oneDNN's order differs from MKL's in the last bits: a greedy turn
    could then part from `generate`'s at a near-tie, so greedy turns keep F.linear and stay
    token-identical; a sampled turn draws from probabilities that differ by rounding, and its
    decode step ran 1.18-1.49x faster (docs/benchmarks.md: the lever for laptops, which compute
    in fp32)."""
    if model.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    if torch.is_autocast_enabled("cpu"):
        return torch.get_autocast_dtype("cpu") == torch.bfloat16 and onednn.native_bf16()
    return not greedy and model.dtype == torch.float32


def packed(linear):
    """(weight, bias) of a plain nn.Linear packed for oneDNN in the dtype the turn computes in
    (compute_dtype: bf16 under autocast), kept, and packed again only once a parameter has
    changed: an optimizer step bumps its version counter."""
    params = [p for p in (linear.weight, linear.bias) if p is not None]
    dtype = compute_dtype(linear.weight)
    kept, kept_dtype = PACKED.get(linear, ([], None))[:2]
    if kept_dtype != dtype or len(kept) != len(params) or not all(
            ref() is t and version == t._version for (ref, version), t in zip(kept, params)):
        bias = None if linear.bias is None else linear.bias.detach().to(dtype)
        PACKED[linear] = ([(weakref.ref(t), t._version) for t in params], dtype,
                          onednn.pack(linear.weight.detach().to(dtype)), bias)
    return PACKED[linear][2:]


def packed_linear(weight, bias, x):
    """A Linear's forward over its packed weight (x in the weight's dtype, as autocast casts it)."""
    return onednn.linear(x, weight, bias)


@contextlib.contextmanager
def packed_linears(model, greedy=False):
    """Within the context every plain nn.Linear of the model (the LM head too) runs packed_linear
    over its packed weight, checked once here, not at every call (no weight changes within a
    turn), where packable says so (enter it inside the autocast context); elsewhere nothing
    changes. Yields whether it packed."""
    packs = packable(model, greedy)
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear] if packs else []
    for m in linears:
        m.forward = functools.partial(packed_linear, *packed(m))
    try:
        yield packs
    finally:
        for m in linears:
            del m.forward


# ---------------------------------------------------------------- one decode step, written out
# A one-token step through the model's modules makes ~2,000 aten calls for the bundled model's 30
# layers, whatever the rows, and at one row half of its time goes between the arithmetic
# (docs/benchmarks.md). decode_step computes the same logits bit for bit with fewer calls: no
# calls of the layers, attention, MLP and norm modules, and no wrappers or mask building per layer.
WRITTEN_OUT = {"LlamaForCausalLM", "Qwen2ForCausalLM"}  # decoders of exactly the shape below


def written_out(model):
    """Whether decode_step can take this model's one-token steps: a Llama or Qwen2 decoder in eval
    mode on a CPU, every layer attending fully through SDPA (one_token_mask hands it the ready
    mask), SiLU MLPs, plain nn.Linear projections (no LoRA or other wrapper), and no hooks on the
    modules it does not call (the model itself and its Linears are called, so their hooks run)."""
    config, core = model.config, getattr(model, "model", None)
    return (type(model).__name__ in WRITTEN_OUT and model.device.type == "cpu" and not model.training
            and config._attn_implementation == "sdpa"
            and set(getattr(config, "layer_types", None) or ["full_attention"]) == {"full_attention"}
            and config.hidden_act == "silu" and getattr(config, "pretraining_tp", 1) == 1
            and all(type(m) is torch.nn.Linear for layer in core.layers for m in linears_of(layer))
            and not any(hooked(m) for m in uncalled(core)) and not any(hasattr(m, "_hf_hook") for m in model.modules())
            and not (torch.nn.modules.module._global_forward_hooks or torch.nn.modules.module._global_forward_pre_hooks))


def linears_of(layer):
    a, m = layer.self_attn, layer.mlp
    return a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj


def uncalled(core):
    """The modules whose work decode_step writes out instead of calling them."""
    yield from (core, core.norm)
    for layer in core.layers:
        yield from (layer, layer.input_layernorm, layer.self_attn, layer.post_attention_layernorm, layer.mlp, layer.mlp.act_fn)


def hooked(module):
    return bool(module._forward_hooks or module._forward_pre_hooks)


def rms_norm(norm, x):
    """RMSNorm as transformers' Llama and Qwen2 write it: in fp32, back to x's dtype, times the weight."""
    y = x.to(torch.float32)
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * y.to(x.dtype)


def rotated(x, cos, sin):
    """Rotary position embedding (RoPE) as transformers applies it: x·cos + rotate_half(x)·sin."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def decode_step(model, input_ids, position_ids, mask, cache):
    """Logits (rows, 1, V) of one token a row (input_ids and position_ids (rows, 1)), its keys and
    values written into the turn's cache: the model's forward, written out (written_out says for
    which models). The Linears are called as packed_linears left them. Under autocast the input of
    each Linear is cast once, as each Linear would cast it."""
    core, rows, config = model.model, input_ids.shape[0], model.config
    heads, width = config.num_attention_heads, config.num_key_value_heads
    dtype = compute_dtype(core.embed_tokens.weight)
    h = core.embed_tokens(input_ids)
    cos, sin = (t.unsqueeze(1) for t in core.rotary_emb(h, position_ids))
    for layer, cached in zip(core.layers, cache.layers):
        a, mlp = layer.self_attn, layer.mlp
        x = rms_norm(layer.input_layernorm, h).to(dtype)
        qkv = torch.cat([a.q_proj(x), a.k_proj(x), a.v_proj(x)], -1)
        qkv = qkv.view(rows, 1, heads + 2 * width, a.head_dim).transpose(1, 2)
        qk = rotated(qkv[:, :heads + width], cos, sin)
        k, v = cached.update(qk[:, heads:], qkv[:, heads + width:])
        q = qk[:, :heads].reshape(rows, width, heads // width, a.head_dim)  # one query: grouped per key head
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=a.scaling)
        h = h + a.o_proj(o.reshape(rows, 1, heads * a.head_dim))
        x = rms_norm(layer.post_attention_layernorm, h).to(dtype)
        h = h + mlp.down_proj(F.silu(mlp.gate_proj(x)) * mlp.up_proj(x))
    return model.lm_head(rms_norm(core.norm, h))


@contextlib.contextmanager
def written_out_steps(model):
    """Within the context the model's one-token forwards with the ready mask (one_token_mask) run
    decode_step, where written_out says so; every other forward runs the model's own. The model is
    still called as a module, so its own hooks see every step."""
    if not written_out(model):
        yield
        return
    own = model.forward

    def forward(input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, **kwargs):
        one_token = (input_ids is not None and input_ids.shape[1] == 1 and position_ids is not None and not kwargs
                     and attention_mask is not None and attention_mask.dim() == 4 and past_key_values is not None)
        if not one_token:
            return own(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                       past_key_values=past_key_values, **kwargs)
        logits = decode_step(model, input_ids, position_ids, attention_mask, past_key_values)
        return CausalLMOutputWithPast(logits=logits, past_key_values=past_key_values)

    kept = model.__dict__.get("forward")
    model.forward = forward
    try:
        yield
    finally:
        if kept is None:
            del model.forward
        else:
            model.forward = kept
