"""Give the command-line tools bad input, as a careless user would, and check each answer: a
clear error (non-zero exit, no traceback) and no file written into the run folder.

    .venv/bin/python scripts/probe_errors.py          # prints a Markdown table, exits 1 on a failure
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 60  # seconds: a refusal takes a few


def probes(tmp):
    """(what, command) pairs; OUT is a fresh run folder that must stay empty."""
    bad_utf8 = os.path.join(tmp, "latin1.jsonl")
    open(bad_utf8, "wb").write('{"question": "Où?", "answers": ["Là"]}\n'.encode("latin-1"))
    one_q = os.path.join(tmp, "one.jsonl")
    open(one_q, "w").write('{"question": "Who?", "answers": ["A"]}\n')
    tiny_corpus = os.path.join(tmp, "corpus.jsonl")
    open(tiny_corpus, "w").write('{"title": "A", "text": "A is a letter."}\n')
    not_a_model = os.path.join(tmp, "empty_folder")
    os.makedirs(not_a_model)
    per_role = os.path.join(tmp, "per_role")
    for role in ("planner", "executor"):
        os.makedirs(os.path.join(per_role, role))
    a_file = os.path.join(tmp, "a_file")
    open(a_file, "w").close()
    train = [sys.executable, "train.py", "--out", "OUT"]
    flags = [("--batch-size", "0"), ("--num-generations", "1"), ("--num-iterations", "0"), ("--steps", "-1"),
             ("--save-every", "0"), ("--eval-n", "0"), ("--micro-batch-size", "0"),
             ("--max-completion-length", "0"), ("--temperature", "0"), ("--top-k", "0"), ("--top-p", "1.5"),
             ("--max-words", "0"), ("--learning-rate", "0")]
    out = [(f"train.py {f} {v}", train + [f, v]) for f, v in flags]
    out += [("train.py --model (a folder that is not a model)", train + ["--model", not_a_model]),
            ("train.py --model /not/a/model", train + ["--model", "/not/a/model"]),
            ("train.py --out (a file)", [sys.executable, "train.py", "--out", a_file]),
            ("train.py --batch-size larger than the training set",
             train + ["--train-questions", one_q, "--test-questions", one_q]),
            ("train.py --corpus too small for questions", train + ["--corpus", tiny_corpus]),
            ("train.py --train-questions not UTF-8", train + ["--train-questions", bad_utf8, "--test-questions", bad_utf8]),
            ("train.py --retriever-url (nothing listening)", train + ["--retriever-url", "http://127.0.0.1:9"]),
            ("train.py --env sokoban --size 2", train + ["--env", "sokoban", "--size", "2"]),
            ("train.py --env sokoban --size 4 --boxes 4", train + ["--env", "sokoban", "--size", "4", "--boxes", "4"]),
            ("train.py --resume (no run there)", [sys.executable, "train.py", "--resume", not_a_model]),
            ("tools/evaluate.py --model (a folder that is not a model)", [sys.executable, "tools/evaluate.py", "--model", not_a_model]),
            ("tools/evaluate.py --model (per-role checkpoint) on search", [sys.executable, "tools/evaluate.py", "--model", per_role]),
            ("tools/evaluate.py --n 0", [sys.executable, "tools/evaluate.py", "--n", "0"]),
            ("retrieval.py -k 0", [sys.executable, "retrieval.py", "-k", "0", "Paris"]),
            ("retrieval.py -k -1", [sys.executable, "retrieval.py", "-k", "-1", "Paris"]),
            ("retrieval.py --max-words 0", [sys.executable, "retrieval.py", "--max-words", "0", "Paris"]),
            ("sokoban.py --size 2", [sys.executable, "sokoban.py", "--size", "2"]),
            ("sokoban.py --boxes 0", [sys.executable, "sokoban.py", "--boxes", "0"]),
            ("sokoban.py --size 4 --boxes 3 --walls 2", [sys.executable, "sokoban.py", "--size", "4", "--boxes", "3", "--walls", "2"])]
    return out


def run(command, folder):
    command = [folder if c == "OUT" else c for c in command]
    try:
        p = subprocess.run(command, cwd=HERE, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:  # it started training instead of refusing
        return False, "-", f"still running after {TIMEOUT} s, stopped", os.path.exists(folder) and bool(os.listdir(folder))
    lines = [l for l in (p.stderr or p.stdout).splitlines() if l.strip() and "it/s]" not in l]
    last = lines[-1] if lines else ""
    written = os.path.exists(folder) and bool(os.listdir(folder))
    ok = p.returncode != 0 and "Traceback" not in p.stderr and not written
    return ok, p.returncode, last, written


def main():
    failures = 0
    print("| bad input | exit | written to the run folder | last line | handled |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (what, command) in enumerate(probes(tmp)):
            ok, code, last, written = run(command, os.path.join(tmp, f"out{i}"))
            failures += not ok
            last = last.replace("|", "\\|")[:150]
            print(f"| {what} | {code} | {'yes' if written else 'no'} | {last} | {'yes' if ok else '**no**'} |", flush=True)
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
