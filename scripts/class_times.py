"""The class kit's times, measured one command after the other on this machine (docs/times.md).

    python3 scripts/class_times.py --out docs/runs/class-times/NAME.json [--clone DIR] [--only STEP ...]

Every step runs alone, in a fresh clone of this repository's committed HEAD (so install.sh starts
from an empty .venv; pip's and npm's caches are the machine's), under /usr/bin/time -v: its wall
time, its peak memory and the 1-minute load when it started go to the JSON, with the machine (CPU
model, whether it has AVX512-BF16, cores) and the code's commit. Nothing else should run meanwhile:
the load column shows whether something did. The exercises' checks run on a handout folder into
which the right answers of tests/test_exercises.py are written, and the gradebook on a class of ten
copies of them; the two flag runs of the homework (docs/class.md) run beside the README's short
run. Needs Debian's chromium (cheat sheet, slides) and npm (slides).
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = ".venv/bin/python"
SHORT = f"{PY} train.py --steps 3 --eval-every 3 --eval-n 8"  # the README's short run, without --out
STEPS = [  # (name, command), run in the clone, in this order
    ("install", "bash install.sh"),
    ("short run", f"{SHORT} --out runs/quick"),
    ("homework: --loss-type seq", f"{SHORT} --loss-type seq --out runs/seq"),
    ("homework: --scale-rewards none", f"{SHORT} --scale-rewards none --out runs/none"),
    ("notebook extras", f"{PY} -m pip install -q -r requirements-notebook.txt -c requirements.txt"),
    ("notebook", ".venv/bin/jupyter execute notebooks/lesson.ipynb"),
    ("slides, first build (npm)", "bash scripts/slides.sh slides"),
    ("slides, rebuild", "bash scripts/slides.sh slides"),
    ("cheat sheet (PDF)", f"{PY} scripts/cheatsheet.py cheatsheet.pdf"),
    ("handout", f"{PY} exercises/check.py --handout handout"),
    *[(f"check.py {n}", f"cd handout && ../{PY} check.py {n}") for n in range(1, 8)],
    ("check.py (all seven)", f"cd handout && ../{PY} check.py"),
    ("check.py quiz", f"cd handout && ../{PY} check.py quiz"),
    ("gradebook, 10 students", f"{PY} exercises/gradebook.py class --out grades.csv"),
]
ANSWERS = f"""{PY} - <<'EOF'
import sys
sys.path.insert(0, "tests")
from pathlib import Path
from test_exercises import RIGHT, write_answers
sys.path.insert(0, "exercises")
import key
write_answers(Path("handout"), RIGHT)
Path("handout/quiz_answers.txt").write_text("".join(f"{{k}}: {{v:.3f}}\\n" for k, v in key.quiz_answers().items()))
for i in range(10):
    (Path("class") / f"student{{i}}").mkdir(parents=True)
    write_answers(Path("class") / f"student{{i}}", RIGHT)
EOF"""  # before the first check: the right answers into the handout and a class of ten


def machine():
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.*)", info)
    flags = set(re.search(r"flags\s*:\s*(.*)", info).group(1).split()) if "flags" in info else set()
    return {"cpu": model.group(1) if model else platform.processor(), "cores": os.cpu_count(),
            "avx512_bf16": "avx512_bf16" in flags, "amx_bf16": "amx_bf16" in flags,
            "avx512f": "avx512f" in flags, "python": platform.python_version()}


def timed(command, cwd):
    """(wall seconds, peak RSS in MB, load at the start, exit code, last lines of output)."""
    load = os.getloadavg()[0]
    with tempfile.NamedTemporaryFile(mode="r", suffix=".time") as record:
        p = subprocess.run(["/usr/bin/time", "-v", "-o", record.name, "bash", "-c", command], cwd=cwd,
                           capture_output=True, text=True)
        text = record.read()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text)
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    seconds = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall.group(1).split(":")))) if wall else None
    tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
    return seconds, int(peak.group(1)) / 1024 if peak else None, load, p.returncode, tail


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON to write (docs/runs/class-times/NAME.json)")
    parser.add_argument("--clone", help="the folder to clone into (default: a new temporary one)")
    parser.add_argument("--only", nargs="*", help="the steps to run (by name; install always runs)")
    args = parser.parse_args()
    out = Path(args.out).absolute()
    if not out.parent.is_dir():
        sys.exit(f"class_times.py: no folder {out.parent}: make it first")
    for tool in ("/usr/bin/time", "git"):
        if not Path(tool).exists() and subprocess.run(["which", tool], capture_output=True).returncode:
            sys.exit(f"class_times.py: needs {tool} (Debian: apt-get install -y time git)")
    clone = Path(args.clone or tempfile.mkdtemp(prefix="class-times-")) / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                            text=True).stdout.strip()
    result = {"machine": machine(), "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M"),
              "steps": []}
    answers_written = False
    for name, command in STEPS:
        if args.only and name != "install" and name not in args.only:
            continue
        if command.startswith("cd handout") and not answers_written:
            subprocess.run(["bash", "-c", ANSWERS], cwd=clone, check=True)
            answers_written = True
        seconds, peak, load, code, tail = timed(command, clone)
        result["steps"].append({"step": name, "command": command, "seconds": seconds, "peak_mb": peak,
                                "load_at_start": round(load, 2), "exit_code": code, "last_lines": tail})
        print(f"{name:<32} {seconds:8.1f} s  peak {peak or 0:7.0f} MB  load {load:4.2f}  exit {code}",
              flush=True)
        out.write_text(json.dumps(result, indent=1) + "\n")  # after every step: a cut-short run keeps its steps
    for run in ("quick", "seq", "none"):  # the homework's logs and rollouts md5, beside the times
        folder = clone / "runs" / run
        if (folder / "log.jsonl").exists():
            (out.parent / f"{out.stem}-{run}.log.jsonl").write_text((folder / "log.jsonl").read_text())
            md5 = subprocess.run("md5sum step_*.jsonl", shell=True, cwd=folder / "rollouts",
                                 capture_output=True, text=True).stdout
            (out.parent / f"{out.stem}-{run}.rollouts.md5").write_text(md5)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
