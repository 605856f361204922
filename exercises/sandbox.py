"""How check.py runs a student's file in isolation: one worker process per exercise, with limits.

A student does not need to read this file: the cases and the project's solutions are in cases.py,
the table of results in check.py. The checker never runs a student's code in its own process. A helper
process imports torch once and forks a fresh worker for each exercise (forking takes
milliseconds; starting Python and importing torch takes 1-2 s). The worker imports the student's
file, runs the cases and writes what the functions returned, as plain JSON data, to a report
file. The checker waits for the worker at most TIME_LIMIT seconds, then kills it and whatever it
started (its process group), reads the report and compares the values with the expected ones
itself. So a student's file that calls os._exit, loops in C, leaves a thread or a fork running,
edits close() or raises an exception that cannot be printed fails its exercise, and the table
goes on. Each worker has a TMPDIR of its own, removed when it ends, and the helper's parent (a
warden that runs no student code) kills whatever is left below the helper when the helper ends,
however it ends. (The cases are public: a file can still hand back the expected values
themselves. The checker tests honest work, not honesty.) It protects the checker, not the
machine: the worker runs as the same user as the checker.

This file imports cases.py (what to check), never check.py; check.py starts it as the helper
(`python sandbox.py --helper`).
"""
import contextlib
import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path

from cases import CASES, EXERCISES, SOLUTIONS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

TIME_LIMIT = 10  # seconds per exercise; the project's own functions take well under one
START_LIMIT = 120  # seconds for the helper to start (importing torch on a busy machine)
OUTPUT_LIMIT = 64 * 2 ** 20  # bytes a worker may write to a file: a print loop cannot fill the disk
TMP_LIMIT = 16 * 2 ** 20  # bytes a worker may leave in its own temporary folder (removed after)
FULL = 2 ** 20  # bytes free below which the checker's folder counts as full
HELPER = "--helper"  # this file's mode as the helper process (see serve)


# ------------------------------------------------ comparing (in the checker, on plain data only)
def close(got, expected):
    """got matches expected: numbers within 1e-5 relative + 1e-6 absolute (NaN never matches),
    lists and tuples element by element with the same length, anything else with ==."""
    if isinstance(expected, (list, tuple)):
        return (isinstance(got, (list, tuple)) and len(got) == len(expected)
                and all(close(g, e) for g, e in zip(got, expected)))
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return False
        return abs(got - expected) <= 1e-6 + 1e-5 * abs(expected)
    return got == expected


def show(x, limit=100):
    """One short line for a value: floats to 6 significant digits."""
    if isinstance(x, float):
        text = f"{x:.6g}"
        text = text if any(c in text for c in ".en") else text + ".0"  # 4.0 stays a float
    elif isinstance(x, list):
        text = "[" + ", ".join(show(v, limit) for v in x) + "]"
    elif isinstance(x, tuple):
        text = "(" + ", ".join(show(v, limit) for v in x) + ("," if len(x) == 1 else "") + ")"
    else:
        text = repr(x)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class Shown:
    """A returned value that is not plain data (a dict, a FakeEnv...): only its repr crosses
    from the worker. It prints as that repr and equals no expected value."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def unplain(data, depth=0):
    """The value that plain() wrote as JSON: tuples come back, anything else as a Shown."""
    if depth > 30:
        return Shown("…")
    if isinstance(data, list):
        return [unplain(v, depth + 1) for v in data]
    if isinstance(data, dict):
        if isinstance(data.get("tuple"), list):
            return tuple(unplain(v, depth + 1) for v in data["tuple"])
        return Shown(str(data.get("repr", "?"))[:300])
    return data


def judge(n, cases, results):
    """(passed, failure) of exercise n from its results, one per case in order (see outcome).
    failure is "" when every case passes, else the first failing case as lines: its name, its
    input, what was expected and what came back. None when the results end before a failing
    case: the worker stopped, and the caller says why."""
    for i, (case, result) in enumerate(zip(cases, results)):
        name, _, inputs, expected = case[:4]
        if "missing" in result:  # NotImplementedError
            other = result["missing"]
            if (other != EXERCISES[n][1]
                    and other in [f for _, f, _ in EXERCISES.values()]):
                return False, f"needs {other} first: it is not implemented yet"  # ex2 calling ex1
            return False, "not implemented yet" if i == 0 else f"{name}: not implemented yet"
        if "raised" in result:
            return False, failure(name, inputs, expected, one_line(result["raised"]))
        got = unplain(result.get("got"))
        if not close(got, expected):
            return False, failure(name, inputs, expected, show(got), near_misses(case, got))
    return (True, "") if len(results) >= len(cases) else None


def near_misses(case, got):
    """The notes of a case's known wrong answers that got matches: a case may end with a list of
    (wrong value, what that value is) after its expected value."""
    return [note for value, note in (case[4] if len(case) > 4 else ()) if close(got, value)]


def failure(name, inputs, expected, got, notes=()):
    """The lines that report a failing case (lists of numbers went in as float64 tensors), and a
    note for each known wrong answer that came back."""
    given = ", ".join(f"{key}={show(value, 300)}" for key, value in inputs.items())
    return "\n".join([name, f"input:    {given}", f"expected: {show(expected)}",
                      f"got:      {got}"] + [f"note: {note}" for note in notes])


def one_line(text):
    return str(text).replace("\n", " ")[:160]


# ------------------------------------------------ running the cases (in the worker)
def outcomes(cases):
    """What the functions return on each case (see outcome), up to the first case that fails."""
    for name, run, inputs, expected, *_ in cases:
        result = outcome(run, inputs)
        yield result
        # stop at the first failure (it is what the student needs); the checker judges again
        if "got" not in result or not close(unplain(result["got"]), expected):
            return


def outcome(run, inputs):
    """What run(**inputs) gave, as JSON data: {"got": plain value}, {"raised": "raised Type:
    message"}, or {"missing": the ex*.py file that raised NotImplementedError, or None}."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = run(**inputs)
    except NotImplementedError as error:
        return {"missing": raised_in(error)}
    except Exception as error:  # a bug in the function under test: report, do not crash
        return {"raised": "raised " + describe(error)}
    try:
        data = plain(got)
        json.dumps(data)  # what JSON cannot hold (an int of 5000 digits) fails here
        return {"got": data}
    except Exception as error:
        return {"raised": f"a value that could not be read ({describe(error)})"}


def plain(x, depth=0):
    """x as JSON data: numbers, strings, booleans and None as they are, lists (1000 items at
    most), a tuple as {"tuple": [...]}, tensors and numpy values through tolist(), anything else
    as {"repr": its repr}. Only such data reaches the checker: no object of the student's."""
    if depth > 20:
        return {"repr": "…"}
    if x is None:
        return None
    for kind in (bool, int, float, str):
        if isinstance(x, kind):
            return kind(x)
    if isinstance(x, (list, tuple)):
        items = [plain(v, depth + 1) for v in list(x)[:1000]]
        items += [{"repr": f"… {len(x) - 1000} more"}] if len(x) > 1000 else []
        return {"tuple": items} if isinstance(x, tuple) else items
    if hasattr(x, "tolist"):
        return plain(x.tolist(), depth + 1)
    return {"repr": repr(x)[:300]}


def describe(error):
    """'Type: message' on one line, even for an exception whose str() fails."""
    try:
        text = str(error)
    except BaseException as inner:
        text = f"(its message could not be shown: str() raised {type(inner).__name__})"
    name = type(error).__name__
    return one_line(f"{name}: {text}" if text else name)


def raised_in(error):
    """The exercise file (ex*.py) of the innermost frame that raised `error`, or None."""
    try:
        files = [Path(frame.filename).name for frame in traceback.extract_tb(error.__traceback__)]
    except Exception:
        return None
    files = [f for f in files if f.startswith("ex") and f.endswith(".py")]
    return files[-1] if files else None


def student_functions(n, folder):
    """The functions exercise n asks for, imported from folder/exN_*.py."""
    _, filename, names = EXERCISES[n]
    # so that ex2 can `from ex1_group_norm import group_norm`, from this folder
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.path.insert(0, str(folder))
    for _, other, _ in EXERCISES.values():
        sys.modules.pop(Path(other).stem, None)
    name = f"student_{Path(filename).stem}"
    spec = importlib.util.spec_from_file_location(name, folder / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [name for name in names if not hasattr(module, name)]
    if missing:
        raise AttributeError(f"{filename} defines no {', '.join(missing)}")
    return [getattr(module, name) for name in names]


def project_functions(n):
    """The project's own functions for exercise n (--solutions)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return SOLUTIONS[n]()


def exercises_used_by(n):
    """The other exercises whose ex*.py file exercise n's file imported (just loaded)."""
    return [m for m, (_, filename, _) in EXERCISES.items()
            if m != n and Path(filename).stem in sys.modules]


class Report:
    """The worker's report: one JSON line per step, flushed at once (a killed worker's report
    keeps every line before the kill), each with the worker's pid: lines that a fork of the
    worker writes carry another pid, and the checker ignores them."""

    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")

    def write(self, **fields):
        self.file.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")
        self.file.flush()


def work(request):
    """The worker, just forked by the helper: check one exercise, write the report, and end with
    os._exit, so that a thread the student's code left running cannot keep it alive."""
    try:
        os.setpgid(0, 0)  # its own process group: the checker kills it and all it started at once
        null, out = os.open(os.devnull, os.O_RDONLY), os.open(request["output"], os.O_WRONLY)
        for fd, to in ((0, null), (1, out), (2, out)):  # prints go to a file, no pipe stays open
            os.dup2(to, fd)
        os.close(null)
        os.close(out)
        sys.stdout.reconfigure(line_buffering=True)  # a killed worker's prints are there too
        os.environ["TMPDIR"] = tempfile.tempdir = request["tmp"]  # its own, removed afterwards
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
        report = Report(request["report"])
        try:
            check_here(request["n"], request["solutions"], Path(request["folder"]), report)
        except SystemExit as stop:
            try:
                code = "" if stop.code is None else repr(stop.code)
            except BaseException:
                code = "…"
            report.write(stop=f"called sys.exit({code}); return a value instead")
        except BaseException as error:  # KeyboardInterrupt, GeneratorExit, the student's own
            report.write(stop="raised " + describe(error))
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def check_here(n, solutions, folder, report):
    """The worker's checks of exercise n: load the functions, then one report line per case."""
    try:
        functions = project_functions(n) if solutions else student_functions(n, folder)
    except Exception as error:
        where = "the project's code" if solutions else EXERCISES[n][1]
        report.write(stop=f"could not load {where}: {describe(error)}")
        return
    report.write(loaded=True, used=[] if solutions else exercises_used_by(n))
    for i, result in enumerate(outcomes(CASES[n](*functions))):
        report.write(case=i, **result)
    with contextlib.suppress(ChildProcessError):  # reap finished forks: only running ones count
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    threads = [t for t in threading.enumerate() if t.is_alive() and not t.daemon]
    report.write(done=True, threads=len(threads) - 1)  # less the main thread


# ------------------------------------------------ the helper process (sandbox.py --helper)
def serve(solutions):
    """The helper: import torch (and, for --solutions, the project's modules) once, then for each
    request from the checker fork a worker, send its pid, wait for it and send its exit code. It
    runs no student code itself, so every worker starts from the same clean state."""
    guard()
    import torch  # noqa: F401  (the 1-2 s import, paid once instead of once per exercise)
    if solutions:
        for n in SOLUTIONS:
            project_functions(n)
    requests = Lines(0)
    send("ready")
    while True:
        try:
            request = json.loads(requests.next(None))
        except EOFError:  # the checker is done
            return
        pid = os.fork()
        if pid == 0:
            work(request)  # never returns
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the worker does: the group exists before the pid is sent
        send(pid)
        code = wait_for(pid)
        send(f"{code} {end_orphans()}")


def become_subreaper():
    """Linux: make this helper the parent of every orphan among its descendants (prctl's
    PR_SET_CHILD_SUBREAPER), so that a process a worker started and detached (setsid, a double
    fork) comes back to it when its parent ends, and end_orphans can end it. Elsewhere nothing."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # 36: PR_SET_CHILD_SUBREAPER


def guard():
    """Fork: the child goes on as the helper and returns; this process stays behind as the
    warden, the helper's parent and (as a subreaper) the heir of whatever the helper leaves. When
    the helper ends, however it ends (a student's code may SIGKILL its parent), the warden kills
    every process left below it and exits. SIGTERM (the checker closing it) kills the helper
    first. The warden runs no student code and holds none of the checker's pipes."""
    become_subreaper()
    pid = os.fork()
    if pid == 0:
        become_subreaper()  # a fork does not inherit it: the helper is the heir of its workers
        return
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the helper alone holds the pipes: the checker reads EOF when it ends
        os.dup2(null, fd)
    def stop(*_):  # SIGTERM may come just as the helper ends: then there is nothing to kill
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.waitpid(pid, 0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # pid is reaped: it may be another's now
    end_orphans()
    os._exit(0)


def children():
    """The pids whose parent is this process, from /proc (Linux); none where it cannot be read."""
    me, found = os.getpid(), []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    stat = open(f"/proc/{entry}/stat").read()
                    if int(stat[stat.rindex(")") + 2:].split()[1]) == me:
                        found.append(int(entry))
    return found


def end_orphans():
    """Kill and reap every process left as this helper's child once the worker has ended (what a
    worker left running, in its group or not: they come here as orphans); returns how many."""
    ended = 0
    for _ in range(100):  # a killed one's own children come back as orphans in turn
        left = children()
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            ended += 1
    return ended


def wait_for(pid):
    """Worker pid's exit code (-N: killed by signal N). Should the checker go away meanwhile
    (its end of our stdin closes), kill the worker's group and end the helper."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if select.select([0], [], [], 0.02)[0] and not os.read(0, 4096):
            kill_group(pid)
            os._exit(0)


def send(value):
    os.write(1, f"{value}\n".encode())


class Lines:
    """Lines read from a pipe, each within a time limit: a silent peer cannot block the reader."""

    def __init__(self, fd):
        self.fd, self.buffer = fd, b""

    def next(self, timeout):
        """The next line; TimeoutError after `timeout` seconds (None: no limit), EOFError when
        the other end has closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


def kill_group(pid):
    """SIGKILL process group pid: a worker and every process it started (unless one left the
    group on purpose: untrusted code belongs in a sandbox)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def group_alive(pid):
    try:
        os.killpg(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


# ------------------------------------------------ the checker
class Helper:
    """The checker's end of the helper process (see serve)."""

    def __init__(self, solutions):
        command = [sys.executable, str(Path(__file__).resolve()), HELPER]
        # a session of its own: Ctrl-C in the terminal reaches the checker only, which cleans up
        self.process = subprocess.Popen(command + (["--solutions"] if solutions else []),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        start_new_session=True)
        self.lines = Lines(self.process.stdout.fileno())
        try:
            ready = self.lines.next(START_LIMIT) == "ready"
        except (EOFError, TimeoutError):
            ready = False
        except BaseException:  # Ctrl-C while it imports torch
            self.close()
            raise
        if not ready:
            self.close()
            raise RuntimeError("check.py's helper process did not start (see above)")

    def fork(self, request):
        """A new worker for request: its pid."""
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        pid = int(self.lines.next(30))
        if pid <= 1:  # never a worker; and killpg(1) would kill every process of the user
            raise ValueError(pid)
        return pid

    def exit_code(self, timeout):
        """(the worker's exit code, how many processes it left running that the helper ended)."""
        code, orphans = self.lines.next(timeout).split()
        return int(code), int(orphans)

    def close(self):
        """SIGTERM the warden, which kills the helper and everything left below it (see guard);
        SIGKILL it when it has not ended after 10 s."""
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


class Checker:
    """One run of check.py: the helper process, a folder for the workers' files, and the
    verdicts so far (a note on exercise 2 needs exercise 1's)."""

    def __init__(self, solutions=False, folder=HERE):
        self.solutions, self.folder = solutions, os.path.abspath(folder)
        self.files = None  # made by the first run (a full disk is reported there)
        self.helper, self.verdicts = None, {}

    def __enter__(self):
        return self

    def __exit__(self, *error):
        if self.helper:
            self.helper.close()
        if self.files:
            shutil.rmtree(self.files, ignore_errors=True)

    def check(self, n):
        """(passed, failure, printed) of exercise n. The failure of a file that imports another
        exercise's file gets a note when that file fails its own exercise."""
        passed, failure, used, printed = self.verdict(n)
        for m in used:
            if not passed and "not implemented" not in failure and not self.verdict(m)[0]:
                failure += (f"\nnote: this calls your {EXERCISES[m][1]}, "
                            f"which fails exercise {m}")
        return passed, failure, printed

    def verdict(self, n):
        if n not in self.verdicts:
            self.verdicts[n] = self.run(n)
        return self.verdicts[n]

    def run(self, n):
        """Exercise n in a fresh worker: (passed, failure, the other exercises its file imported,
        the last lines it printed)."""
        # new files with random names, read later through these handles: whatever the student's
        # code does to the paths (delete them, put a pipe there) cannot block or crash the checker
        try:
            self.files = self.files or tempfile.mkdtemp(prefix="check-")
            os.makedirs(self.files, exist_ok=True)  # made again if an earlier exercise deleted it
            (report_fd, report), (output_fd, output) = (tempfile.mkstemp(dir=self.files)
                                                        for _ in range(2))
            tmp = tempfile.mkdtemp(dir=self.files, prefix="tmp-")  # the worker's TMPDIR
        except OSError as error:
            where = self.files or tempfile.gettempdir()
            return False, (f"check.py could not make its files in {where}: {error.strerror} "
                           f"(free some space, or set TMPDIR to a folder on another disk)"), [], []
        with open(report_fd, "rb") as report_file, open(output_fd, "rb") as output_file:
            request = dict(n=n, solutions=self.solutions, folder=self.folder, report=report,
                           output=output, tmp=tmp)
            pid, how, orphans = self.run_worker(request)
            left = group_alive(pid) or orphans > 0  # a fork, a setsid'd child: a process left running
            kill_group(pid)
            kept = size_of(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
            if not os.path.isdir(self.files):
                return False, "deleted check.py's temporary folder", [], printed(output_file)
            passed, failure, used = self.judged(n, pid, how, left, report_file)
            if passed and kept > TMP_LIMIT:
                passed, failure = False, (f"left {kept / 2 ** 20:.0f} MiB in its temporary folder "
                                          f"(at most {TMP_LIMIT // 2 ** 20} MiB)")
            return passed, failure, used, printed(output_file)

    def judged(self, n, pid, how, left, report_file):
        """(passed, failure, used) of exercise n from worker pid's report and how it ended."""
        # names, inputs, expected values only
        cases = CASES[n](*[None] * len(EXERCISES[n][2]))
        try:
            steps = read_report(report_file, pid)
            passed, failure = judge(n, cases, steps["cases"]) or (False, "")
            if not failure:
                loading = "the project's code" if self.solutions else EXERCISES[n][1]
                failure = unfinished(n, cases, steps, how, left, loading)
            if failure and not steps["done"] and free_space(self.files) < FULL:
                failure = (f"its report could not be written: {self.files} is full (the disk of "
                           f"TMPDIR; free some space, or set TMPDIR to a folder on another disk)")
            used = [m for m in steps["used"]
                    if isinstance(m, int) and m in EXERCISES and m != n]
        except Exception:  # a report no honest worker writes
            passed, failure, used = False, "its report could not be read", []
        return passed and not failure, failure, used

    def run_worker(self, request):
        """Fork a worker for request and wait at most TIME_LIMIT s for it. Returns (pid, how,
        orphans): how is its exit code, "timeout" (it was killed), or "helper" (the helper went
        away); orphans, the processes it left running that the helper ended."""
        pid = self.start(request)
        try:
            return (pid, *self.helper.exit_code(TIME_LIMIT))
        except TimeoutError:
            kill_group(pid)
            try:
                self.helper.exit_code(5)  # the killed worker's: the helper can serve the next
            except (OSError, EOFError, ValueError):
                self.drop_helper()
            return pid, "timeout", 0
        except (OSError, EOFError, ValueError):  # the student's code killed the helper?
            kill_group(pid)
            self.drop_helper()
            return pid, "helper", 0
        except BaseException:  # Ctrl-C: the worker must not outlive the checker
            kill_group(pid)
            raise

    def start(self, request):
        if self.helper:
            try:
                return self.helper.fork(request)
            except (OSError, EOFError, ValueError):  # gone since the last worker
                self.drop_helper()
        self.helper = Helper(self.solutions)
        return self.helper.fork(request)

    def drop_helper(self):
        self.helper.close()
        self.helper = None


def read_report(file, pid):
    """What worker pid wrote: its case results in order, and loaded, used, stop, done, threads."""
    steps = {"cases": [], "loaded": False, "used": [], "stop": "", "done": False, "threads": 0}
    for line in file.read().splitlines():
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(fields, dict) or fields.get("pid") != pid:
            continue  # a line from a fork of the worker
        if "case" in fields:
            if fields["case"] == len(steps["cases"]):
                steps["cases"].append(fields)
        else:
            steps.update((key, fields[key]) for key in steps if key in fields)
    return steps


def unfinished(n, cases, steps, how, left, loading):
    """Why exercise n fails although no case failed, or "" when its worker finished cleanly.
    loading: the file (or code) the worker imports."""
    if not steps["loaded"]:
        where = f"\nwhile loading {loading}"
    elif len(steps["cases"]) < len(cases):
        where = f"\nin the case: {cases[len(steps['cases'])][0]}"
    else:
        where = ""
    if steps["stop"]:
        return one_line(steps["stop"])
    if how == "timeout":
        return f"did not finish within {TIME_LIMIT} s (an endless loop?){where}"
    if how == "helper":
        return "killed check.py's helper process (its parent)"
    if not steps["done"]:
        why = f"killed by {signal_name(-how)}" if how < 0 else f"exit code {how}: os._exit()?"
        return f"stopped before its checks were done ({why}){where}"
    if len(steps["cases"]) < len(cases):
        return "stopped before every case was checked (did it change check.py's functions?)"
    if steps["threads"]:
        return f"left {steps['threads']} thread(s) running: end every thread it starts"
    if left:
        return "left a process running (os.fork, os.setsid?): end every process it starts"
    return "" if how == 0 else f"ended with exit code {how}"


def size_of(folder):
    """Bytes in the files below folder (links not followed; what cannot be read counts 0)."""
    total = 0
    for parent, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(parent, name)).st_size
    return total


def free_space(folder):
    """Bytes free on folder's disk for this user (all of them when it cannot be read)."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return float("inf")


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def printed(file, lines=20):
    """The last lines the student's code printed (stdout and stderr), control characters shown
    as '?' so that they cannot redraw the table."""
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - 4000))
    text = file.read().decode(errors="replace").splitlines()
    shown = ["".join(c if c.isprintable() else "?" for c in line)[:200] for line in text[-lines:]]
    return (["…"] if size > 4000 or len(text) > lines else []) + shown


if __name__ == "__main__" and sys.argv[1:2] == [HELPER]:
    with contextlib.suppress(BrokenPipeError):  # the checker went away: nothing to say
        serve(solutions="--solutions" in sys.argv)
