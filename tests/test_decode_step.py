"""decode.decode_step, the one-token step written out: the model's own logits bit for bit, for a
Llama and a Qwen2 (biases on q, k, v), grouped and plain attention, fp32 and bf16, the Linears as
F.linear computes them or packed (q, k and v stacked into one packed Linear), and only for the
models written_out admits."""
import pytest
import torch

from policy import load_model
from test_policy import NATIVE_BF16, random_biases, turn_logits


def steps(model, one_token, bf16, packed, fused):
    """Logits of a padded prefill and three one-token steps (test_policy.turn_logits), each step
    by `one_token` ("model": the model's forward; "written": decode_step), the Linears packed or
    not; packed but not `fused`, a hook on a query projection keeps q, k and v apart."""
    query = model.model.layers[0].self_attn.q_proj
    hook = query.register_forward_hook(lambda *a: None) if packed and not fused else None
    try:
        return turn_logits(model, packed, bf16, written=one_token == "written", steps=3)
    finally:
        hook and hook.remove()


def random_norms(model):
    """A random model's norm weights start at one: make each norm its own."""
    with torch.no_grad():
        for norm in (m for m in model.modules() if type(m).__name__.endswith("RMSNorm")):
            norm.weight.normal_(1.0, 0.5)


def plain_heads(model_dir):
    """The tiny Llama with as many key/value heads as query heads (no grouped-query attention)."""
    from transformers import LlamaForCausalLM
    model, _ = load_model(model_dir, "cpu")
    config = model.config
    config.num_key_value_heads = config.num_attention_heads
    torch.manual_seed(1)
    return LlamaForCausalLM(config).eval()


PRECISIONS = [(False, False, False), (False, True, False), (False, True, True), (True, False, False),
              pytest.param(True, True, False, marks=pytest.mark.skipif(not NATIVE_BF16, reason="packs bf16 only where native")),
              pytest.param(True, True, True, marks=pytest.mark.skipif(not NATIVE_BF16, reason="packs bf16 only where native"))]


@pytest.mark.parametrize("bf16,packed,fused", PRECISIONS)
@pytest.mark.parametrize("model_dir", ["tiny_model_dir", "qwen_base_dir", "plain heads"])
def test_decode_step_computes_the_models_logits_bit_for_bit(model_dir, bf16, packed, fused, request):
    """Three steps of decode_step give the model's logits exactly, whatever the precision; q, k and
    v from one packed Linear sum as the three do."""
    from machinery import decode
    if model_dir == "plain heads":
        model = plain_heads(request.getfixturevalue("tiny_model_dir"))
    else:
        model, _ = load_model(request.getfixturevalue(model_dir), "cpu")
    random_biases(model), random_norms(model)
    assert decode.written_out(model)
    written = steps(model, "written", bf16, packed, fused)
    for a, b in zip(written, steps(model, "model", bf16, packed, fused)):
        assert torch.equal(a, b)


def test_the_stacked_projection_follows_an_optimizer_step(qwen_base_dir):
    """The packed q|k|v copy is packed again once the weights change (their versions are checked,
    biases too): the steps after an optimizer step compute with the new weights."""
    from machinery import decode
    model, _ = load_model(qwen_base_dir, "cpu")
    random_biases(model)
    before = steps(model, "written", False, True, True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model(torch.tensor([[5, 6, 7]])).logits.logsumexp(-1).sum().backward()
    optimizer.step()
    after = steps(model, "written", False, True, True)
    assert not torch.equal(after[0], before[0])
    for a, b in zip(after, steps(model, "model", False, False, False)):  # F.linear over the new weights
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)  # oneDNN's fp32 sums: within rounding


def test_stacked_biases_fill_in_zeros(tiny_model_dir):
    """Stacked Linears where only some have a bias: the others add zeros, not nothing."""
    from machinery import decode
    a, b = torch.nn.Linear(4, 3), torch.nn.Linear(4, 2, bias=False)
    weight, bias = decode.packed(a, b, key=a)
    assert bias is not None and torch.equal(bias, torch.cat([a.bias, torch.zeros(2)]).detach())
    x = torch.randn(2, 4)
    torch.testing.assert_close(decode.packed_linear(weight, bias, x), torch.cat([a(x), b(x)], -1).detach())


def test_written_out_admits_only_the_shape_it_writes(tiny_model_dir, qwen_base_dir):
    """Llama and Qwen2 decoders in eval mode with SDPA and plain Linears: yes, also with hooks on the
    model or a Linear (both are still called). Training mode, a hook on a module the step writes out
    (a layer, its MLP, a norm), another attention implementation, a sliding window, a wrapped
    Linear: no (the model's forward runs)."""
    from machinery import decode
    model, _ = load_model(tiny_model_dir, "cpu")
    assert decode.written_out(model) and decode.written_out(load_model(qwen_base_dir, "cpu")[0])
    model.train()
    assert not decode.written_out(model)
    model.eval()
    handles = [model.register_forward_pre_hook(lambda *a: None), model.lm_head.register_forward_hook(lambda *a: None)]
    assert decode.written_out(model)
    for module in (model.model.layers[1].mlp, model.model.layers[0].post_attention_layernorm, model.model):
        handles.append(module.register_forward_hook(lambda *a: None))
        assert not decode.written_out(model)
        handles.pop().remove()
    model.config._attn_implementation = "eager"
    assert not decode.written_out(model)
    model.config._attn_implementation = "sdpa"
    model.config.layer_types = ["full_attention", "sliding_attention"]
    assert not decode.written_out(model)
    model.config.layer_types = ["full_attention", "full_attention"]

    class Wrapped(torch.nn.Linear):
        pass
    model.model.layers[0].self_attn.k_proj.__class__ = Wrapped
    assert not decode.written_out(model)


def test_generate_turn_takes_the_written_out_step(tiny_model_dir, monkeypatch):
    """generate_turn's one-token steps go through decode_step where written_out says so, with
    the same greedy tokens as through the model's forward; the model's own hooks see every step
    (tools/bench.py times the steps so), and its forward is its own again after the turn."""
    from machinery import decode
    model, tok = load_model(tiny_model_dir, "cpu")
    prompts = [[5, 6, 7, 8], [9, 10], [9, 10]]
    calls, seen = [], []
    real = decode.decode_step
    monkeypatch.setattr(decode, "decode_step", lambda *a, **k: calls.append(1) or real(*a, **k))
    hook = model.register_forward_pre_hook(lambda m, a, k: seen.append(k["input_ids"].shape[1]), with_kwargs=True)
    written = decode.generate_turn(model, tok, prompts, 6, greedy=True, bf16=False)
    assert len(calls) == seen.count(1) > 0 and "forward" not in model.__dict__
    monkeypatch.setattr(decode, "written_out", lambda model: False)
    calls.clear()
    assert decode.generate_turn(model, tok, prompts, 6, greedy=True, bf16=False) == written and not calls
    hook.remove()


def test_hooks_on_the_linears_run_and_keep_q_k_v_apart(tiny_model_dir):
    """A hook on a Linear runs at every written-out step; one on a query, key or value projection
    keeps the three apart (stacked, they would not be called), and the logits stay the model's."""
    from machinery import decode
    model, _ = load_model(tiny_model_dir, "cpu")
    seen = []
    model.model.layers[1].self_attn.k_proj.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    written = steps(model, "written", False, True, True)
    assert len(seen) == 3 + 1  # three steps and the prefill
    assert all(torch.equal(a, b) for a, b in zip(written, steps(model, "model", False, True, True)))
