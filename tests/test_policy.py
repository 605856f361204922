"""policy.py: sampling at a temperature and cutting a turn at its stop string, on a tiny random
model."""
import torch

from loss import token_logprobs
from policy import cut_at_stop, generate_turn, load_model


def test_logprob_is_the_sampling_distribution_at_temperature(tiny_model_dir):
    model, tok = load_model(tiny_model_dir, "cpu")
    prompt = tok("hello there", add_special_tokens=False)["input_ids"]
    torch.manual_seed(0)
    out = model.generate(input_ids=torch.tensor([prompt]), do_sample=True, temperature=0.7,
                         top_k=0, top_p=1.0, max_new_tokens=5, output_scores=True,
                         return_dict_in_generate=True, pad_token_id=tok.pad_token_id)
    ids = out.sequences
    lp = token_logprobs(model, ids, torch.ones_like(ids), temperature=0.7)[0, len(prompt) - 1:]
    sampled = ids[0, len(prompt):]
    want = torch.stack([torch.log_softmax(s[0].float(), -1)[t] for s, t in zip(out.scores, sampled)])
    assert torch.allclose(lp, want, atol=1e-4)
    at_t1 = token_logprobs(model, ids, torch.ones_like(ids), temperature=1.0)[0, len(prompt) - 1:]
    assert not torch.allclose(at_t1, want, atol=1e-3)  # temperature matters


def test_generate_turn_cuts_at_stop_and_keeps_ids(tiny_model_dir):
    model, tok = load_model(tiny_model_dir, "cpu")
    text_ids = tok("a <tool>{}</tool> tail", add_special_tokens=False)["input_ids"]
    cut = cut_at_stop(text_ids, tok, ["</tool>"])
    assert tok.decode(cut).endswith("</tool>") and text_ids[:len(cut)] == cut
    assert cut_at_stop([5, tok.eos_token_id, 7], tok, []) == [5, tok.eos_token_id]
    torch.manual_seed(0)
    new = generate_turn(model, tok, [[1, 2, 3], [4, 5]], max_new_tokens=6, bf16=False)
    assert len(new) == 2 and all(1 <= len(n) <= 6 for n in new)
