"""One turn of every active episode, decoded together with transformers' `generate`, and where a
turn ends. policy.py plays the episodes with it; read policy.py first.

Read top to bottom: where a turn ends for any chat model (the tokenizer's EOS, the generation
config's EOS list, the chat template's end-of-turn token), which tokens the episode keeps of a
turn, then `hf_generate_turn`: one batched `generate` call over left-padded prompts, each row cut
at its turn's end. This is the path `--plain` runs; the default runs the same turn faster
(fast/decode.py), and tests/test_policy.py and tests/test_qwen_style.py check that the two give
the same tokens greedy and sample the same distribution.
"""
import functools

import torch

from machinery.precision import autocast


# ---------------------------------------------------------------- where a turn ends
@functools.lru_cache(maxsize=4)
def special_ids(tok):
    """The ids of the tokenizer's special tokens (<|im_start|>, <|endoftext|>, ...)."""
    return frozenset(tok.all_special_ids) | {i for i, t in tok.added_tokens_decoder.items() if t.special}


@functools.lru_cache(maxsize=4)
def template_end_of_turn(tok):
    """The token the chat template closes an assistant message with (<|im_end|> for ChatML
    models such as SmolLM2 and Qwen2.5, <|eot_id|> for Llama 3), or None if it closes with text."""
    probe = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "\x00"}]
    text = tok.apply_chat_template(probe, tokenize=False)
    after = tok(text[text.index("\x00") + 1:], add_special_tokens=False)["input_ids"]
    return after[0] if after and after[0] in special_ids(tok) else None


def end_of_turn_ids(tok, model):
    """Every id that ends a model's turn: the tokenizer's EOS, each EOS of the model's generation
    config (Qwen2.5-Instruct lists <|im_end|> and <|endoftext|>) and the chat template's
    end-of-turn token (a base model's EOS is <|endoftext|>, but its template ends a turn with
    <|im_end|>: without it the model would write on into a turn of its own invention)."""
    generation = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = {*as_list(tok.eos_token_id), *as_list(generation), template_end_of_turn(tok)}
    return frozenset(ids - {None})


def as_list(ids):
    return ids if isinstance(ids, (list, tuple)) else [ids]


def kept_turn(new_ids, tok):
    """A turn as the episode keeps it. A turn that ends on the chat template's own end-of-turn
    token keeps it: closing the turn is the model's choice and is trained like any token. A turn
    that ends on another special token (an EOS the template never writes, such as Qwen's
    <|endoftext|> document separator) drops it: the template's own closing then follows as
    environment text, so the next turn reads the conversation as the template writes it."""
    if new_ids and new_ids[-1] != template_end_of_turn(tok) and new_ids[-1] in special_ids(tok):
        return new_ids[:-1]
    return new_ids


def cut_at_stop(new_ids, tok, stop_strings, ends):
    """Keep tokens up to and including the first id of `ends` or the token that completes a
    stop string."""
    for i, t in enumerate(new_ids):
        if t in ends:
            return new_ids[:i + 1]
        if stop_strings and any(s in tok.decode(new_ids[max(0, i - 8):i + 1]) for s in stop_strings):
            return new_ids[:i + 1]
    return new_ids


# ---------------------------------------------------------------- the plain path: transformers' generate
def left_padded(prompts, pad_id, device):
    """ids, attention mask and position ids (B, width) of left-padded prompts: every row's next
    token sits at the end; positions count each row's own tokens from 0."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):], attn[i, width - len(p):] = torch.tensor(p), 1
    return ids.to(device), attn.to(device), (attn.cumsum(-1) - 1).clamp(min=0).to(device)


@torch.no_grad()
def hf_generate_turn(model, tok, prefixes, max_new_tokens, temperature=1.0, top_p=1.0,
                     stop_strings=(), greedy=False, bf16=True):
    """The reference path: one batched `generate` call that stops on the same end-of-turn ids,
    each row cut after its first stop string or end id (the padding `generate` writes after a
    finished row is cut away with it)."""
    ids, attn, _ = left_padded(prefixes, tok.pad_token_id, model.device)
    ends = end_of_turn_ids(tok, model)
    sampling = dict(do_sample=False) if greedy else dict(
        do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
    with autocast(str(model.device), bf16):
        out = model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=max_new_tokens,
                             pad_token_id=tok.pad_token_id, eos_token_id=sorted(ends),
                             stop_strings=list(stop_strings) or None, tokenizer=tok, **sampling)
    return [cut_at_stop(row.tolist(), tok, stop_strings, ends) for row in out[:, ids.shape[1]:].cpu()]
