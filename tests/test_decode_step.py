"""cpu_step.decode_step, the one-token step written out: the model's own logits bit for bit, for a
Llama and a Qwen2 (biases on q, k, v), grouped and plain attention, fp32 and bf16, the Linears as
F.linear computes them or packed, and only for the models written_out admits."""
import pytest
import torch

from policy import load_model
from test_policy import NATIVE_BF16, random_biases, turn_logits


def steps(model, one_token, bf16, packed):
    """Logits of a padded prefill and three one-token steps (test_policy.turn_logits), each step
    by `one_token` ("model": the model's forward; "written": decode_step), the Linears packed or not."""
    return turn_logits(model, packed, bf16, written=one_token == "written", steps=3)


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


PRECISIONS = [(False, False), (False, True), (True, False),
              pytest.param(True, True, marks=pytest.mark.skipif(not NATIVE_BF16, reason="packs bf16 only where native"))]


@pytest.mark.parametrize("bf16,packed", PRECISIONS)
@pytest.mark.parametrize("model_dir", ["tiny_model_dir", "qwen_base_dir", "plain heads"])
def test_decode_step_computes_the_models_logits_bit_for_bit(model_dir, bf16, packed, request):
    """Three steps of decode_step give the model's logits exactly, whatever the precision, the
    Linears packed or not."""
    from fast import cpu_step
    if model_dir == "plain heads":
        model = plain_heads(request.getfixturevalue("tiny_model_dir"))
    else:
        model, _ = load_model(request.getfixturevalue(model_dir), "cpu")
    random_biases(model), random_norms(model)
    assert cpu_step.written_out(model)
    written = steps(model, "written", bf16, packed)
    for a, b in zip(written, steps(model, "model", bf16, packed)):
        assert torch.equal(a, b)


def test_written_out_admits_only_the_shape_it_writes(tiny_model_dir, qwen_base_dir):
    """Llama and Qwen2 decoders in eval mode with SDPA and plain Linears: yes, also with hooks on the
    model or a Linear (both are still called). Training mode, a hook on a module the step writes out
    (a layer, its MLP, a norm), another attention implementation, a sliding window, a wrapped
    Linear: no (the model's forward runs)."""
    from fast import cpu_step
    model, _ = load_model(tiny_model_dir, "cpu")
    assert cpu_step.written_out(model) and cpu_step.written_out(load_model(qwen_base_dir, "cpu")[0])
    model.train()
    assert not cpu_step.written_out(model)
    model.eval()
    handles = [model.register_forward_pre_hook(lambda *a: None), model.lm_head.register_forward_hook(lambda *a: None)]
    assert cpu_step.written_out(model)
    for module in (model.model.layers[1].mlp, model.model.layers[0].post_attention_layernorm, model.model):
        handles.append(module.register_forward_hook(lambda *a: None))
        assert not cpu_step.written_out(model)
        handles.pop().remove()
    model.config._attn_implementation = "eager"
    assert not cpu_step.written_out(model)
    model.config._attn_implementation = "sdpa"
    model.config.layer_types = ["full_attention", "sliding_attention"]
    assert not cpu_step.written_out(model)
    model.config.layer_types = ["full_attention", "full_attention"]

    class Wrapped(torch.nn.Linear):
        pass
    model.model.layers[0].self_attn.k_proj.__class__ = Wrapped
    assert not cpu_step.written_out(model)


def test_generate_turn_takes_the_written_out_step(tiny_model_dir, monkeypatch):
    """generate_turn's one-token steps go through decode_step where written_out says so, with
    the same greedy tokens as through the model's forward; the model's own hooks see every step
    (speedlab/bench.py times the steps so), and its forward is its own again after the turn."""
    from fast import cpu_step, decode
    model, tok = load_model(tiny_model_dir, "cpu")
    prompts = [[5, 6, 7, 8], [9, 10], [9, 10]]
    calls, seen = [], []
    real = cpu_step.decode_step
    monkeypatch.setattr(cpu_step, "decode_step", lambda *a, **k: calls.append(1) or real(*a, **k))
    hook = model.register_forward_pre_hook(lambda m, a, k: seen.append(k["input_ids"].shape[1]), with_kwargs=True)
    written = decode.generate_turn(model, tok, prompts, 6, greedy=True, bf16=False)
    assert len(calls) == seen.count(1) > 0 and "forward" not in model.__dict__
    monkeypatch.setattr(cpu_step, "written_out", lambda model: False)
    calls.clear()
    assert decode.generate_turn(model, tok, prompts, 6, greedy=True, bf16=False) == written and not calls
    hook.remove()


def test_hooks_on_the_linears_run_at_every_written_out_step(tiny_model_dir):
    """A hook on a Linear runs at every written-out step (the Linears are called as modules), and
    the logits stay the model's."""
    model, _ = load_model(tiny_model_dir, "cpu")
    seen = []
    model.model.layers[1].self_attn.k_proj.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    written = steps(model, "written", False, True)
    assert len(seen) == 3 + 1  # three steps and the prefill
    assert all(torch.equal(a, b) for a, b in zip(written, steps(model, "model", False, True)))
