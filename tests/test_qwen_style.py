"""The card's model family, offline: a tiny Qwen2 with a Qwen2.5-style tokenizer (qwen_style.py)
in its base and instruct EOS variants. Where a turn ends (the tokenizer's EOS, the generation
config's EOS list, the chat template's <|im_end|>), ids beyond the tokenizer, `generate` equal to
the decode loop, and the whole pipeline: search (mt, mr, or), Sokoban (at, grpo, per-role),
evaluate, resume and show.

A steered model writes a chosen script: a forward hook adds a large logit to the script's token
at each position, so greedy decoding and sampling alike, in the decode loop and in `generate`,
produce exactly the script (positions come from position_ids, which both paths pass)."""
import contextlib
import json
import os

import pytest
import torch

from fast import decode
import generation
import env_search
from tools import evaluate
import policy
import rewards
from tools import show
import train
from qwen_style import ENDOFTEXT, IM_END, IM_START
from test_evaluate import search_flags
from test_train import crash_at, strip_times


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


@contextlib.contextmanager
def steered(model, scripts):
    """While inside, a row whose prompt has length n writes scripts[n] (token ids) from position
    n on; other positions are left to the model. Prompts of different lengths get their own
    scripts, as long as [n, n + len(script)) do not overlap."""
    next_token = {n + j: t for n, script in scripts.items() for j, t in enumerate(script)}

    def hook(module, args, kwargs, out):
        positions = kwargs["position_ids"][:, -out.logits.shape[1]:]
        for (b, t), p in zip(torch.cartesian_prod(*map(torch.arange, positions.shape)).tolist(), positions.flatten().tolist()):
            if p + 1 in next_token:
                out.logits[b, t, next_token[p + 1]] += 1e4
        return out
    handle = model.register_forward_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


class Recorder:
    """An environment of `turns` turns that records what the model said and answers "OBS"."""

    def __init__(self, turns=1):
        self.messages, self.said, self.turns = [{"role": "user", "content": "Capital of Italy?"}], [], turns

    def step(self, text):
        self.said.append(text)
        return "OBS" if len(self.said) < self.turns else None


def settings(**kw):
    base = dict(prefill="<reasoning>", max_completion_length=24, temperature=1.0, top_p=1.0,
                plain=False, bf16=False)
    return type("Settings", (), {**base, **kw})


# ---------------------------------------------------------------- the fixture is Qwen2.5-shaped
def test_the_fixture_has_qwen25_ids_template_and_padded_vocabulary(qwen_dir):
    model, tok = policy.load_model(qwen_dir, "cpu")
    variant = os.path.basename(qwen_dir).split("-")[1].rstrip("0123456789")
    assert len(tok) == 151_665 and model.config.vocab_size == 151_936 > len(tok)
    assert tok.convert_ids_to_tokens([ENDOFTEXT, IM_START, IM_END, 151_664]) == [
        "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|file_sep|>"]
    assert tok.eos_token_id == {"base": ENDOFTEXT, "instruct": IM_END}[variant]
    assert model.generation_config.eos_token_id == {"base": ENDOFTEXT, "instruct": [IM_END, ENDOFTEXT]}[variant]
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True, tokenize=False)
    assert text == ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                    "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    attention = model.model.layers[0].self_attn
    assert attention.q_proj.bias is not None and attention.k_proj.out_features < attention.q_proj.out_features
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied


def test_end_of_turn_ids_for_qwen_and_the_bundled_model(qwen_dir, tokenizer):
    model, tok = policy.load_model(qwen_dir, "cpu")
    assert generation.template_end_of_turn(tok) == IM_END
    assert generation.end_of_turn_ids(tok, model) == {IM_END, ENDOFTEXT}  # both variants, by two routes
    assert generation.end_of_turn_ids(tokenizer, None) == {tokenizer.eos_token_id}  # SmolLM2: <|im_end|>


# ---------------------------------------------------------------- breakage 1: padded vocabulary
@pytest.mark.parametrize("reference", [False, True])
def test_a_sampled_id_beyond_the_tokenizer_neither_crashes_nor_shows(qwen_dir, reference):
    model, tok = policy.load_model(qwen_dir, "cpu")
    env = Recorder()
    prompt = policy.prompt_ids(tok, env.messages, "<reasoning>")
    script = ids(tok, " Rome") + [151_900] + ids(tok, " it is</reasoning>") + [IM_END]
    with steered(model, {len(prompt): script}):
        samples, _ = policy.play_episodes(model, tok, [env], settings(plain=reference),
                                          env_search.STOP_STRINGS)
    assert samples[0].ids == prompt + script
    assert env.said == ["<reasoning> Rome it is</reasoning>"]  # the id decodes as nothing


# ---------------------------------------------------------------- breakage 2: where a turn ends
@pytest.mark.parametrize("reference", [False, True])
def test_im_end_ends_the_turn_and_nothing_after_it_is_graded(qwen_dir, reference):
    """A model that writes past <|im_end|> into a turn of its own invention: with only the
    tokenizer's EOS (<|endoftext|> in the base variant) the made-up answer was graded exact
    match 1.0 and trained."""
    model, tok = policy.load_model(qwen_dir, "cpu")
    env = Recorder()
    prompt = policy.prompt_ids(tok, env.messages, "<reasoning>")
    written = ids(tok, " Paris is it") + [IM_END] + ids(tok, "\n") + [IM_START] + ids(tok, "user Good. Now<answer>\nRome</answer>")
    with steered(model, {len(prompt): written}):
        samples, _ = policy.play_episodes(model, tok, [env], settings(plain=reference),
                                          env_search.STOP_STRINGS)
    turn = samples[0].ids[len(prompt):]
    assert turn == ids(tok, " Paris is it") + [IM_END] and samples[0].turn[-1] == 1  # kept and trained
    assert env.said == ["<reasoning> Paris is it"]
    completion = [{"role": "assistant", "content": env.said[0]}]
    assert rewards.exact_match_reward(completion, ["Rome"]) == 0


@pytest.mark.parametrize("end", [ENDOFTEXT, IM_END])
def test_the_next_turn_reads_as_the_template_writes_it(qwen_dir, end):
    """Ended on <|im_end|>: kept and trained, the environment text goes on after it. Ended on
    <|endoftext|> (Qwen's document separator; an EOS of both variants): dropped, and the
    template's <|im_end|> is appended as environment text. Either way exactly one <|im_end|>
    closes the turn and no <|endoftext|> is in the conversation."""
    model, tok = policy.load_model(qwen_dir, "cpu")
    env = Recorder(turns=2)
    prompt = policy.prompt_ids(tok, env.messages, "<reasoning>")
    first = ids(tok, " x</reasoning>")
    with steered(model, {len(prompt): first + [end]}):
        samples, _ = policy.play_episodes(model, tok, [env], settings(max_completion_length=12),
                                          env_search.STOP_STRINGS)
    s = samples[0]
    env_text = ids(tok, "\n") + [IM_START] + ids(tok, "user\nOBS") + [IM_END] + ids(tok, "\n") + [IM_START] + ids(
        tok, "assistant\n<reasoning>")
    after = len(prompt) + len(first)
    if end == IM_END:
        assert s.ids[after:after + 1 + len(env_text)] == [IM_END] + env_text and s.turn[after] == 1
    else:
        assert s.ids[after:after + 1 + len(env_text)] == [IM_END] + env_text and s.turn[after] == 0
    assert ENDOFTEXT not in s.ids[:after + 1 + len(env_text)] and len(env.said) == 2


# ---------------------------------------------------------------- breakage 3: generate == decode loop
def test_generate_and_the_decode_loop_stop_alike_and_train_no_padding(qwen_dir):
    """Rows of one batch end on <|im_end|>, on <|endoftext|>, on a stop string and at the token
    limit: `generate` and the decode loop give the same ids, each cut at its end; the padding
    `generate` writes after a finished row is not kept."""
    model, tok = policy.load_model(qwen_dir, "cpu")
    body = ids(tok, " The answer is")
    scripts = {10: body + [IM_END, 7, 8], 30: body + ids(tok, " here") + [ENDOFTEXT, 9],
               50: body + ids(tok, " <answer>Rome</answer> more"), 70: body * 4}
    prompts = [list(range(1000, 1000 + n)) for n in scripts]
    runs = {}
    for reference in (False, True):
        with steered(model, scripts):
            turn = generation.hf_generate_turn if reference else decode.generate_turn
            runs[reference] = turn(model, tok, prompts, 12, stop_strings=env_search.STOP_STRINGS, greedy=True, bf16=False)
    assert runs[False] == runs[True]
    assert runs[True][0] == body + [IM_END] and runs[True][1] == body + ids(tok, " here") + [ENDOFTEXT]
    assert tok.decode(runs[True][2]).endswith("</answer>") and len(runs[True][3]) == 12


def test_seeded_sampling_equals_generate_on_qwen(qwen_dir, generate_sampler):
    """Unsteered, with generate's sampler in the loop: the same seed draws the same tokens from all
    151,936 rows in both paths."""
    model, tok = policy.load_model(qwen_dir, "cpu")
    prompts, runs = [[11, 12, 13, 14], [21, 22], [31, 32, 33]], []
    for reference in (True, False):
        torch.manual_seed(3)
        runs.append(decode.generate_turn(model, tok, prompts, 10, 0.9, 1.0, (), False, False, reference))
    assert runs[0] == runs[1]


# ---------------------------------------------------------------- the pipeline on Qwen
def run_flags(tmp_path, model, name, *extra, search=True):
    """A tiny search run on two documents and two questions (test_evaluate's files); search=False: no data flags."""
    return ["--model", model, *(search_data(tmp_path) if search else []), "--batch-size", "1", "--num-generations", "2",
            "--max-completion-length", "6", "--eval-n", "2", "--eval-every", "1", "--save-every", "1",
            "--micro-batch-size", "2", "--learning-rate", "1e-3", "--warmup-steps", "1", "--bf16", "false",
            "--out", str(tmp_path / name), *extra]


def search_data(tmp_path):
    flags = search_flags(tmp_path, "")
    return flags[flags.index("--corpus"):flags.index("--one-shot")]


def test_tool_step_evaluate_and_show_on_qwen(tmp_path, qwen_dir):
    history = train.main(run_flags(tmp_path, qwen_dir, "mt", "--steps", "1"))
    assert [h["step"] for h in history] == [0, 1] and history[1]["gen_tokens"] > 0
    rows = [json.loads(line) for line in open(tmp_path / "mt" / "rollouts" / "step_1.jsonl")]
    assert all(len(r["tokens"]) == len(r["mask"]) for r in rows)
    assert os.path.exists(show.main([str(tmp_path / "mt"), "--step", "1"]))
    out = evaluate.main(["--model", str(tmp_path / "mt" / "checkpoint"), "--n", "2", "--json"])
    assert 0 <= out["tool_execution"] <= 1


@pytest.mark.parametrize("extra", [["--algo", "mr"], ["--algo", "or"], ["--env", "sokoban"],
                                   ["--env", "sokoban", "--algo", "grpo"], ["--env", "sokoban", "--policy", "per-role"]])
def test_every_algorithm_steps_on_qwen(tmp_path, qwen_base_dir, extra):
    sokoban = ["--batch-size", "2", "--max-completion-length", "4"] if "sokoban" in extra else []
    history = train.main(run_flags(tmp_path, qwen_base_dir, "run", "--steps", "1", "--eval-every", "0", *sokoban, *extra,
                                   search="sokoban" not in extra))  # search's data flags: another task refuses them
    assert history[-1]["step"] == 1 and history[-1]["gen_tokens"] > 0


TRAINS = ("--num-generations", "4", "--beta", "0.04")  # with qwen_answering_dir: a gradient at every step


def test_resume_on_qwen_equals_an_uninterrupted_run(tmp_path, qwen_answering_dir, monkeypatch):
    from safetensors.torch import load_file

    train.main(run_flags(tmp_path, qwen_answering_dir, "full", "--steps", "2", *TRAINS))
    with crash_at(monkeypatch, 2), pytest.raises(SystemExit, match="stopped \\(Ctrl-C\\)"):
        train.main(run_flags(tmp_path, qwen_answering_dir, "cut", "--steps", "2", *TRAINS))
    history = train.main(["--resume", str(tmp_path / "cut")])
    assert strip_times(tmp_path / "cut" / "log.jsonl") == strip_times(tmp_path / "full" / "log.jsonl")
    full, cut = (load_file(tmp_path / run / "checkpoint" / "model.safetensors") for run in ("full", "cut"))
    assert full.keys() == cut.keys() and all(torch.equal(full[k], cut[k]) for k in full)
    assert all(h["grad_norm"] > 0 for h in history[1:])  # it trained, so the equality says something
    initial = load_file(os.path.join(qwen_answering_dir, "model.safetensors"))
    assert any(not torch.equal(full[k], initial[k]) for k in full)
