"""Decoding one turn of every active episode in one batch, and where a turn ends. policy.py plays
the episodes with it; read policy.py first.

Read top to bottom: where a turn ends (the same rule for every path), the plain path
(`hf_generate_turn`: transformers' `generate`, cut at the turn's end), then the fast path
(`generate_turn`: a decode loop that prefills the start all prompts share once, then each distinct
prompt's own tokens once, writes keys and values into a turn-sized cache, and on a CPU takes each
one-token step through `decode_step`, the model's forward written out op by op, and on a GPU
replays each step as one CUDA graph, `GraphedSteps`).
tests/test_policy.py and tests/test_qwen_style.py check that the two give the same tokens greedy,
and sample the same distribution (seed for seed where the fast path is given generate's sampler);
docs/benchmarks.md has their speeds.
"""
import contextlib
import functools
import weakref

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers.cache_utils import Cache, DynamicLayer
from transformers.modeling_outputs import CausalLMOutputWithPast

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


# ---------------------------------------------------------------- the fast path: a decode loop
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
    uniform number u per row, and the first token whose cumulative probability exceeds u. The
    distribution of torch.multinomial(probs, 1), which draws V exponential numbers per row (on a
    CPU the costliest part of a decode step); other tokens for the same seed, so the fast path
    samples as `generate` does in distribution, not seed for seed (tests/test_policy.py checks the
    distribution). A token of probability 0 is never drawn: the cumulative sum does not rise at
    it, and u stays below the total. (CPU cumsum adds up in float64.)"""
    cdf = probs.cumsum(-1)
    total = cdf[:, -1:]
    u = torch.minimum(torch.rand_like(total) * total, total.nextafter(torch.zeros_like(total)))
    return torch.searchsorted(cdf, u, right=True)[:, 0]


@functools.lru_cache(maxsize=4)
def token_texts(tok):
    """The text of every token id, decoded once per tokenizer, for stop strings on token ids."""
    return [tok.decode([i]) for i in range(len(tok))]


def cache_dtype(keys):
    """The dtype a cache holds (a turn's keys and values, or packed weights: packed): under
    autocast the autocast dtype (attention and the Linears compute in it anyway; the keys leave the
    rotary embedding in fp32, the values their projection in bf16), else the tensor's own."""
    kind = keys.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else keys.dtype


class TurnLayer(DynamicLayer):
    """One layer's keys and values for one turn, written in place into a buffer sized for the
    whole turn. transformers' default layer concatenates at every token, reallocating the whole
    cache each time, which on a CPU costs more than the model's matmuls. Under autocast the
    buffer holds the autocast dtype, which attention computes in anyway: the same numbers."""

    def __init__(self, capacity):
        super().__init__()
        self.capacity, self.length, self.at = capacity, 0, None

    def lazy_initialization(self, keys, values):
        self.dtype = cache_dtype(keys)
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
    """The attention mask of a one-token step. On a CPU with SDPA attention it goes as the ready
    (rows, 1, 1, keys) boolean mask: from a 2-D mask without padding (every row of one prompt)
    transformers builds no mask, and SDPA then runs its grouped-query attention without one, which
    for a single query token on a CPU in bf16 is slow: 16 rows of one prompt took 184 ms a step
    without, 92 ms with (docs/benchmarks.md). The same keys are attended either way. Only where
    every layer attends fully: a ready mask would override a sliding window."""
    if model.device.type == "cpu" and model.config._attn_implementation == "sdpa" and full_attention(model.config):
        return attn[:, None, None, :].bool()
    return attn


def sdpa_without_cudnn(model):
    """On a GPU, attention without SDPA's cuDNN backend for the turn; elsewhere nothing changes.
    cuDNN's attention builds a graph for every new shape, and in a decode loop the keys grow by
    one at every step: on an H100 (torch 2.11, bf16) a step at key lengths not seen before took
    64-78 ms against 19-26 ms at lengths seen before, and under the profiler the cuDNN call held
    the host 2.5 ms each, 24 calls a step (docs/benchmarks.md). Flash attention or the
    memory-efficient kernel (which takes the padding mask) run instead; fp32, which cuDNN's
    attention does not compute, runs the same kernels as before."""
    if model.device.type != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


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
        return torch.get_autocast_dtype("cpu") == torch.bfloat16 and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return not greedy and model.dtype == torch.float32


def packed(*linears, key=None):
    """(weight, bias) of plain nn.Linears packed for oneDNN as one Linear (their weights stacked
    along the outputs: one module's, or q, k and v's for decode_step) in the dtype the turn
    computes in (cache_dtype: bf16 under autocast), kept under `key` (the one module by default)
    and packed again only once a parameter has changed: an optimizer step bumps its version counter."""
    key = linears[0] if key is None else key
    weights = [m.weight for m in linears]
    biases = [m.bias for m in linears if m.bias is not None]
    dtype, params = cache_dtype(weights[0]), weights + biases
    kept, kept_dtype = PACKED.get(key, ([], None))[:2]
    if kept_dtype != dtype or len(kept) != len(params) or not all(
            ref() is t and version == t._version for (ref, version), t in zip(kept, params)):
        weight = torch.ops.mkldnn._reorder_linear_weight(torch.cat(weights).detach().to(dtype))
        bias = torch.cat([m.weight.new_zeros(m.out_features) if m.bias is None else m.bias for m in linears]
                         ).detach().to(dtype) if biases else None
        PACKED[key] = [(weakref.ref(t), t._version) for t in params], dtype, weight, bias
    return PACKED[key][2:]


def packed_linear(weight, bias, x):
    """A Linear's forward over its packed weight (x in the weight's dtype, as autocast casts it)."""
    return torch.ops.mkldnn._linear_pointwise(x.to(weight.dtype), weight, bias, "none", [], "")


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
# calls of the layers, attention, MLP and norm modules, no wrappers or mask building per layer,
# and q, k and v from one Linear where the Linears are packed (three Linears stacked along their
# outputs give the same sums).
WRITTEN_OUT = {"LlamaForCausalLM", "Qwen2ForCausalLM"}  # decoders of exactly the shape below


def written_out(model):
    """Whether decode_step can take this model's one-token steps: a Llama or Qwen2 decoder in eval
    mode on a CPU, every layer attending fully through SDPA (one_token_mask hands it the ready
    mask), SiLU MLPs, plain nn.Linear projections (no LoRA or other wrapper), and no hooks on the
    modules it does not call (the model itself and its Linears are called, so their hooks run)."""
    config, core = model.config, getattr(model, "model", None)
    return (type(model).__name__ in WRITTEN_OUT and model.device.type == "cpu" and not model.training
            and config._attn_implementation == "sdpa" and full_attention(config)
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


def decode_step(model, input_ids, position_ids, mask, cache, stacked):
    """Logits (rows, 1, V) of one token a row (input_ids and position_ids (rows, 1)), its keys and
    values written into the turn's cache: the model's forward, written out (written_out says for
    which models). The Linears are called as packed_linears left them; with `stacked` (each
    layer's packed q|k|v weight and bias, where the Linears are packed) q, k and v come from one
    packed Linear. Under autocast the input of each Linear is cast once, as each Linear would cast it."""
    core, rows, config = model.model, input_ids.shape[0], model.config
    heads, width = config.num_attention_heads, config.num_key_value_heads
    dtype = cache_dtype(core.embed_tokens.weight)
    h = core.embed_tokens(input_ids)
    cos, sin = (t.unsqueeze(1) for t in core.rotary_emb(h, position_ids))
    for i, (layer, cached) in enumerate(zip(core.layers, cache.layers)):
        a, mlp = layer.self_attn, layer.mlp
        x = rms_norm(layer.input_layernorm, h).to(dtype)
        qkv = (packed_linear(*stacked[i], x) if stacked else
               torch.cat([a.q_proj(x), a.k_proj(x), a.v_proj(x)], -1))
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
def written_out_steps(model, packs):
    """Within the context the model's one-token forwards with the ready mask (one_token_mask) run
    decode_step, where written_out says so (q, k and v stacked where the Linears are packed,
    `packs`, and no hook waits on them; packed once here, as packed_linears packs); every other
    forward runs the model's own. The model is still called as a module, so its own hooks see
    every step."""
    if not written_out(model):
        yield
        return
    attns = [layer.self_attn for layer in model.model.layers]
    apart = any(hooked(m) for a in attns for m in (a.q_proj, a.k_proj, a.v_proj))
    stacked = None if apart or not packs else [packed(a.q_proj, a.k_proj, a.v_proj, key=a) for a in attns]
    own = model.forward

    def forward(input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, **kwargs):
        one_token = (input_ids is not None and input_ids.shape[1] == 1 and position_ids is not None and not kwargs
                     and attention_mask is not None and attention_mask.dim() == 4
                     and all(isinstance(c, TurnLayer) for c in getattr(past_key_values, "layers", [None])))
        if not one_token:
            return own(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                       past_key_values=past_key_values, **kwargs)
        logits = decode_step(model, input_ids, position_ids, attention_mask, past_key_values, stacked)
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


class GraphedSteps:
    """The one-token steps of a turn on a GPU, captured once as a CUDA graph and replayed: the host
    launches one graph a step instead of about 1,100 kernels. For the Qwen2.5-0.5B-shaped card at 64
    rows on an H200 the eager loop took 30.8 ms a step in bf16 (launch-bound: the GPU mostly idle),
    graphed 7.0 ms; in fp32 28.0 and 8.4 ms, greedy tokens `generate`'s in 64 of 64 rows
    (docs/benchmarks.md). A graph replays fixed shapes and addresses, so every row stays in the
    batch to the turn's end (a stopped row's tokens are dropped, as `generate` drops them), the
    cache keeps the turn's width (TurnLayer.fix_shape) under a ready (rows, 1, 1, width) mask whose
    next column is set at each step, and the token and positions are copied into fixed tensors.
    Sampling stays outside the graph. Elsewhere (a CPU, which tests it) the same steps run eagerly."""

    def __init__(self, model, cache, attn, pos, max_new_tokens):
        self.model, self.cache, self.column = model, cache, attn.shape[1]
        self.mask = F.pad(attn.bool(), (0, max_new_tokens))[:, None, None, :]
        self.token, self.pos = pos.new_zeros(len(pos), 1), pos[:, None].clone()
        for layer in cache.layers:
            layer.fix_shape()
        self.graph = torch.cuda.CUDAGraph() if model.device.type == "cuda" else None
        if self.graph is not None:
            self.capture()

    def forward(self):
        kind = self.model.device.type  # autocast's weight cache off: a captured step casts the weights itself
        with torch.autocast(kind, torch.get_autocast_dtype(kind), enabled=torch.is_autocast_enabled(kind),
                            cache_enabled=False):
            return self.model(input_ids=self.token, position_ids=self.pos, attention_mask=self.mask,
                              past_key_values=self.cache).logits[:, -1]

    def capture(self):
        """Two steps warm up on a side stream (as capture wants), then one is captured. Their keys
        land past the prompt, masked, and are overwritten by the turn's own."""
        with torch.cuda.device(self.model.device):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.forward(), self.forward()
            torch.cuda.current_stream().wait_stream(side)
            for layer in self.cache.layers:
                layer.at.fill_(self.column)
            with torch.cuda.graph(self.graph):
                self.logits = self.forward()

    def __call__(self, token):
        """The logits after `token` (one a row): its position, its own key unmasked, one step."""
        self.token.copy_(token[:, None])
        self.pos.add_(1)
        self.mask[..., self.column] = True
        self.column += 1
        if self.graph is None:
            return self.forward()
        self.graph.replay()
        return self.logits


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
                  stop_strings=(), greedy=False, bf16=True, reference=False, graphed=None):
    """Sample one turn for every active episode; returns the new ids per episode, up to and
    including the first end-of-turn id (end_of_turn_ids) or the token that completes a stop string.

    Each distinct prompt is prefilled once (the G episodes of a question, the K candidates of an
    AT-GRPO group share theirs) and its keys/values are repeated for its rows; the start that all
    distinct prompts share (the system prompt and one-shot example of every search episode) is
    prefilled once before them, in one row (shared_length); then all rows
    decode together, a row leaving the batch when it stops. The keys/values go into buffers
    sized for the turn (TurnLayer). One autocast context spans the loop, so the bf16 copies of
    the weights are made once, not at every token; on a CPU the Linears run over weights packed
    for oneDNN instead where packable says so (with native bf16: the same numbers; in fp32 for
    sampled turns: the same up to rounding), kept until an optimizer step changes the weights.
    Tokens are drawn by `draw` (one random number per row); on a CPU each step's mask goes ready
    (one_token_mask) and a Llama or Qwen2 model's steps run decode_step (its logits bit for bit,
    with fewer calls); on a GPU attention runs without cuDNN's kernel (sdpa_without_cudnn) and the
    steps replay one CUDA graph (GraphedSteps; rows then stay in the batch to the end; `graphed`
    forces it on or off, and a CPU runs the same fixed-shape steps eagerly: the tests use that).
    `reference=True` runs transformers' `generate` instead: the same tokens for greedy decoding,
    the same distribution when sampling (tests compare the two).

    1. A checkpoint may have more embedding rows than its tokenizer has ids (Qwen2.5: 151,936 for
    151,665). Those ids are sampled like any other, as `generate` samples them, so the log-prob
    of a token is that of the distribution it was drawn from; they decode as empty text, so the
    environment sees nothing of them, and the update trains them down like any bad token.
    """
    if reference:
        return hf_generate_turn(model, tok, prefixes, max_new_tokens, temperature, top_p,
                                stop_strings, greedy, bf16)
    unique = list(dict.fromkeys(map(tuple, prefixes)))
    row_of = torch.tensor([unique.index(tuple(p)) for p in prefixes], device=model.device)
    shared = shared_length(unique)
    ids, attn, pos = left_padded([u[shared:] for u in unique], tok.pad_token_id, model.device)
    ends, texts, tails = end_of_turn_ids(tok, model), token_texts(tok), [""] * len(prefixes)
    new, active, done, steps = [[] for _ in prefixes], list(range(len(prefixes))), set(), None
    with autocast(str(model.device), bf16), packed_linears(model, greedy) as packs, \
            sdpa_without_cudnn(model), written_out_steps(model, packs):
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
                steps = steps or GraphedSteps(model, cache, attn, pos, max_new_tokens)
                logits = steps(token)
                continue
            if len(going) < len(active):  # stopped rows leave the batch and the cache
                keep = torch.tensor(going, device=model.device)
                cache.batch_select_indices(keep)
                attn, pos, token, active = attn[keep], pos[keep], token[keep], [active[j] for j in going]
            attn = torch.cat([attn, attn.new_ones(len(active), 1)], 1)
            pos = pos + 1
            logits = model(input_ids=token[:, None], attention_mask=one_token_mask(model, attn),
                           position_ids=pos[:, None], past_key_values=cache).logits[:, -1]
    return new
