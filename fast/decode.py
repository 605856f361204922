"""The decode loop: one turn of every active episode, decoded together over a turn-sized cache,
faster than transformers' `generate` (generation.hf_generate_turn, the plain path) with the same
tokens greedy and the same distribution sampled (tests/test_policy.py, tests/test_qwen_style.py).
Its one-token step on a CPU is fast/cpu_step.py, on a GPU fast/gpu_step.py. Each lever is kept
because it measured at least 1.15x (docs/benchmarks.md, the lever table).
"""
import functools

import torch
from transformers.cache_utils import Cache, DynamicLayer

from fast.cpu_step import packed_linears, written_out_steps
from fast.gpu_step import GraphedSteps, sdpa_without_cudnn
from generation import end_of_turn_ids, left_padded
from machinery.precision import autocast, compute_dtype


def sampling_probs(logits, temperature, top_p):
    """The distribution a token is drawn from: softmax(logits / temperature), restricted to the
    smallest set of most likely tokens whose probability reaches top_p (nucleus sampling; the
    most likely token always stays), renormalised. The same rule as transformers' generate."""
    logits = logits.float() / temperature
    if top_p < 1.0:
        ascending, order = torch.sort(logits, descending=False)
        drop = ascending.softmax(-1).cumsum(-1) <= 1 - top_p
        drop[..., -1] = False
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits.softmax(-1)


def draw(probs):
    """One token per row of `probs` (B, V), by the inverse of its cumulative distribution: one
    uniform number u per row, the first token whose cumulative probability exceeds u. The
    distribution of torch.multinomial(probs, 1), which draws V exponential numbers a row (the
    lever: 1.27x on the bench's generation), not its tokens for a seed (tests/test_policy.py checks
    the distribution). A token of probability 0 is never drawn: the cumulative sum does not rise
    at it, and u stays below the total."""
    cdf = probs.cumsum(-1)
    total = cdf[:, -1:]
    u = torch.minimum(torch.rand_like(total) * total, total.nextafter(torch.zeros_like(total)))
    return torch.searchsorted(cdf, u, right=True)[:, 0]


@functools.lru_cache(maxsize=4)
def token_texts(tok):
    """The text of every token id, decoded once per tokenizer, for stop strings on token ids."""
    return [tok.decode([i]) for i in range(len(tok))]


class TurnLayer(DynamicLayer):
    """One layer's keys and values for one turn, written in place into a buffer sized for the
    whole turn. transformers' default layer concatenates at every token, reallocating the whole
    cache each time, which on a CPU costs more than the model's matmuls. Under autocast the
    buffer holds the autocast dtype, which attention computes in anyway: the same numbers."""

    def __init__(self, capacity):
        super().__init__()
        self.capacity, self.length, self.at = capacity, 0, None

    def lazy_initialization(self, keys, values):
        self.dtype = compute_dtype(keys)
        self.device, self.is_initialized = keys.device, True
        self.key_buffer = keys.new_empty(*keys.shape[:2], self.capacity, keys.shape[-1], dtype=self.dtype)
        self.value_buffer = values.new_empty(*values.shape[:2], self.capacity, values.shape[-1], dtype=self.dtype)

    def update(self, keys, values, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(keys, values)
        if self.at is not None:  # one shape at every step (fix_shape): the whole buffer, the key at `at`
            self.key_buffer.index_copy_(2, self.at, keys.to(self.dtype))
            self.value_buffer.index_copy_(2, self.at, values.to(self.dtype))
            self.at.add_(1)
            return self.key_buffer, self.value_buffer
        start, self.length = self.length, self.length + keys.shape[-2]
        self.key_buffer[:, :, start:self.length] = keys
        self.value_buffer[:, :, start:self.length] = values
        self.keys, self.values = self.key_buffer[:, :, :self.length], self.value_buffer[:, :, :self.length]
        return self.keys, self.values

    def batch_select_indices(self, rows):
        self.key_buffer, self.value_buffer = self.key_buffer[rows], self.value_buffer[rows]
        self.keys, self.values = self.key_buffer[:, :, :self.length], self.value_buffer[:, :, :self.length]

    def fix_shape(self):
        """From here on every one-token update writes its key and value at the position held in
        the device tensor `at` and returns the whole buffer (attended under a mask of the turn's
        width), so every step has the same shapes and addresses, as a CUDA graph needs. The
        buffer past the prompt is zeroed: a masked key still enters attention's sums times 0."""
        self.key_buffer[:, :, self.length:].zero_()
        self.value_buffer[:, :, self.length:].zero_()
        self.at = torch.tensor([self.length], device=self.device)


def full_attention(config):
    """Whether every layer attends to all earlier tokens (Llama, Qwen2, ...), none to a sliding window."""
    return set(getattr(config.get_text_config(), "layer_types", None) or ["full_attention"]) == {"full_attention"}


def turn_cache(config, capacity):
    """TurnLayer for every layer of a model whose layers all attend fully; None (transformers' own
    cache) for sliding-window or other layer kinds."""
    if not full_attention(config):
        return None
    return Cache(layers=[TurnLayer(capacity) for _ in range(config.get_text_config().num_hidden_layers)])


def one_token_mask(model, attn):
    """The attention mask of a one-token step: on a CPU with SDPA attention the ready (rows, 1, 1,
    keys) boolean mask, which is what the written-out step (cpu_step) takes; the same keys are
    attended. Only where every layer attends fully: a ready mask would override a sliding window."""
    if model.device.type == "cpu" and model.config._attn_implementation == "sdpa" and full_attention(model.config):
        return attn[:, None, None, :].bool()
    return attn


# Who watches the loop: fn(model, event, rows, keys) with event "turn" as a turn starts, "step" at the start
# of each one-token step (its rows and the keys it attends) and "end" as the turn ends. A step replayed as
# a CUDA graph calls no forward, so a forward hook cannot see it (speedlab/bench.py's decode clock).
WATCHERS = []


def watched(model, event, rows=0, keys=0):
    for watch in WATCHERS:
        watch(model, event, rows, keys)


def leave_batch(going, active, cache, attn, pos, token):
    """Stopped rows leave the batch and the cache (`going`: the indices of the rows still going)."""
    if len(going) == len(active):
        return active, attn, pos, token
    keep = torch.tensor(going, device=attn.device)
    cache.batch_select_indices(keep)
    return [active[j] for j in going], attn[keep], pos[keep], token[keep]


def shared_length(prompts):
    """How many first tokens all of several prompts share (the system prompt, the one-shot
    example, a question's first turns), leaving every prompt at least one token of its own; 0 for
    a single prompt."""
    if len(prompts) < 2:
        return 0
    n = min(map(len, prompts)) - 1
    first = prompts[0]
    return next((i for i in range(n) if any(p[i] != first[i] for p in prompts)), max(n, 0))


@torch.no_grad()
def generate_turn(model, tok, prefixes, max_new_tokens, temperature=1.0, top_p=1.0,
                  stop_strings=(), greedy=False, bf16=True, graphed=None):
    """Sample one turn for every active episode; returns the new ids per episode, up to and
    including the first end-of-turn id (end_of_turn_ids) or the token that completes a stop string.

    The start all distinct prompts share (system prompt, one-shot example) is prefilled once, in
    one row (shared_length), then each distinct prompt's own tokens once (the G episodes of a
    question share theirs), the keys and values repeated for its rows into buffers sized for the
    turn (TurnLayer); then all rows decode together, a row leaving the batch when it stops
    (leave_batch), each token drawn by `draw`. One autocast context spans the loop, so the bf16
    copies of the weights are made once. On a CPU the Linears run packed and the steps written
    out (cpu_step); on a GPU attention runs without cuDNN (sdpa_without_cudnn) and the steps
    replay one CUDA graph (GraphedSteps; `graphed` forces it on or off, and a CPU then runs the
    same fixed-shape steps eagerly: the tests use that).

    1. A checkpoint may have more embedding rows than its tokenizer has ids (Qwen2.5: 151,936 for
    151,665). Those ids are sampled like any other, as `generate` samples them, so the log-prob
    of a token is that of the distribution it was drawn from; they decode as empty text, so the
    environment sees nothing of them, and the update trains them down like any bad token.
    """
    unique = list(dict.fromkeys(map(tuple, prefixes)))
    row_of = torch.tensor([unique.index(tuple(p)) for p in prefixes], device=model.device)
    shared = shared_length(unique)
    ids, attn, pos = left_padded([u[shared:] for u in unique], tok.pad_token_id, model.device)
    ends, texts, tails = end_of_turn_ids(tok, model), token_texts(tok), [""] * len(prefixes)
    new, active, done, steps = [[] for _ in prefixes], list(range(len(prefixes))), set(), None
    watched(model, "turn")
    with autocast(str(model.device), bf16), packed_linears(model, greedy), \
            sdpa_without_cudnn(model), written_out_steps(model):
        cache = turn_cache(model.config, shared + ids.shape[1] + max_new_tokens)
        graphed = (model.device.type == "cuda" if graphed is None else graphed) and cache is not None
        if shared:  # the start all prompts share, once, its keys/values repeated per prompt
            start = torch.tensor([unique[0][:shared]], device=model.device)
            cache = model(input_ids=start, attention_mask=torch.ones_like(start), position_ids=torch.arange(
                shared, device=model.device)[None], past_key_values=cache, logits_to_keep=1).past_key_values
            cache.batch_select_indices(torch.zeros(len(unique), dtype=torch.long, device=model.device))
            attn, pos = torch.cat([attn.new_ones(len(unique), shared), attn], 1), pos + shared
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache,
                    logits_to_keep=1)
        cache = out.past_key_values
        cache.batch_select_indices(row_of)  # one prefill per distinct prompt, repeated per row
        logits, attn, pos = out.logits[row_of, -1], attn[row_of], pos[row_of, -1]
        for step in range(max_new_tokens):
            token = logits.float().argmax(-1) if greedy else draw(sampling_probs(logits, temperature, top_p))
            going = []
            for j, (i, t) in enumerate(zip(active, token.tolist())):
                if i in done:  # graphed: a stopped row stays in the batch, its tokens dropped
                    continue
                new[i].append(t)
                tails[i] = (tails[i] + (texts[t] if t < len(texts) else ""))[-64:]  # note 1
                if t not in ends and not any(s in tails[i] for s in stop_strings):
                    going.append(j)
                else:
                    done.add(i)
            if not going or step == max_new_tokens - 1:
                break
            if graphed:
                watched(model, "step", len(active), attn.shape[1] + 1 + step)
                steps = steps or GraphedSteps(model, cache, attn, pos, max_new_tokens)
                logits = steps(token)
                continue
            active, attn, pos, token = leave_batch(going, active, cache, attn, pos, token)
            attn = torch.cat([attn, attn.new_ones(len(active), 1)], 1)
            pos = pos + 1
            watched(model, "step", len(active), attn.shape[1])
            logits = model(input_ids=token[:, None], attention_mask=one_token_mask(model, attn),
                           position_ids=pos[:, None], past_key_values=cache).logits[:, -1]
    watched(model, "end")
    return new
