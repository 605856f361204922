"""Run a function of an untrusted file, or untrusted Python text, in a forked worker process with
limits: the exercises' checker (exercises/check.py) runs each student's exercise this way, and the
coding team (env_code.py) each piece of model-written code. This file knows neither.

A helper process imports what is slow to import once (torch, for the exercises) and forks a fresh
worker for each run (forking takes about a millisecond; starting Python and importing torch takes
1-2 s). The worker loads a file, calls one of its functions with plain JSON arguments and a Report,
and the function writes what it found, as plain JSON lines, to the report file. The caller waits
for the worker at most the run's time limit, then kills it and whatever it started (its process
group), and reads the report's lines and how the worker ended. So code that calls os._exit, loops
in C, leaves a thread or a fork running, or raises an exception that cannot be printed cannot stop
or hang the caller. Each worker has a TMPDIR of its own, measured and removed when it ends, and the
helper's parent (a warden that runs no untrusted code) kills whatever is left below the helper when
the helper ends, however it ends.

The caller chooses further limits (Limits), for code nobody has read:
    time        seconds of wall time, then the worker and its process group are killed
    memory      bytes the code may add to the worker's address space (RLIMIT_AS): a huge allocation
                raises MemoryError instead of taking the machine's memory
    processes   False: no new process or thread (RLIMIT_NPROC 0, which root ignores; and the audit
                hook below refuses fork, exec, spawn, subprocess, system and kill)
    output      bytes any file the worker writes may reach (RLIMIT_FSIZE; a write past it fails):
                a print loop cannot fill the disk
    own_folder  its temporary folder is its working directory and the only place it may write
    hidden      folders it may not read (the project's own files: a solution, a key)
    network     False: no network. The helper moves into a network namespace of its own when the
                machine allows it (unshare; root can, and a user where user namespaces are on), so
                its workers see no network device at all; and the audit hook refuses sockets.
The folder, hidden and network limits, and processes for root, are kept by an audit hook (PEP 578,
sys.addaudithook) that the worker installs before the code runs: it refuses opens, writes, sockets,
process calls and ctypes that break them, and the run is marked as refused (Run.refused). A hook is
not a security boundary (Python's documentation says so): code that knows the interpreter well can
get around it. The OS limits hold regardless: time, memory, file size, the process group, the
warden, the network namespace, and RLIMIT_NPROC for a user other than root.

What it does not protect: the worker runs as the same user as the caller, so what that user may do
(read their files outside the hidden folders, use the CPU for the time limit, fill the disk one
capped file at a time within the time limit) the code may do too. For code from strangers, run the
whole program in a container or as a user with no rights.

    with Sandbox("check.py", warm=(path, "function", {...})) as sandbox:
        run = sandbox.run((path, "function"), {...})   # function(report, **arguments) in a worker
        run.lines, run.cut_short(), run.left_behind(), run.printed
    with Sandbox("env_code.py", limits=Limits(time=2, memory=2 ** 28, processes=False, ...),
                 preload=()) as sandbox:
        results, run = sandbox.call(source, "add_k", [[1], [2]])   # add_k(1), add_k(2) in a worker

This file imports no other file of the project; the caller starts it as the helper
(`python sandbox.py --helper`).
"""
import contextlib
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

TIME_LIMIT = 10  # seconds per run unless its Limits say (an exercise: the project's own functions take well under one)
START_LIMIT = 120  # seconds for the helper to start (importing torch on a busy machine)
OUTPUT_LIMIT = 64 * 2 ** 20  # bytes a worker may write to a file unless its Limits say
TMP_LIMIT = 16 * 2 ** 20  # bytes a worker may leave in its own temporary folder (removed after)
FULL = 2 ** 20  # bytes free below which the caller's folder counts as full
VALUE_LIMIT = 10_000  # characters of JSON one value that `call` returns may take
HELPER = "--helper"  # this file's mode as the helper process (see serve)
RESERVED = ("pid", "stop", "done", "threads", "refused")  # the report's fields that the sandbox writes
CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000  # unshare(2)'s flags (Linux)


@dataclass(frozen=True)
class Limits:
    """What a worker may do (the module docstring); the defaults are the exercises': TIME_LIMIT and
    OUTPUT_LIMIT (read at each run), nothing else limited."""
    time: float = None  # seconds of wall time (None: TIME_LIMIT)
    memory: int = None  # bytes the code may add to the worker's address space (None: no limit)
    processes: bool = True  # False: no new process or thread
    output: int = None  # bytes a file it writes may reach (None: OUTPUT_LIMIT)
    own_folder: bool = False  # work in its temporary folder, write nowhere else
    hidden: tuple = ()  # folders it may not read
    network: bool = True  # False: no network


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
    a file is loaded once per process, so a worker finds what the helper loaded to warm up. This
    file's own functions (call_each) come from the running module itself."""
    if Path(path).resolve() == Path(__file__).resolve():
        return globals()[name]
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
    """The worker, just forked by the helper: load the request's function, confine itself to the
    request's limits, call the function, then report whether it returned and what it left running,
    and end with os._exit, so that a thread the code left running cannot keep it alive."""
    try:
        os.setpgid(0, 0)  # its own process group: the caller kills it and all it started at once
        null, out = os.open(os.devnull, os.O_RDONLY), os.open(request["output"], os.O_WRONLY)
        for fd, to in ((0, null), (1, out), (2, out)):  # prints go to a file, no pipe stays open
            os.dup2(to, fd)
        os.close(null)
        os.close(out)
        sys.stdout.reconfigure(line_buffering=True)  # a killed worker's prints are there too
        os.environ["TMPDIR"] = tempfile.tempdir = request["tmp"]  # its own, removed afterwards
        report = Report(request["report"])
        try:
            function = load(*request["target"])
            confine(Limits(**request["limits"]), request["tmp"], report)
            function(report, **request["arguments"])
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


def confine(limits, folder, report):
    """Put the worker under `limits` (Limits) before the code runs: the OS limits first, then the
    audit hook for what the OS cannot refuse to the same user."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file
    output = limits.output or OUTPUT_LIMIT
    resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails (EFBIG): no kill, no core
    if limits.memory:
        mapped = mapped_bytes()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + limits.memory, mapped + limits.memory))
    if not limits.processes:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # binds every user but root
    hidden = tuple(os.path.realpath(h) for h in limits.hidden)
    if limits.own_folder:
        os.chdir(folder)
    if hidden:  # nothing is imported from a hidden folder (the audit hook would refuse it anyway)
        sys.path[:] = [p for p in sys.path if not inside(os.path.realpath(p or "."), hidden)]
    if limits.own_folder or hidden or not limits.network or not limits.processes:
        sys.addaudithook(audit_hook(os.path.realpath(folder) if limits.own_folder else None, hidden,
                                    limits.processes, limits.network, report))


def mapped_bytes():
    """The bytes this process maps now (VmSize, Linux); 0 where it cannot be read."""
    with contextlib.suppress(OSError, ValueError):
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def inside(path, folders):
    """Is the resolved path one of folders, or below one?"""
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


PROCESS_EVENTS = ("os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
                  "subprocess.Popen", "os.kill", "os.killpg", "signal.pthread_kill", "pty.spawn")
WRITE_EVENTS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
                "os.symlink", "os.truncate", "os.utime", "os.mkfifo", "os.mknod", "os.chflags",
                "os.lchflags", "os.setxattr", "os.removexattr")
ALWAYS_REFUSED = ("sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents")
REFUSED_IMPORTS = ("_posixsubprocess", "ctypes", "_ctypes")  # fork and exec, or any C call, without an event


def audit_hook(folder, hidden, processes, network, report):
    """The worker's audit hook: it refuses (PermissionError, and one `refused` line in the report,
    the first only) what breaks the limits. folder: the only place it may write (None: anywhere);
    hidden: folders it may not read. Every path is resolved (links followed) before it is judged.
    Returned from this function, so that no frame of the worker holds it where the code can see."""
    me, said = os.getpid(), []

    def refuse(what):
        if not said:
            said.append(what)
            report.write(refused=what)
        raise PermissionError(f"refused by the sandbox: {what}")

    def judge(path, write, event):
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # a file descriptor: already open, judged when it was opened
        real = os.path.realpath(os.fsdecode(path))
        if folder is not None and inside(real, (folder,)):
            return  # its own folder, wherever it is
        if inside(real, hidden):
            refuse(f"{event} {real}: the project's files are hidden from it")
        parts = real.split("/")
        if len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and int(parts[2]) != me:
            refuse(f"{event} {real}: another process")
        if folder is not None and real != os.devnull and (write or os.path.isdir(real) and event == "open"):
            refuse(f"{event} {real}: outside its own folder")

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and bool(
                flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)))
            judge(path, write, "open")
        elif event in WRITE_EVENTS:
            for path in args[:2] if event in ("os.rename", "os.link") else args[1:2] if event == "os.symlink" else args[:1]:
                judge(path, True, event)
        elif event in ("os.listdir", "os.scandir") and hidden:
            judge(args[0] if args and args[0] is not None else ".", False, event)
        elif event.startswith("ctypes.") or event in ALWAYS_REFUSED:
            refuse(f"{event}: not allowed in the sandbox")
        elif event == "import" and args[0] in REFUSED_IMPORTS:
            refuse(f"import {args[0]}: not allowed in the sandbox")
        elif not processes and event in PROCESS_EVENTS:
            refuse(f"{event}: it may not start or signal processes")
        elif not network and event.startswith("socket."):
            refuse(f"{event}: it has no network")
        elif event == "object.__setattr__" and args[1] in ("__code__", "__closure__", "__defaults__", "__kwdefaults__"):
            refuse(f"setting {args[1]}: not allowed in the sandbox")
    return hook


def call_each(report, source, name, calls):
    """Run Python `source` (text nobody has read) and call its function `name` on each argument
    list of `calls`: one report line per call, {"i": i, "value": v} or {"i": i, "error": "raised
    Type: message"}; one {"error": ...} alone when the text does not run or defines no `name`.
    Values travel as JSON (numbers, strings, lists, dicts, True, None): nothing the code defines
    runs in the caller, and a value that is not plain data is an error."""
    namespace = {"__name__": "solution"}
    try:
        exec(compile(source, "<code>", "exec"), namespace)
        function = namespace.get(name)
    except Exception as error:
        report.write(error="raised " + describe(error))
        return
    if not callable(function):
        report.write(error=f"defines no function {name}")
        return
    for i, arguments in enumerate(calls):
        try:
            value = function(*arguments)
        except Exception as error:
            report.write(i=i, error="raised " + describe(error))
            continue
        try:
            line = json.dumps(value)
        except (TypeError, ValueError, RecursionError):
            report.write(i=i, error="returned a value that is not plain data (a number, a string, a list ...)")
            continue
        if len(line) > VALUE_LIMIT:
            report.write(i=i, error=f"returned a value of more than {VALUE_LIMIT} characters")
            continue
        report.write(i=i, value=json.loads(line))


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
def serve(warm, preload=("torch",), isolate=False):
    """The helper: move into a network namespace of its own (isolate), import the preload modules
    (torch for the exercises) and call the warm-up function (if any) once, then for each request
    from the caller fork a worker, send its pid, wait for it and send its exit code. It runs no
    untrusted code itself, so every worker starts from the same clean state."""
    guard()
    isolation = isolate_network() if isolate else ""
    for name in preload:
        try:  # the 1-2 s import of torch, paid once instead of once per run
            importlib.import_module(name)
        except ImportError:  # code that needs no torch still runs
            pass
    if warm:
        path, name, arguments = warm
        load(path, name)(**arguments)
    requests = Lines(0)
    send(f"ready {isolation}")
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


def isolate_network():
    """Move this process (the helper, before it forks a worker) into a network namespace of its
    own, which holds only a loopback device that is down: its workers inherit it and reach no
    network. Linux's unshare(2): root may, another user by making a user namespace too, where the
    machine allows it. Returns how ("network namespace", "user and network namespaces"), "" when
    neither could be made (the audit hook alone then refuses sockets)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        for flags, how in ((CLONE_NEWNET, "network namespace"),
                           (CLONE_NEWUSER | CLONE_NEWNET, "user and network namespaces")):
            if libc.unshare(flags) == 0:
                return how
    return ""


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
    """The pids whose parent is this process, from /proc (Linux): each thread's list of children
    where the kernel keeps one, else a look at every process; none where /proc cannot be read."""
    me, found = os.getpid(), []
    with contextlib.suppress(OSError, ValueError):
        for task in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{task}/children") as listed:
                found += [int(pid) for pid in listed.read().split()]
        return found
    found = []
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
    pause = 0.0005  # short at first (most runs take milliseconds), then up to 20 ms between looks
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if select.select([0], [], [], pause)[0] and not os.read(0, 4096):
            kill_group(pid)
            os._exit(0)
        pause = min(2 * pause, 0.02)


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
    working directory). isolation: how the helper reached no network ("" when it did not try or
    could not)."""

    def __init__(self, user, warm, script=None, preload=("torch",), isolate=False):
        import subprocess  # here, not at the top: the helper and its workers never load it
        self.user = user
        script = Path(script or __file__).resolve()
        setup = json.dumps({"warm": warm, "preload": list(preload), "isolate": isolate})
        # a session of its own: Ctrl-C in the terminal reaches the caller only, which cleans up
        self.process = subprocess.Popen([sys.executable, str(script), HELPER, setup], cwd=script.parent,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        start_new_session=True)
        self.lines = Lines(self.process.stdout.fileno())
        try:
            ready, _, self.isolation = self.lines.next(START_LIMIT).partition(" ")
        except (EOFError, TimeoutError):
            ready = ""
        except BaseException:  # Ctrl-C while it imports torch
            self.close()
            raise
        if ready != "ready":
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
        import subprocess
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
    returned, with so many threads still running), refused (what the audit hook refused it, the
    first thing), how (its exit code, "timeout" when it was killed at the time limit, "helper" when
    the helper went away), left (a process it started was still running), kept (bytes it left in
    its TMPDIR), printed (its last lines of output) and output (the bytes of it), full (its report
    may be cut short: the disk is full), problem (the run could not be made), and the limits it ran
    under (time_limit, output_limit)."""
    user: str
    lines: list = field(default_factory=list)
    stop: str = ""
    done: bool = False
    threads: int = 0
    refused: str = ""
    how: object = 0
    left: bool = False
    kept: int = 0
    printed: list = field(default_factory=list)
    output: int = 0
    full: str = ""
    problem: str = ""
    time_limit: float = TIME_LIMIT
    output_limit: int = OUTPUT_LIMIT

    def cut_short(self, where=""):
        """Why the function did not return, "" when it did; `where` (a line that says what it was
        doing) goes after a time-out or a kill."""
        if self.stop:
            return one_line(self.stop)
        if self.how == "timeout":
            return f"did not finish within {self.time_limit:g} s (an endless loop?){where}"
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

    def violation(self):
        """One line on the first thing that voids the run, "" when nothing does: it could not be
        made, the sandbox refused it something, it printed up to its output limit, it did not
        return, or it left something behind (code nobody has read earns nothing from such a run)."""
        if self.problem:
            return self.problem
        if self.refused:
            return "the sandbox refused " + one_line(self.refused)
        if self.output >= self.output_limit:
            return f"printed {self.output_limit / 2 ** 20:g} MiB or more (a print loop?)"
        return self.cut_short() or self.left_behind()


class Sandbox:
    """The caller's side: a helper process (started by the first run, again after one killed
    it) and a folder for the workers' files, both gone when the `with` block ends. user names the
    caller in the messages ("check.py"); warm: (file, function, arguments) the helper calls once;
    script: the copy of this file the helper runs (this file by default); limits: every run's
    Limits unless a run gives its own (a helper without network is made when they say so);
    preload: the modules the helper imports once for its workers."""

    def __init__(self, user, warm=None, script=None, limits=None, preload=("torch",)):
        self.user, self.warm, self.script = user, warm, script
        self.limits, self.preload = limits or Limits(), tuple(preload)
        self.files = None  # made by the first run (a full disk is reported there)
        self.helper = None

    def __enter__(self):
        return self

    def __exit__(self, *error):
        if self.helper:
            self.helper.close()
            self.helper = None
        if self.files:
            shutil.rmtree(self.files, ignore_errors=True)
            self.files = None

    def close(self):
        self.__exit__(None, None, None)

    @property
    def isolation(self):
        """How the helper reached no network ("network namespace", ...), "" when it did not; None
        before the first run."""
        return self.helper.isolation if self.helper else None

    def call(self, source, name, calls, limits=None):
        """Python `source` run in a fresh worker, its function `name` called on each argument list
        of `calls` (call_each): (results, run), results[i] {"value": v} or {"error": "..."}, or
        None for a call the worker did not reach (run says why)."""
        run = self.run((__file__, "call_each"), {"source": source, "name": name, "calls": calls}, limits)
        results = [None] * len(calls)
        for line in run.lines:
            i = line.get("i")
            if "i" not in line and "error" in line:  # the text did not run: every call fails so
                results = [{"error": str(line["error"])}] * len(calls)
                break
            if isinstance(i, int) and 0 <= i < len(calls) and results[i] is None:
                results[i] = {"value": line["value"]} if "value" in line else {"error": str(line.get("error"))}
        return results, run

    def run(self, target, arguments, limits=None):
        """function(report, **arguments) in a fresh worker, target = (file, function), under
        `limits` (the sandbox's by default): a Run."""
        limits = limits or self.limits
        seconds = limits.time or TIME_LIMIT  # read now: a test may lower it
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
                           report=report, output=output, tmp=tmp, limits=asdict(limits))
            pid, how, orphans = self.run_worker(request, seconds)
            left = group_alive(pid) or orphans > 0  # a fork, a setsid'd child: a process left running
            kill_group(pid)
            kept = size_of(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
            run = Run(self.user, how=how, left=left, kept=kept, printed=printed(output_file),
                      output=output_file.seek(0, os.SEEK_END), time_limit=seconds,
                      output_limit=limits.output or OUTPUT_LIMIT)
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

    def run_worker(self, request, seconds):
        """Fork a worker for request and wait at most `seconds` for it. Returns (pid, how,
        orphans): how is its exit code, "timeout" (it was killed), or "helper" (the helper went
        away); orphans, the processes it left running that the helper ended."""
        pid = self.start(request)
        try:
            return (pid, *self.helper.exit_code(seconds))
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
        self.helper = Helper(self.user, self.warm, self.script, self.preload, not self.limits.network)
        return self.helper.fork(request)

    def drop_helper(self):
        self.helper.close()
        self.helper = None


def read_report(file, pid, run):
    """Fill run from worker pid's report: its own lines in order, and stop, done, threads, refused."""
    for line in file.read().splitlines():
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(fields, dict) or fields.get("pid") != pid:
            continue  # a line from a fork of the worker
        if "refused" in fields:
            run.refused = run.refused or str(fields["refused"])
        elif any(key in fields for key in RESERVED[1:]):
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
        serve(**json.loads(sys.argv[2]))
