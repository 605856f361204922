"""Run a function of an untrusted file in a forked worker process, with limits: the exercises'
checker (check.py) runs each student's exercise this way. This file knows no exercise.

A student does not need to read it. A helper process imports what is slow to import once (torch)
and forks a fresh worker for each run (forking takes milliseconds; starting Python and importing
torch takes 1-2 s). The worker loads a file, calls one of its functions with plain JSON arguments
and a Report, and the function writes what it found, as plain JSON lines, to the report file. The
caller waits for the worker at most TIME_LIMIT seconds, then kills it and whatever it started (its
process group), and reads the report's lines and how the worker ended. So code that calls
os._exit, loops in C, leaves a thread or a fork running, or raises an exception that cannot be
printed cannot stop or hang the caller. Each worker has a TMPDIR of its own, measured and removed
when it ends, and the helper's parent (a warden that runs no untrusted code) kills whatever is
left below the helper when the helper ends, however it ends. It protects the caller, not the
machine: the worker runs as the same user as the caller.

    with Sandbox("check.py", warm=(path, "function", {...})) as sandbox:
        run = sandbox.run((path, "function"), {...})   # function(report, **arguments) in a worker
        run.lines, run.cut_short(), run.left_behind(), run.printed

This file imports no other file of the project; check.py imports it and starts it as the helper
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
from dataclasses import dataclass, field
from pathlib import Path

TIME_LIMIT = 10  # seconds per run (an exercise: the project's own functions take well under one)
START_LIMIT = 120  # seconds for the helper to start (importing torch on a busy machine)
OUTPUT_LIMIT = 64 * 2 ** 20  # bytes a worker may write to a file: a print loop cannot fill the disk
TMP_LIMIT = 16 * 2 ** 20  # bytes a worker may leave in its own temporary folder (removed after)
FULL = 2 ** 20  # bytes free below which the caller's folder counts as full
HELPER = "--helper"  # this file's mode as the helper process (see serve)
RESERVED = ("pid", "stop", "done", "threads")  # the report's fields that the sandbox writes


# ------------------------------------------------ in the worker
class Report:
    """The worker's report: one JSON line per write, flushed at once (a killed worker's report
    keeps every line before the kill), each with the worker's pid: lines that a fork of the
    worker writes carry another pid, and the caller ignores them."""

    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")

    def write(self, **fields):
        self.file.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")
        self.file.flush()


def load(path, name):
    """Function `name` of the file at path (its folder goes first on sys.path, for its imports);
    a file is loaded once per process, so a worker finds what the helper loaded to warm up."""
    module = sys.modules.get(f"sandboxed_{Path(path).stem}")
    if module is None or getattr(module, "__file__", None) != str(path):
        if str(Path(path).parent) not in sys.path:
            sys.path.insert(0, str(Path(path).parent))
        spec = importlib.util.spec_from_file_location(f"sandboxed_{Path(path).stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return getattr(module, name)


def work(request):
    """The worker, just forked by the helper: call the request's function, then report whether
    it returned and what it left running, and end with os._exit, so that a thread the code left
    running cannot keep it alive."""
    try:
        os.setpgid(0, 0)  # its own process group: the caller kills it and all it started at once
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
            load(*request["target"])(report, **request["arguments"])
        except SystemExit as stop:
            try:
                code = "" if stop.code is None else repr(stop.code)
            except BaseException:
                code = "…"
            report.write(stop=f"called sys.exit({code}); return a value instead")
        except BaseException as error:  # KeyboardInterrupt, GeneratorExit, the code's own
            report.write(stop="raised " + describe(error))
        else:
            with contextlib.suppress(ChildProcessError):  # reap finished forks: only running ones count
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            threads = [t for t in threading.enumerate() if t.is_alive() and not t.daemon]
            report.write(done=True, threads=len(threads) - 1)  # less the main thread
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def describe(error):
    """'Type: message' on one line, even for an exception whose str() fails."""
    try:
        text = str(error)
    except BaseException as inner:
        text = f"(its message could not be shown: str() raised {type(inner).__name__})"
    name = type(error).__name__
    return one_line(f"{name}: {text}" if text else name)


def one_line(text):
    return str(text).replace("\n", " ")[:160]


# ------------------------------------------------ the helper process (sandbox.py --helper)
def serve(warm):
    """The helper: import torch and call the warm-up function (if any) once, then for each
    request from the caller fork a worker, send its pid, wait for it and send its exit code. It
    runs no untrusted code itself, so every worker starts from the same clean state."""
    guard()
    try:
        import torch  # noqa: F401  (the 1-2 s import, paid once instead of once per run)
    except ImportError:  # code that needs no torch still runs
        pass
    if warm:
        path, name, arguments = warm
        load(path, name)(**arguments)
    requests = Lines(0)
    send("ready")
    while True:
        try:
            request = json.loads(requests.next(None))
        except EOFError:  # the caller is done
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
    the helper ends, however it ends (the code run may SIGKILL its parent), the warden kills
    every process left below it and exits. SIGTERM (the caller closing it) kills the helper
    first. The warden runs no untrusted code and holds none of the caller's pipes."""
    become_subreaper()
    pid = os.fork()
    if pid == 0:
        become_subreaper()  # a fork does not inherit it: the helper is the heir of its workers
        return
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the helper alone holds the pipes: the caller reads EOF when it ends
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
    """Worker pid's exit code (-N: killed by signal N). Should the caller go away meanwhile
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



class Helper:
    """The caller's end of the helper process (see serve), started from `script` (this file, or
    a copy of it: the folder of the script is the first on the helper's sys.path, and its
    working directory)."""

    def __init__(self, user, warm, script=None):
        self.user = user
        script = Path(script or __file__).resolve()
        command = [sys.executable, str(script), HELPER, json.dumps(warm)]
        # a session of its own: Ctrl-C in the terminal reaches the caller only, which cleans up
        self.process = subprocess.Popen(command, cwd=script.parent,
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
            raise RuntimeError(f"{self.user}'s helper process did not start (see above)")

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


# ------------------------------------------------ the caller
@dataclass
class Run:
    """How one worker ended: its report's lines (the function's own fields, in order, from the
    worker itself), stop (why the function did not return, "" when it did), done and threads (it
    returned, with so many threads still running), how (its exit code, "timeout" when it was
    killed at the time limit, "helper" when the helper went away), left (a process it started was
    still running), kept (bytes it left in its TMPDIR), printed (its last lines of output), full
    (its report may be cut short: the disk is full) and problem (the run could not be made)."""
    user: str
    lines: list = field(default_factory=list)
    stop: str = ""
    done: bool = False
    threads: int = 0
    how: object = 0
    left: bool = False
    kept: int = 0
    printed: list = field(default_factory=list)
    full: str = ""
    problem: str = ""

    def cut_short(self, where=""):
        """Why the function did not return, "" when it did; `where` (a line that says what it was
        doing) goes after a time-out or a kill."""
        if self.stop:
            return one_line(self.stop)
        if self.how == "timeout":
            return f"did not finish within {TIME_LIMIT} s (an endless loop?){where}"
        if self.how == "helper":
            return f"killed {self.user}'s helper process (its parent)"
        if not self.done:
            why = (f"killed by {signal_name(-self.how)}" if self.how < 0
                   else f"exit code {self.how}: os._exit()?")
            return f"stopped before its checks were done ({why}){where}"
        return ""

    def left_behind(self):
        """What the worker left once its function returned: threads, processes, an exit code
        other than 0, more than TMP_LIMIT bytes in its TMPDIR; "" when nothing."""
        if self.threads:
            return f"left {self.threads} thread(s) running: end every thread it starts"
        if self.left:
            return "left a process running (os.fork, os.setsid?): end every process it starts"
        if self.how != 0:
            return f"ended with exit code {self.how}"
        if self.kept > TMP_LIMIT:
            return (f"left {self.kept / 2 ** 20:.0f} MiB in its temporary folder "
                    f"(at most {TMP_LIMIT // 2 ** 20} MiB)")
        return ""


class Sandbox:
    """The caller's side: a helper process (started by the first run, again after one killed
    it) and a folder for the workers' files, both gone when the `with` block ends. user names the
    caller in the messages ("check.py"); warm: (file, function, arguments) the helper calls once;
    script: the copy of this file the helper runs (this file by default)."""

    def __init__(self, user, warm=None, script=None):
        self.user, self.warm, self.script = user, warm, script
        self.files = None  # made by the first run (a full disk is reported there)
        self.helper = None

    def __enter__(self):
        return self

    def __exit__(self, *error):
        if self.helper:
            self.helper.close()
        if self.files:
            shutil.rmtree(self.files, ignore_errors=True)

    def run(self, target, arguments):
        """function(report, **arguments) in a fresh worker, target = (file, function): a Run."""
        # new files with random names, read later through these handles: whatever the worker's
        # code does to the paths (delete them, put a pipe there) cannot block or crash the caller
        try:
            self.files = self.files or tempfile.mkdtemp(prefix="check-")
            os.makedirs(self.files, exist_ok=True)  # made again if an earlier run deleted it
            (report_fd, report), (output_fd, output) = (tempfile.mkstemp(dir=self.files)
                                                        for _ in range(2))
            tmp = tempfile.mkdtemp(dir=self.files, prefix="tmp-")  # the worker's TMPDIR
        except OSError as error:
            where = self.files or tempfile.gettempdir()
            return Run(self.user, problem=(
                f"{self.user} could not make its files in {where}: {error.strerror} "
                f"(free some space, or set TMPDIR to a folder on another disk)"))
        with open(report_fd, "rb") as report_file, open(output_fd, "rb") as output_file:
            request = dict(target=[str(target[0]), target[1]], arguments=arguments,
                           report=report, output=output, tmp=tmp)
            pid, how, orphans = self.run_worker(request)
            left = group_alive(pid) or orphans > 0  # a fork, a setsid'd child: a process left running
            kill_group(pid)
            kept = size_of(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
            run = Run(self.user, how=how, left=left, kept=kept, printed=printed(output_file))
            if not os.path.isdir(self.files):
                run.problem = f"deleted {self.user}'s temporary folder"
                return run
            try:
                read_report(report_file, pid, run)
            except Exception:  # a report no honest worker writes
                run.problem = "its report could not be read"
            if not run.done and free_space(self.files) < FULL:
                run.full = (f"its report could not be written: {self.files} is full (the disk of "
                            f"TMPDIR; free some space, or set TMPDIR to a folder on another disk)")
            return run

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
        except (OSError, EOFError, ValueError):  # the code killed the helper?
            kill_group(pid)
            self.drop_helper()
            return pid, "helper", 0
        except BaseException:  # Ctrl-C: the worker must not outlive the caller
            kill_group(pid)
            raise

    def start(self, request):
        if self.helper:
            try:
                return self.helper.fork(request)
            except (OSError, EOFError, ValueError):  # gone since the last worker
                self.drop_helper()
        self.helper = Helper(self.user, self.warm, self.script)
        return self.helper.fork(request)

    def drop_helper(self):
        self.helper.close()
        self.helper = None


def read_report(file, pid, run):
    """Fill run from worker pid's report: its own lines in order, and stop, done, threads."""
    for line in file.read().splitlines():
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(fields, dict) or fields.get("pid") != pid:
            continue  # a line from a fork of the worker
        if any(key in fields for key in RESERVED[1:]):
            run.stop = str(fields.get("stop", run.stop))
            run.done = fields.get("done") is True or run.done
            threads = fields.get("threads", run.threads)
            run.threads = threads if isinstance(threads, int) else 1
        else:
            run.lines.append({key: value for key, value in fields.items() if key != "pid"})


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
    """The last lines the worker's code printed (stdout and stderr), control characters shown
    as '?' so that they cannot redraw the table."""
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - 4000))
    text = file.read().decode(errors="replace").splitlines()
    shown = ["".join(c if c.isprintable() else "?" for c in line)[:200] for line in text[-lines:]]
    return (["…"] if size > 4000 or len(text) > lines else []) + shown


if __name__ == "__main__" and sys.argv[1:2] == [HELPER]:
    with contextlib.suppress(BrokenPipeError):  # the caller went away: nothing to say
        serve(warm=json.loads(sys.argv[2]))
