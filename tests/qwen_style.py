"""A Qwen2.5-style tokenizer and a tiny Qwen2 model, built offline (no Qwen file is downloaded or
shipped): what the card's `--model Qwen/Qwen2.5-0.5B` brings that the bundled Llama does not.

- Tokenizer: byte-level BPE with Qwen2's pre-tokenizer regex, the bundled SmolLM2 vocabulary and
  merges padded with filler tokens to Qwen's 151,643 regular ids, then Qwen2.5's 22 added tokens
  at their published ids 151,643-151,664, and a ChatML chat template that writes what Qwen2.5's
  does (its default system line included, no tool branch).
- Two variants, as the hub ships them: "base" (Qwen2.5-0.5B: EOS <|endoftext|>, generation
  config EOS 151643) and "instruct" (Qwen2.5-0.5B-Instruct: EOS <|im_end|>, generation config
  EOS [151645, 151643]).
- Model: Qwen2 (attention bias, grouped-query attention, tied embeddings) with 151,936 embedding
  rows, 271 more than the tokenizer has ids, as in the real checkpoints.

Used by tests/conftest.py and scripts/qwen_shaped_smoke.py.
"""
import itertools
import json
import os

REGULAR = 151_643  # regular (BPE) ids of Qwen2.5's tokenizer
VOCAB_ROWS = 151_936  # embedding rows of the Qwen2.5 checkpoints
# (content, special) at ids 151643.. in order, as in Qwen2.5's tokenizer_config.json
ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
         ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
         ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
         ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
         ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
         ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
         ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
         ("<|file_sep|>", False)]
ENDOFTEXT, IM_START, IM_END = REGULAR, REGULAR + 1, REGULAR + 2
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}{%- if not (loop.first and message['role'] == 'system') %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
VARIANTS = {"base": dict(eos="<|endoftext|>", generation_eos=ENDOFTEXT),
            "instruct": dict(eos="<|im_end|>", generation_eos=[IM_END, ENDOFTEXT])}


def fillers(taken):
    """Distinct strings of byte-level characters that are not in the vocabulary (never produced
    by the merges; they only pad the id space, as unused ids do in any large vocabulary)."""
    alphabet = [chr(c) for c in range(0x100, 0x144)]  # GPT-2's stand-ins for non-printing bytes
    for n in itertools.count(2):
        for chars in itertools.product(alphabet, repeat=n):
            s = "".join(chars)
            if s not in taken:
                yield s


def tokenizer_json(smollm_tokenizer_json):
    """Qwen2.5's layout over the bundled byte-level BPE: its special tokens (ids 0-16) become
    fillers, the id space is padded to REGULAR, Qwen's added tokens follow."""
    spec = json.load(open(smollm_tokenizer_json))
    special = {a["id"] for a in spec["added_tokens"]}
    vocab = {t: i for t, i in spec["model"]["vocab"].items() if i not in special}
    fill = fillers(set(vocab))
    by_id = {i: t for t, i in vocab.items()}
    spec["model"]["vocab"] = {by_id.get(i) or next(fill): i for i in range(REGULAR)}
    spec["added_tokens"] = [dict(id=REGULAR + i, content=c, single_word=False, lstrip=False,
                                 rstrip=False, normalized=False, special=s) for i, (c, s) in enumerate(ADDED)]
    spec["normalizer"] = {"type": "NFC"}
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    spec["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return spec


def save_tokenizer(path, variant, smollm_dir):
    """Write the tokenizer of `variant` ("base" or "instruct") into the folder `path`."""
    from transformers import PreTrainedTokenizerFast
    os.makedirs(path, exist_ok=True)
    spec_path = os.path.join(path, "tokenizer.json")
    with open(spec_path, "w") as f:
        json.dump(tokenizer_json(os.path.join(smollm_dir, "tokenizer.json")), f)
    eos = VARIANTS[variant]["eos"]
    tok = PreTrainedTokenizerFast(tokenizer_file=spec_path, eos_token=eos, pad_token="<|endoftext|>",
                                  chat_template=CHAT_TEMPLATE, model_max_length=32768)
    tok.save_pretrained(path)
    return tok


def qwen2_config(variant, **size):
    """Qwen2's architecture at the given size (defaults: tiny, for tests)."""
    from transformers import Qwen2Config
    shape = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=4096)
    eos = VARIANTS[variant]["generation_eos"]
    return Qwen2Config(vocab_size=VOCAB_ROWS, tie_word_embeddings=True, rope_theta=1_000_000.0,
                       rms_norm_eps=1e-6, use_sliding_window=False, bos_token_id=ENDOFTEXT,
                       eos_token_id=eos, **{**shape, **size})


def save_model(path, variant, smollm_dir, seed=0, **size):
    """A random-weight Qwen2 model with the tokenizer and generation config of `variant`."""
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM
    tok = save_tokenizer(path, variant, smollm_dir)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(qwen2_config(variant, **size))
    model.generation_config = GenerationConfig(bos_token_id=ENDOFTEXT, pad_token_id=ENDOFTEXT,
                                               eos_token_id=VARIANTS[variant]["generation_eos"])
    model.save_pretrained(path)
    return model, tok
