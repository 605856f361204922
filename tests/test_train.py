"""train.py: environment tokens, token masks and advantages on a scripted two-turn episode,
one step end to end on a tiny random model, resume equality, and a smoke step on the bundled
model."""
import contextlib
import dataclasses
import json
import math
import os
import random

import pytest
from conftest import full_args
import torch
from transformers import AutoModelForCausalLM

from machinery import checkpoint
import env_search
import env_sokoban
import estimators
import field
import mtgrpo
import policy
import retrieval
import rewards
from tools import show
import fast.decode
import fast.heap
import fast.update
import train
from sample import Sample

DOCS = [{"title": "Paris", "text": "Paris is the capital and largest city of France."},
        {"title": "Berlin", "text": "Berlin is the capital and largest city of Germany."}]
TURN1 = ' I search.</reasoning>\n<tool>{"name": "wiki_search", "args": {"query": "capital of France"}}</tool>'
TURN2 = " It is Paris.</reasoning>\n<answer>Paris</answer>"
WRONG = " Lyon.</reasoning>\n<answer>Lyon</answer>"
TURN1_DE = ' I search.</reasoning>\n<tool>{"name": "wiki_search", "args": {"query": "capital of Germany"}}</tool>'
TURN2_DE = " It is Berlin.</reasoning>\n<answer>Berlin</answer>"


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def args_for(**kw):
    """A search run's whole arguments (conftest.full_args): one-shot off, G = 2, micro-batch 4, fp32."""
    return full_args(**{"one_shot": False, "num_generations": 2, "micro_batch_size": 4, "bf16": False, **kw})


def scripted(monkeypatch, tok, turns):
    """Replace generate_turn: call i returns turns[i] (token ids per active episode)."""
    calls = [[ids(tok, t) + ([tok.eos_token_id] if t.endswith("</answer>") else []) for t in row]
             for row in turns]
    monkeypatch.setattr(fast.decode, "generate_turn", lambda model, tok, prefixes, *a, **k: calls.pop(0))


def test_env_suffix_closes_the_turn_and_opens_the_next(tokenizer):
    got = tokenizer.decode(policy.env_suffix_ids(tokenizer, "<result>\nX\n</result>", last_token=5))
    assert got == "<|im_end|>\n<|im_start|>user\n<result>\nX\n</result><|im_end|>\n<|im_start|>assistant\n"
    after_eos = policy.env_suffix_ids(tokenizer, "OBS", last_token=tokenizer.eos_token_id)
    assert tokenizer.decode(after_eos) == "\n<|im_start|>user\nOBS<|im_end|>\n<|im_start|>assistant\n"


def test_token_masks_of_a_two_turn_episode(monkeypatch, tokenizer):
    tok, retriever = tokenizer, retrieval.BM25Retriever(DOCS)
    env = env_search.SearchEnv("Capital of France?", ["Paris"], retriever)
    scripted(monkeypatch, tok, [[TURN1], [TURN2]])
    samples, n_gen = policy.play_episodes(None, tok, [env], args_for(), env_search.STOP_STRINGS)
    prompt = ids(tok, "<|im_start|>system\n" + env_search.SYSTEM_PROMPT + "<|im_end|>\n"
                 "<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n") + ids(tok, "<reasoning>")
    t1, t2 = ids(tok, TURN1), ids(tok, TURN2) + [tok.eos_token_id]
    env_part = ids(tok, "<|im_end|>\n<|im_start|>user\n<result>\nParis: Paris is the capital and "
                        "largest city of France.\n</result><|im_end|>\n<|im_start|>assistant\n") + ids(tok, "<reasoning>")
    s = samples[0]
    assert s.ids == prompt + t1 + env_part + t2  # generated ids kept exactly, env text tokenised once
    assert s.turn == [0] * len(prompt) + [1] * len(t1) + [0] * len(env_part) + [2] * len(t2)
    adv, mask = mtgrpo.token_advantages(s.turn, [0.5, -1.0])
    assert mask == [0] * len(prompt) + [1] * len(t1) + [0] * len(env_part) + [1] * len(t2)
    assert adv == [0.0] * len(prompt) + [0.5] * len(t1) + [0.0] * len(env_part) + [-1.0] * len(t2)
    assert n_gen == len(t1) + len(t2)
    assert env.completion[0]["content"] == "<reasoning>" + TURN1  # the env sees the prefill too
    assert rewards.tool_execution_reward(env.completion) == 0.2 and rewards.exact_match_reward(env.completion, ["Paris"]) == 1.0


def replay(question, answers, retriever, texts, max_turns=2):
    """A fresh episode played with the given turn texts (after the prefill)."""
    env = env_search.SearchEnv(question, answers, retriever, max_turns)
    for t in texts:
        env.step("<reasoning>" + t)
    return env


def test_turn_advantages_reach_the_right_tokens(monkeypatch, tokenizer):
    retriever = retrieval.BM25Retriever(DOCS)
    # group of G = 2: episode 0 searches then answers right; episode 1 answers wrong at once
    scripted(monkeypatch, tokenizer, [[TURN1, WRONG], [TURN2]])
    good, bad = train.tool_step({"policy": None}, tokenizer, [{"question": "q", "answers": ["Paris"]}],
                                  retriever, args_for())[0]
    # hand check of the rewards: R^T = [0.2 + 0.5, 0]; MT-GRPO A_1 = norm(R^T) + norm(R^O), A_2 = norm(R^O)
    env0, env1 = replay("q", ["Paris"], retriever, [TURN1, TURN2]), replay("q", ["Paris"], retriever, [WRONG])
    r_turn = [[rewards.turn_reward(e.completion, ["Paris"])] for e in (env0, env1)]
    assert r_turn == [[0.7], [0.0]]
    r_out = [rewards.outcome_reward(e.completion, ["Paris"]) for e in (env0, env1)]
    a = mtgrpo.turn_advantages(torch.tensor([r_turn]), torch.tensor([r_out]), "mt")[0]
    turn_of_good = [1] * len(ids(tokenizer, TURN1)) + [2] * (len(ids(tokenizer, TURN2)) + 1)
    trained = [adv for adv, m in zip(good.adv, good.mask) if m]
    assert trained == pytest.approx([a[0, k - 1].item() for k in turn_of_good])
    assert all(adv == 0 for adv, m in zip(good.adv, good.mask) if not m)
    assert a[0, 0] > a[0, 1] > 0  # the search turn gets extra credit for its turn reward
    assert all(adv == pytest.approx(a[1, 0].item()) for adv, m in zip(bad.adv, bad.mask) if m)


def test_three_turns_give_each_call_its_own_turn_reward_and_advantage(monkeypatch, tokenizer):
    """--max-calls 2 (K = 3): episode 0 searches Germany (R^T_1 = 0.2: Paris is not in the
    result), then France (R^T_2 = 0.7), then answers; episode 1 searches France (0.7) and answers
    (R^T_2 = 0). Each turn's tokens carry MT-GRPO's A_k of the (1, 2, 2) turn rewards."""
    retriever = retrieval.BM25Retriever(DOCS)
    scripted(monkeypatch, tokenizer, [[TURN1_DE, TURN1], [TURN1, TURN2], [TURN2]])
    samples, _, log = train.tool_step({"policy": None}, tokenizer, [{"question": "q", "answers": ["Paris"]}],
                                        retriever, args_for(max_calls=2))
    envs = [replay("q", ["Paris"], retriever, [TURN1_DE, TURN1, TURN2], max_turns=3),
            replay("q", ["Paris"], retriever, [TURN1, TURN2], max_turns=3)]
    r_turn = [rewards.turn_rewards(e.completion, ["Paris"], 3) for e in envs]
    assert r_turn == [[0.2, 0.7], [0.7, 0.0]] and samples[0].rewards[:2] == [0.2, 0.7]
    r_out = [rewards.outcome_reward(e.completion, ["Paris"]) for e in envs]
    want = mtgrpo.turn_advantages(torch.tensor([r_turn]), torch.tensor([r_out]), "mt")[0]
    for j, s in enumerate(samples):
        got = {k: a for a, k in zip(s.adv, s.turn) if k > 0}
        assert set(got) == ({1, 2, 3} if j == 0 else {1, 2})
        assert got == pytest.approx({k: want[j, k - 1].item() for k in got})
    assert log["calls"] == 1.5 and log["turn_reward"] == pytest.approx((0.9 + 0.7) / 2)


def test_gigpo_and_igpo_in_search_get_their_inputs_from_the_episodes(monkeypatch, tokenizer):
    """The three-turn script above. GiGPO: turn 1 of both begins at the question, turn 2 of episode 0
    after Germany's result and of episode 1 after France's (two states), turn 3 episode 0's alone.
    IGPO: with p(gold | context) = len(context) / 1000, R^T_k is the length of turn k and its result
    over 1000, the prompts without their prefill: field.inputs reads each turn's own prompt."""
    retriever = retrieval.BM25Retriever(DOCS)
    script = [[TURN1_DE, TURN1], [TURN1, TURN2], [TURN2]]
    scripted(monkeypatch, tokenizer, [list(r) for r in script])
    samples, _, _ = train.tool_step({"policy": None}, tokenizer, [{"question": "q", "answers": ["Paris"]}],
                                      retriever, args_for(max_calls=2, algo="gigpo_search"))
    R_T, R_O = [[[0.2, 0.7], [0.7, 0.0]]], [[rewards.outcome_reward(s, ["Paris"]) for s in (
        replay("q", ["Paris"], retriever, [TURN1_DE, TURN1, TURN2], max_turns=3).completion,
        replay("q", ["Paris"], retriever, [TURN1, TURN2], max_turns=3).completion)]]
    want = field.anchor_state_groups(R_T, R_O, [[3, 2]], states=[[[0, 1, 2], [0, 3, -1]]])[0]
    for j, s in enumerate(samples):
        got = {k: a for a, k in zip(s.adv, s.turn) if k > 0}
        assert got == pytest.approx({k: want[j, k - 1].item() for k in got})
    assert want[0, 1] != field.anchor_state_groups(R_T, R_O, [[3, 2]], states=[[[0, 1, 2], [0, 1, -1]]])[0, 0, 1]
    monkeypatch.setattr(field, "gold_probabilities", lambda m, t, contexts, gold, *a: [len(c) / 1000 for c in contexts])
    scripted(monkeypatch, tokenizer, [list(r) for r in script])
    samples, _, _ = train.tool_step({"policy": None}, tokenizer, [{"question": "q", "answers": ["Paris"]}],
                                      retriever, args_for(max_calls=2, algo="igpo"))
    gains = [[(s.starts[k] - s.starts[k - 1]) / 1000 for k in (1, 2)] if len(s.starts) == 3 else
             [(s.starts[1] - s.starts[0]) / 1000, 0.0] for s in samples]
    assert gains[1][0] > 0.01 and gains[0][1] > 0.01  # a turn and its result: tens of tokens
    want = mtgrpo.turn_advantages(torch.tensor([gains]), torch.tensor(R_O), "mt")[0]
    for j, s in enumerate(samples):
        got = {k: a for a, k in zip(s.adv, s.turn) if k > 0}
        assert got == pytest.approx({k: want[j, k - 1].item() for k in got})


def test_several_questions_are_normalised_in_their_own_groups(monkeypatch, tokenizer):
    """3 questions x G = 2 in one step: each question's two episodes form one group; mixing rows
    of different questions (wrong order or grouping) changes the advantages."""
    retriever = retrieval.BM25Retriever(DOCS)
    questions = [{"question": "France?", "answers": ["Paris"]}, {"question": "Germany?", "answers": ["Berlin"]},
                 {"question": "Also France?", "answers": ["Paris"]}]
    plays = [[TURN1, TURN2], [WRONG], [TURN1, TURN2], [TURN1_DE, TURN2_DE], [WRONG], [WRONG]]
    scripted(monkeypatch, tokenizer, [[p[0] for p in plays], [p[1] for p in plays if len(p) > 1]])
    samples = train.tool_step({"policy": None}, tokenizer, questions, retriever, args_for())[0]
    for q, question in enumerate(questions):
        envs = [replay(question["question"], question["answers"], retriever, plays[2 * q + j]) for j in (0, 1)]
        r_turn = [[rewards.turn_reward(e.completion, question["answers"])] for e in envs]
        r_out = [rewards.outcome_reward(e.completion, question["answers"]) for e in envs]
        want = mtgrpo.turn_advantages(torch.tensor([r_turn]), torch.tensor([r_out]), "mt")[0]
        for j in (0, 1):
            s = samples[2 * q + j]
            assert s.group_name == f"question {q + 1}: {question['question']}"
            got = {k: a for a, k in zip(s.adv, s.turn) if k > 0}
            assert got == pytest.approx({k: want[j, k - 1].item() for k in got})
    # hand check: question 2 both search (R^T 0.2 vs 0.7), only episode 2 is right; question 3 equal
    assert samples[3].adv[-1] > 0 > samples[2].adv[-1] and all(a == 0 for s in samples[4:] for a in s.adv)


def tiny_run(tmp_path, tiny_model_dir, name, *extra):
    out = str(tmp_path / name)
    flags = ["--model", tiny_model_dir, "--batch-size", "1", "--num-generations", "2",
             "--max-completion-length", "6", "--eval-n", "2", "--eval-every", "2",
             "--save-every", "2", "--micro-batch-size", "2", "--learning-rate", "1e-3",
             "--warmup-steps", "1", "--bf16", "false", "--out", out]
    return out, flags + list(extra)


def strip_times(path):
    lines = [json.loads(l) for l in open(path)]
    return [{k: v for k, v in l.items() if not k.startswith("t_") and k != "tokens_per_s"} for l in lines]


@pytest.mark.parametrize("algo", ["igpo", "gigpo_search"])
def test_the_rows_with_inputs_train_end_to_end(tmp_path, tiny_model_dir, algo):
    """--algo igpo calls the policy for the gold answer's probability (bf16 where the CPU has it),
    gigpo_search groups by the tool results: one step of each, three turns, on a tiny model."""
    out, flags = tiny_run(tmp_path, tiny_model_dir, algo, "--steps", "1", "--algo", algo, "--max-calls", "2",
                          "--eval-every", "0", "--bf16", "true")
    train.main(flags)
    log = [json.loads(l) for l in open(os.path.join(out, "log.jsonl"))]
    assert [l["step"] for l in log] == [1] and all(map(math.isfinite, (log[0]["loss"], log[0]["adv_std"])))  # no eval: no step 0


def test_one_step_end_to_end_on_a_tiny_model(tmp_path, tiny_model_dir, monkeypatch):
    out, flags = tiny_run(tmp_path, tiny_model_dir, "one", "--steps", "1")
    heaps = []  # the run tells glibc to reuse freed memory (fast/heap.py), for its device
    monkeypatch.setattr(fast.heap, "keep_freed_memory", lambda device: heaps.append(device))
    train.main(flags)
    assert heaps == ["cpu"]
    log = [json.loads(l) for l in open(os.path.join(out, "log.jsonl"))]
    assert [l["step"] for l in log] == [0, 1]
    for key in ("loss", "kl", "tool_execution", "exact_match", "answer_in_results", "answer_presence",
                "xml_format", "xml_tag_usage", "turn_reward", "outcome_reward", "adv_mean", "adv_std",
                "clip_fraction", "gen_tokens", "tokens_per_s", "t_generate", "t_reference", "t_update",
                "eval_exact_match", "eval_tool_execution"):
        assert key in log[1], key
    assert json.load(open(os.path.join(out, "args.json")))["num_generations"] == 2
    each = log[1]["eval_exact_match_each"]  # one 0/1 per test question, for tools/compare.py's intervals
    assert len(each) == 2 and set(each) <= {"0", "1"} and each.count("1") / 2 == log[1]["eval_exact_match"]
    model = AutoModelForCausalLM.from_pretrained(os.path.join(out, "checkpoint"))  # HF format
    assert sum(p.numel() for p in model.parameters()) > 0
    rows = [json.loads(l) for l in open(os.path.join(out, "rollouts", "step_1.jsonl"))]
    assert len(rows) == 2 and rows[0]["group"] == rows[1]["group"]
    for r in rows:  # batch 1 x G 2: one group; per token text, mask, advantage and turn
        assert len(r["tokens"]) == len(r["mask"]) == len(r["adv"]) == len(r["turn"])
        assert r["group"].startswith("question 1: ") and len(r["rewards"]) == 2
        assert all((t > 0) == bool(m) for t, m in zip(r["turn"], r["mask"]))  # turns 1..K; 0: not trained
    page = show.main([out, "--step", "1"])
    assert os.path.exists(page) and "turn 1" in open(page).read()


@contextlib.contextmanager
def crash_at(monkeypatch, at):
    """Within the context a run stops as at Ctrl-C when it saves the checkpoint of step `at`."""
    real_save = checkpoint.save_checkpoint

    def save(models, tok, opts, step, rng, out):
        if step == at:
            raise KeyboardInterrupt
        real_save(models, tok, opts, step, rng, out)
    monkeypatch.setattr(checkpoint, "save_checkpoint", save)
    yield
    monkeypatch.setattr(checkpoint, "save_checkpoint", real_save)


def test_a_second_ctrl_c_while_the_run_stops_is_the_same_one_line(tmp_path, tiny_model_dir, monkeypatch):
    """The first Ctrl-C stops the run; a second, while it checks its folder and writes its line,
    is ignored (it was a KeyboardInterrupt traceback, 1 of 3 tries during a checkpoint write)."""
    import signal
    out, flags = tiny_run(tmp_path, tiny_model_dir, "twice", "--steps", "1")

    def stopped(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(train, "train", stopped)
    monkeypatch.setattr(checkpoint, "still_ours", lambda out: os.kill(os.getpid(), signal.SIGINT))  # the second
    with pytest.raises(SystemExit, match="stopped \\(Ctrl-C\\). No checkpoint yet"):
        train.main(flags)
    from machinery.cli import one_line

    @one_line
    def tool():
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with pytest.raises(SystemExit, match="stopped \\(Ctrl-C\\)"):
        tool()
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # the tools' one line, too, is not cut by a second


def test_resume_after_a_crash_equals_an_uninterrupted_run(tmp_path, answering_model_dir, monkeypatch):
    trains = ("--steps", "4", "--num-generations", "4", "--beta", "0.04")  # a gradient at every step
    full, flags = tiny_run(tmp_path, answering_model_dir, "full", *trains)
    train.main(flags)
    crashed, flags = tiny_run(tmp_path, answering_model_dir, "crashed", *trains)
    with crash_at(monkeypatch, 4):  # step 4's log line is written, its checkpoint never is
        with pytest.raises(SystemExit, match=f"stopped \\(Ctrl-C\\). Continue .* --resume {crashed}"):
            train.main(flags)
    assert [l["step"] for l in strip_times(os.path.join(crashed, "log.jsonl"))] == [0, 1, 2, 3, 4]
    history = train.main(["--resume", crashed])
    assert [h["step"] for h in history] == [0, 1, 2, 3, 4]  # the summary covers the whole run
    assert strip_times(os.path.join(crashed, "log.jsonl")) == strip_times(os.path.join(full, "log.jsonl"))
    a = AutoModelForCausalLM.from_pretrained(os.path.join(full, "checkpoint")).state_dict()
    b = AutoModelForCausalLM.from_pretrained(os.path.join(crashed, "checkpoint")).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # ... which says something only because the run trained: a gradient at every step, weights moved
    assert all(h["grad_norm"] > 0 for h in history[1:])
    initial = AutoModelForCausalLM.from_pretrained(answering_model_dir).state_dict()
    assert any(not torch.equal(a[k], initial[k]) for k in a)


def test_the_kill_resume_script_refuses_a_run_that_did_not_train():
    from scripts.kill_resume import check_it_trained
    w = {"w": torch.zeros(2)}
    check_it_trained([{"step": 0}, {"step": 1, "grad_norm": 0.5}], {"w": torch.ones(2)}, w)
    for lines, final in (([{"step": 1, "grad_norm": 0.0}], {"w": torch.ones(2)}),  # a step without gradient
                         ([{"step": 1, "grad_norm": 0.5}], {"w": torch.zeros(2)}),  # weights unchanged
                         ([{"step": 0}], {"w": torch.ones(2)})):  # no step at all
        with pytest.raises(SystemExit, match="did not train"):
            check_it_trained(lines, final, w)


def test_clear_errors_for_bad_flags(tmp_path, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--algo", "trpo"])
    assert f"--algo must be one of {', '.join(estimators.names('tool'))} with --env search" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.parse_args(["--policy", "per-role"])
    assert "per-role with --env sokoban" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.parse_args(["--resume", str(tmp_path)])
    assert "no args.json" in capsys.readouterr().err
    for argv, says in ((["--env", "planpath", "--max-calls", "2"], "(--env planpath does not read it); drop it, the games take --max-turns"),
                       (["--max-calls", "0"], "--max-calls is 0; it must be at least 1")):
        with pytest.raises(SystemExit):
            train.parse_args(argv)
        assert says in capsys.readouterr().err
    assert train.parse_args(["--env", "planpath", "--max-calls", "1"]).max_calls == 1  # the default, as a saved run passes it


def test_malformed_question_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "qs.jsonl"
    bad.write_text('{"question": "Who?", "answers": ["A"]}\n{"question": "What?"}\n')
    with pytest.raises(SystemExit, match=r"qs.jsonl, line 2: missing key 'answers'"):
        train.main(["--train-questions", str(bad), "--test-questions", str(bad), "--out", str(tmp_path / "o")])


@pytest.mark.bundled
def test_smoke_step_on_the_bundled_model(tmp_path):
    out = str(tmp_path / "smoke")
    history = train.main(["--steps", "1", "--batch-size", "1", "--num-generations", "2",
                          "--max-completion-length", "16", "--eval-every", "0", "--out", out])
    assert history[-1]["step"] == 1 and history[-1]["gen_tokens"] > 0
    assert os.path.exists(os.path.join(out, "checkpoint", "model.safetensors"))


def sokoban_flags(tmp_path, tiny_model_dir, name, *extra):
    return ["--env", "sokoban", "--model", tiny_model_dir, "--steps", "1", "--batch-size", "2",
            "--num-generations", "2", "--max-completion-length", "4", "--eval-n", "2",
            "--eval-every", "1", "--learning-rate", "1e-3", "--warmup-steps", "1", "--bf16", "false",
            "--out", str(tmp_path / name), *extra]


def spy_updates(monkeypatch):
    calls, real = [], fast.update.policy_update

    def spy(model, optimizer, samples, args):
        calls.append((id(model), {s.role for s in samples}))
        return real(model, optimizer, samples, args)
    monkeypatch.setattr(fast.update, "policy_update", spy)
    return calls


def scripted_moves(models, tok, args, stop_strings, greedy=False):
    """A sampler whose answers are random moves (as real token ids), so rewards differ."""
    rng = random.Random(0)

    def sample(role, message_lists):
        texts = [f"<answer>{rng.choice(['U', 'D', 'L', 'R', 'U U', 'L D'])}</answer>" for _ in message_lists]
        return [(policy.prompt_ids(tok, m), ids(tok, t), t) for m, t in zip(message_lists, texts)]
    return sample


def test_per_role_policies_train_only_on_their_role(tmp_path, tiny_model_dir, monkeypatch):
    calls = spy_updates(monkeypatch)
    monkeypatch.setattr(train, "chat_sampler", scripted_moves)
    history = train.main(sokoban_flags(tmp_path, tiny_model_dir, "per-role", "--policy", "per-role"))
    assert [roles for _, roles in calls] == [{"planner"}, {"executor"}]
    assert calls[0][0] != calls[1][0]  # two different models
    assert {"loss_planner", "loss_executor", "success", "eval_success"} <= set(history[-1])
    ckpt = tmp_path / "per-role" / "checkpoint"
    planner = AutoModelForCausalLM.from_pretrained(ckpt / "planner").state_dict()
    executor = AutoModelForCausalLM.from_pretrained(ckpt / "executor").state_dict()
    assert any(not torch.equal(planner[k], executor[k]) for k in planner)  # updated apart


def test_shared_policy_trains_on_every_role(tmp_path, tiny_model_dir, monkeypatch):
    calls = spy_updates(monkeypatch)
    train.main(sokoban_flags(tmp_path, tiny_model_dir, "shared"))
    assert [roles for _, roles in calls] == [{"planner", "executor"}]
    assert (tmp_path / "shared" / "checkpoint" / "model.safetensors").exists()


@pytest.mark.parametrize("extra", [["--algo", "grpo"], ["--single-agent", "true"]])
def test_sokoban_baselines_run(tmp_path, tiny_model_dir, monkeypatch, extra):
    calls = spy_updates(monkeypatch)
    history = train.main(sokoban_flags(tmp_path, tiny_model_dir, "baseline", *extra))
    assert history[-1]["step"] == 1 and 0 <= history[-1]["eval_success"] <= 1
    if "--single-agent" in extra:
        assert calls[0][1] == {"executor"}


def test_reference_model_and_two_updates_per_batch(tmp_path, tiny_model_dir, monkeypatch):
    """beta > 0 loads a frozen reference; mu = 2 stores the old log-probs first, so the second
    update sees a policy that has moved away from the reference (KL > 0)."""
    monkeypatch.setattr(train, "chat_sampler", scripted_moves)  # rewards that differ
    line = train.main(sokoban_flags(tmp_path, tiny_model_dir, "ref", "--beta", "0.1",
                                    "--num-iterations", "2", "--eval-every", "0"))[-1]
    assert line["kl"] > 0 and line["t_reference"] > 0


def test_mu_2_steps_from_the_stored_old_policy(tmp_path, tiny_model_dir, monkeypatch):
    """mu = 2: the old log-probs are stored before the first update, so in the second update the
    ratio pi / pi_old has moved from 1 and a tight clip acts. Ignoring the stored log-probs would
    keep the ratio at exactly 1 and the clip fraction at 0."""
    monkeypatch.setattr(train, "chat_sampler", scripted_moves)  # rewards that differ
    line = train.main(sokoban_flags(tmp_path, tiny_model_dir, "mu2", "--num-iterations", "2", "--eval-every", "0",
                                    "--learning-rate", "1e-2", "--epsilon", "1e-3", "--epsilon-high", "1e-3"))[-1]
    assert line["clip_fraction"] > 0.05


def test_the_reference_is_the_initial_model_not_the_policy(tmp_path, tiny_model_dir, monkeypatch):
    """beta > 0, mu = 1: at step 1 policy and reference agree (KL 0); at step 2 the policy has moved
    and the frozen reference has not (KL > 0). A reference that is the policy itself gives KL 0."""
    monkeypatch.setattr(train, "chat_sampler", scripted_moves)
    history = train.main(sokoban_flags(tmp_path, tiny_model_dir, "ref2", "--steps", "2", "--beta", "0.1",
                                       "--eval-every", "0", "--learning-rate", "1e-2"))
    assert history[0]["kl"] == pytest.approx(0, abs=1e-7) and history[1]["kl"] > 1e-5


def test_loading_that_draws_random_numbers_does_not_change_the_run(tmp_path, tiny_model_dir, monkeypatch):
    """The first run on a machine converts the bundled model, which draws from the torch RNG;
    the seed is set after loading, so that run samples exactly as every later one."""
    plain, flags = tiny_run(tmp_path, tiny_model_dir, "plain", "--steps", "1")
    train.main(flags)
    real = train.load_model
    monkeypatch.setattr(train, "load_model", lambda *a: (torch.rand(1000), real(*a))[1])
    drawn, flags = tiny_run(tmp_path, tiny_model_dir, "drawn", "--steps", "1")
    train.main(flags)
    assert strip_times(os.path.join(plain, "log.jsonl")) == strip_times(os.path.join(drawn, "log.jsonl"))
    sampled = [open(os.path.join(run, "rollouts", "step_1.jsonl")).read() for run in (plain, drawn)]
    assert sampled[0] == sampled[1]  # the same tokens were sampled


def test_the_readme_gpu_command_parses_with_the_reference_settings():
    """The GPU command of the README takes the MT-GRPO authors' lr, warm-up, mu, clip and
    temperature (docs/reference-code.md); its flags must all exist and pass their checks."""
    readme = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")).read()
    command = readme[readme.index("python train.py --algo mt --model Qwen/Qwen2.5-0.5B"):].split("```")[0]
    argv = command.replace("\\\n", " ").split()[2:]
    args = train.parse_args(argv)
    assert (args.learning_rate, args.warmup_steps, args.num_iterations, args.max_grad_norm, args.temperature) == \
        (1e-6, 20, 2, 0.1, 0.9)


def test_sokoban_defaults_are_the_documented_setup(tmp_path, capsys):
    documented = {"steps": 60, "batch_size": 8, "num_generations": 4, "max_completion_length": 8,  # docs/sokoban.md
                  "scale_rewards": "batch", "micro_batch_size": 16, "eval_every": 10, "save_every": 10}
    args = train.parse_args(["--env", "sokoban", "--algo", "at"])
    assert {k: getattr(args, k) for k in documented} == documented == env_sokoban.TASK.defaults
    assert (args.size, args.min_solution, args.max_solution, args.max_turns, args.moves_per_turn,
            args.team_reward) == (7, 3, 4, 4, 1, "solver")
    assert train.parse_args(["--env", "sokoban", "--batch-size", "3"]).batch_size == 3  # given wins
    assert args.learning_rate == 1e-5  # 5e-5 made the sampling deterministic within 5 steps (results-sokoban.md)
    search = train.parse_args([])
    assert (search.num_generations, search.learning_rate, search.micro_batch_size) == (8, 1e-5, 0)  # untouched (0: auto, chosen once the model is loaded)
    run = tmp_path / "run"
    run.mkdir()
    (run / "args.json").write_text(json.dumps({**dataclasses.asdict(args), "learning_rate": 3e-5}))
    assert train.parse_args(["--resume", str(run)]).learning_rate == 3e-5  # a run's own settings win
    with pytest.raises(SystemExit):
        train.parse_args(["--help"])
    assert "(default: 8; sokoban: 4; sudoku: 4; planpath: 4; math: 4; code: 4)" in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")
    with pytest.raises(SystemExit):
        train.parse_args(["--env", "sokoban", "--min-solution", "5", "--max-solution", "4"])


def test_a_run_says_its_precision_first_and_shows_each_phase(tmp_path, tiny_model_dir, capsys, monkeypatch):
    from conftest import force_cpu_bf16
    force_cpu_bf16(monkeypatch, False)
    out, flags = tiny_run(tmp_path, tiny_model_dir, "bars", "--steps", "1", "--bf16", "true", "--eval-every", "1")
    train.main(flags)
    printed = capsys.readouterr()
    assert printed.out.startswith("compute: fp32 on cpu: this CPU (no AVX512-BF16 or AMX) has no native bf16")
    for shown in ("MT-GRPO step 0: evaluate", "evaluate step 0", "2/2", "MT-GRPO step 1: rollout",
                  "MT-GRPO step 1: update", "MT-GRPO step 1: evaluate", "evaluate step 1", "save checkpoint"):
        assert shown in printed.err, shown


def test_evaluation_in_chunks_equals_one_batch(monkeypatch, tokenizer):
    retriever = retrieval.BM25Retriever(DOCS)
    questions = [{"question": "Capital of France?", "answers": ["Paris"]},
                 {"question": "Capital of Germany?", "answers": ["Berlin"]},
                 {"question": "Capital of France, again?", "answers": ["Paris"]}]
    runs = []
    for chunk, turns in ((3, [[TURN1, TURN1_DE, TURN1], [TURN2, TURN2_DE, WRONG]]),
                         (2, [[TURN1, TURN1_DE], [TURN2, TURN2_DE], [TURN1], [WRONG]])):
        scripted(monkeypatch, tokenizer, turns)
        runs.append(train.evaluate_policy({"policy": None}, tokenizer, questions, retriever, args_for(), chunk=chunk))
    assert runs[0] == runs[1] and runs[0]["exact_match_each"] == "110"


@pytest.mark.parametrize("native, emulated, want", [(True, True, True), (False, True, False), (False, False, False)])
def test_a_gpu_without_native_bf16_computes_in_fp32(monkeypatch, native, emulated, want):
    """torch.cuda.is_bf16_supported() says True on a T4 (bf16 emulated, slower than fp32)."""
    from machinery import precision
    monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                        lambda including_emulation=True: native or (including_emulation and emulated))
    assert precision.bf16_ok("cuda") == want
    line = precision.precision_line("cuda", True)
    assert line.startswith("compute: bf16 autocast") if want else "T4" in line and "fp32" in line
    assert precision.precision_line("cuda", False) == "compute: fp32 on cuda (--bf16 false)"


X86 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f {extra}\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx2 avx512f {extra}\n"


@pytest.mark.parametrize("cpuinfo, level, want", [
    (X86.format(extra="avx512_bf16"), "AVX512", True),  # the bf16 kind
    (X86.format(extra="amx_bf16 amx_tile"), "AVX512", True),  # AMX
    (X86.format(extra="avx512_bf16"), "AVX2", False),  # the same CPU under ATEN_CPU_CAPABILITY=avx2
    (X86.format(extra="avx512vl"), "AVX512", False),  # AVX-512 without its bf16 instructions
    ("processor\t: 0\nflags\t\t: fpu sse2 avx2\n", "AVX2", False),  # a laptop
    ("processor\t: 0\nFeatures\t: fp asimd bf16 sve\n", "DEFAULT", True),  # an Arm core with bf16
    (None, "AVX512", False)])  # no /proc/cpuinfo (macOS, Windows)
def test_native_bf16_on_a_cpu_from_public_facts(tmp_path, monkeypatch, cpuinfo, level, want):
    """machinery/precision.native_bf16_cpu: the CPU flags Linux lists and torch's kernel level, no
    private op (the plain path asks it too)."""
    from machinery import precision
    path = tmp_path / "cpuinfo"
    if cpuinfo is not None:
        path.write_text(cpuinfo)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: level)
    precision.native_bf16_cpu.cache_clear()
    try:
        assert precision.native_bf16_cpu(str(path)) is want
    finally:
        precision.native_bf16_cpu.cache_clear()


def test_a_prompt_longer_than_the_context_is_refused_before_any_work(tmp_path, tiny_model_dir, capsys):
    """A 1 MB question ran 150 s+; now the run stops at start-up. Test questions that are training questions are said."""
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps({"question": "why " * 3000 + "?", "answers": ["A"]}) + "\n"
                  + json.dumps({"question": "Q?", "answers": ["A"]}) + "\n")
    out = tmp_path / "o"
    with pytest.raises(SystemExit, match=r"a prompt of \d+ tokens plus 128 new ones does not fit the model's "
                                         r"context of 2048 tokens .*lower --max-completion-length"):
        train.main(["--model", tiny_model_dir, "--train-questions", str(qs), "--test-questions", str(qs),
                    "--out", str(out)])
    assert not out.exists()
    assert "note: 2 of the 2 test questions are also training questions" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--algo", "grpo"], ["--single-agent", "true"], ["--policy", "per-role"]])
def test_planpath_trains_in_the_paper_s_four_setups(tmp_path, tiny_model_dir, monkeypatch, extra):
    """--env planpath runs through the same atgrpo.py and update as Sokoban, and its evaluation
    logs the per-level successes tools/compare.py pairs runs by."""
    calls = spy_updates(monkeypatch)
    monkeypatch.setattr(train, "chat_sampler", scripted_moves)
    flags = sokoban_flags(tmp_path, tiny_model_dir, "planpath", *extra)
    history = train.main(["--env" if f == "--env" else "planpath" if f == "sokoban" else f for f in flags])
    last = history[-1]
    assert {"success", "distance", "groups", "zero_adv_groups", "eval_best_constant_success",
            "eval_board_ablation_success"} <= set(last)
    assert len(last["eval_success_each"]) == 2 and set(last["eval_success_each"]) <= {"0", "1"}
    roles = set().union(*(r for _, r in calls))
    assert roles == ({"executor"} if "--single-agent" in extra else {"planner", "executor"})
    assert len({model for model, _ in calls}) == (2 if "per-role" in extra else 1)
    args = json.loads((tmp_path / "planpath" / "args.json").read_text())
    assert (args["env"], args["positions"], args["scale_rewards"]) == ("planpath", True, "group")


def test_the_signal_meter_counts_groups_without_gradient():
    """Three groups: equal rewards (advantage 0 everywhere), one sample (0 by group_norm), and
    two samples that differ; only the last carries a gradient. A nonzero advantage on a masked
    (prompt) token does not count."""
    equal = mtgrpo.group_norm(torch.tensor([[0.5, 0.5, 0.5]]))[0].tolist()
    single = mtgrpo.group_norm(torch.tensor([[0.9]]))[0].tolist()
    differ = mtgrpo.group_norm(torch.tensor([[1.0, 0.0]]))[0].tolist()
    make = lambda group, a, prompt_adv=0.0, turn=(0, 1, 1): Sample(  # noqa: E731
        ids=[1, 2, 3], mask=[0, 1, 1], adv=[prompt_adv, a, a], turn=list(turn), group_name=group)
    samples = [make("equal", a, prompt_adv=7.0) for a in equal] + [make("single", a) for a in single] + \
        [make("differ", a) for a in differ]
    # 3 groups, 2 silent, 1 of one sample; every sample trains 2 tokens of turn 1
    assert train.signal(samples) == {"groups": 3, "zero_adv_groups": pytest.approx(2 / 3),
                                     "singleton_groups": pytest.approx(1 / 3), "tokens_per_turn": 2.0}
    # two turns of one token each: 1 token a turn
    assert train.signal([make("differ", a, turn=(0, 1, 2)) for a in differ]) == {
        "groups": 1, "zero_adv_groups": 0.0, "singleton_groups": 0.0, "tokens_per_turn": 1.0}


def test_plain_runs_the_same_step_the_plain_way(tiny_model_dir, monkeypatch, generate_sampler):
    """--plain: transformers' generate, every row through the model from its first token, and
    per-row reference and old log-probs. One seeded AT-GRPO step (K = 3, two turns, mu = 2, a
    reference) gives the same samples as the default path and the same gradients up to fp32
    summation order. With generate's sampler in the decode loop the two draw the same tokens for
    one seed while no row stops early (tests/test_policy.py), so no stop string ends a turn here."""
    import dataclasses

    import moves
    import tasks
    from config import parse_args
    # the tiny random model writes no readable moves: read one from the text, so rewards differ
    monkeypatch.setattr(moves, "parse_moves", lambda text: ["UDLR"[sum(map(ord, text)) % 4]])
    monkeypatch.setitem(tasks.TASKS, "planpath", dataclasses.replace(tasks.TASKS["planpath"], stop_strings=[]))
    args = parse_args(["--env", "planpath", "--model", tiny_model_dir, "--bf16", "false", "--batch-size", "1",
                       "--num-generations", "3", "--max-completion-length", "4", "--max-turns", "2",
                       "--micro-batch-size", "2", "--num-iterations", "2", "--beta", "0.04"])
    runs = {}
    for plain in (False, True):
        args.plain = plain
        models, tok = train.load_models(("policy",), tiny_model_dir, "cpu")
        ref = policy.load_model(tiny_model_dir, "cpu")[0].requires_grad_(False)
        torch.manual_seed(0)
        samples, _, _ = train.game_step(models, tok, [1], args)
        grads = []

        class Record(torch.optim.SGD):
            def step(self):
                grads.append(torch.cat([p.grad.flatten() for p in models["policy"].parameters()]))
        calls = []
        module = train if plain else fast.update
        monkeypatch.setattr(module, "policy_update", lambda *a, f=module.policy_update: calls.append(1) or f(*a))
        train.update(models, ref, {"policy": Record(models["policy"].parameters(), lr=0.0)}, samples, args)
        runs[plain] = samples, grads
        assert len(calls) == 2  # mu = 2 updates, each on its own path
    (quick, quick_grads), (plain, plain_grads) = runs[False], runs[True]
    assert [(s.ids, s.mask, s.adv) for s in plain] == [(s.ids, s.mask, s.adv) for s in quick]
    assert any(a for s in quick for a in s.adv)  # a step that trains something
    for got, want in zip(plain_grads, quick_grads):
        assert want.norm() > 0 and (got - want).norm() <= 1e-5 * want.norm()
    for got, want in zip(plain, quick):  # reference and old log-probs on the trained tokens (token t at t - 1)
        for name in ("ref_logp", "old_logp"):
            trained = lambda s: [v for v, m in zip(getattr(s, name), s.mask[1:]) if m]  # noqa: E731
            assert trained(got) == pytest.approx(trained(want), abs=1e-5) and len(trained(got)) == sum(got.mask)


def test_an_unmarked_test_runs_on_the_cpu():
    """tests/conftest.py: a test not marked cuda sees no GPU, also on a machine that has one, and
    the programs it starts see none either; so --device auto picks the CPU."""
    assert not torch.cuda.is_available() and os.environ["CUDA_VISIBLE_DEVICES"] == ""
    assert train.pick_device("auto") == "cpu"


def test_the_start_names_only_the_flags_that_differ_from_the_defaults():
    """The README's short run printed a 60-line dump of every flag before its progress bar; now one
    line of the flags given (args.json keeps every flag). The defaults of --env planpath are its own."""
    import config
    assert config.changed_flags(config.parse_args(["--steps", "3", "--eval-every", "3", "--eval-n", "8", "--out", "runs/quick"])) \
        == "--steps 3 --eval-every 3 --eval-n 8 --out runs/quick"
    assert config.changed_flags(config.parse_args([])) == "none"
    assert config.changed_flags(config.parse_args(["--env", "planpath"])) == "--env planpath"
    assert config.changed_flags(config.parse_args(["--env", "planpath", "--team-alpha", "0.5"])) == "--env planpath --team-alpha 0.5"


def test_wilson_intervals_by_hand():
    """p = 1/8: centre (0.125 + 1.96^2/16) / (1 + 1.96^2/8) = 0.24666, half-width
    1.96 sqrt(0.125 * 0.875 / 8 + 1.96^2 / 256) / 1.48020 = 0.22424."""
    from machinery.cli import wilson
    assert wilson(0.125, 8) == pytest.approx((0.02242, 0.47089), abs=1e-5)
    assert wilson(0.0, 8) == pytest.approx((0.0, 0.32442), abs=1e-5)  # no answer right still allows 32 %
    assert wilson(1.0, 8) == pytest.approx((0.67558, 1.0), abs=1e-5)
    assert wilson(0.5, 0) == (0.0, 1.0)


def test_the_end_table_gives_each_rate_its_interval_over_the_test_items(capsys):
    args = full_args()
    history = [{"step": 0, "t_eval": 1.0, "eval_reward": 0.5, "eval_exact_match_rate": 0.0, "eval_exact_match_each": "0" * 8},
               {"step": 3, "t_eval": 1.0, "eval_reward": 1.0, "eval_exact_match_rate": 0.125, "eval_exact_match_each": "1" + "0" * 7}]
    train.print_table(history, args)
    out = capsys.readouterr().out
    assert "greedy eval (8 items, 95 % CI)" in out  # n from the per-question record, not --eval-n
    assert [line for line in out.splitlines() if line.startswith("exact match rate")] == \
        [f"{'exact match rate':<34}{'0.000 (0.00-0.32)':<22}{'0.125 (0.02-0.47)':<22}"]
    assert [line for line in out.splitlines() if line.startswith("total reward")] == \
        [f"{'total reward (max 2.6)':<34}{'0.500':<22}{'1.000':<22}"]  # a reward, not a rate: no interval
