"""machinery/sandbox.py under the limits the coding team runs model-written code with (env_code.py):
each hostile piece of code (an endless loop, a fork bomb, a huge allocation, a write outside its
folder, a read of the project's files, a socket, a print flood, os._exit, a process left running,
ctypes, a kill of its parent) comes back as one line, within the time limit, and leaves no process
running. The exercises' use of the same module (no such limits) is tests/test_exercises.py's."""
import os
import shutil
import time
from pathlib import Path

import pytest

from machinery.sandbox import Limits, Sandbox

ROOT = Path(__file__).resolve().parent.parent
STRICT = Limits(time=1, memory=256 * 2 ** 20, processes=False, output=2 ** 20, own_folder=True,
                hidden=(str(ROOT),), network=False)
SLEEP = shutil.which("sleep")
MARK = "31.4159"  # the argument of every sleeper these tests start: found in the process table, it was left


def descendants(pid):
    """The pids below process pid (children, theirs ...), from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, todo = [], [pid]
    while todo:
        above = todo.pop()
        below = [p for p, parent in parents.items() if parent == above]
        found += below
        todo += below
    return found


def sleepers():
    """Processes whose command line holds MARK (zombies have none)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if MARK in Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def box():
    """One sandbox for the module (its helper has no network), and nothing of it left after."""
    sandbox = Sandbox("tests", limits=Limits(network=False), preload=())
    yield sandbox
    warden = sandbox.helper.process.pid if sandbox.helper else None
    sandbox.close()
    if warden:
        assert descendants(warden) == []
    assert sleepers() == []


def call(box, code, limits=STRICT, name="f", calls=([1], [2])):
    """(results, one line or "", seconds) of running code's f on calls; and nothing left running but
    the helper below its warden."""
    start = time.monotonic()
    results, run = box.call(code, name, list(calls), limits)
    seconds = time.monotonic() - start
    assert len(descendants(box.helper.process.pid)) == 1, "a process was left running"
    assert sleepers() == []
    return results, run.violation(), seconds


def test_a_function_runs_on_plain_data_and_its_values_come_back(box):
    results, line, seconds = call(box, "import math\n\ndef f(x):\n    return [x, math.sqrt(x * x), str(x), x > 1, None]\n")
    assert line == "" and results == [{"value": [1, 1.0, "1", False, None]}, {"value": [2, 2.0, "2", True, None]}]
    assert seconds < 1


def test_ordinary_code_runs_under_the_strict_limits(box):
    """What a model's function may well use: imports of the standard library, classes, decorators,
    recursion, comprehensions, exceptions it handles itself."""
    code = """
import collections, functools, itertools, math, re, string
from dataclasses import dataclass
from typing import List

@dataclass
class Box:
    n: int

@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def f(x: int) -> List[int]:
    try:
        int("no")
    except ValueError:
        pass
    words = re.findall(r"[a-z]+", "ab cd " + string.ascii_lowercase[:x])
    counts = collections.Counter(itertools.chain.from_iterable(words))
    return [Box(x).n, fib(20), math.gcd(12, 18), len(counts), sorted(words, key=len)[-1]]
"""
    results, line, _ = call(box, code, calls=([3],))
    assert line == "" and results == [{"value": [3, 6765, 6, 4, "abc"]}]


def test_errors_are_per_call_and_a_value_that_is_not_data_is_an_error(box):
    results, line, _ = call(box, "def f(x):\n    return 1 / (x - 1) if x == 2 else {1, 2}\n")
    assert line == "" and results == [{"error": "returned a value that is not plain data (a number, a string, a list ...)"},
                                      {"value": 1.0}]
    results, line, _ = call(box, "def g(x):\n    return x\n")
    assert results == [{"error": "defines no function f"}] * 2
    results, line, _ = call(box, "def f(x) return\n")
    assert results[0]["error"].startswith("raised SyntaxError")


HOSTILE = {
    "an endless loop": ("def f(x):\n    while True:\n        pass\n", "did not finish within 1 s (an endless loop?)"),
    "a fork bomb": ("import os\ndef f(x):\n    while True:\n        os.fork()\n",
                    "the sandbox refused os.fork: it may not start or signal processes"),
    "a subprocess": (f"import subprocess\ndef f(x):\n    subprocess.Popen([{SLEEP!r}, {MARK!r}])\n",
                     "the sandbox refused import _posixsubprocess: not allowed in the sandbox"),
    "a write outside its folder": ("def f(x):\n    open('/tmp/sandbox-escaped.txt', 'w').write('x')\n    return x\n",
                                   "the sandbox refused open /tmp/sandbox-escaped.txt: outside its own folder"),
    "a read of the project's files": (f"def f(x):\n    return open({str(ROOT / 'code_problems.py')!r}).read()\n",
                                      f"the sandbox refused open {ROOT / 'code_problems.py'}: the project's files are hidden from it"),
    "an import of the project's files": (f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport code_problems\ndef f(x):\n    return x\n",
                                         f"the sandbox refused os.listdir {ROOT}: the project's files are hidden from it"),
    "another process's memory": ("import os\ndef f(x):\n    return open(f'/proc/{os.getppid()}/environ').read()\n",
                                 "the sandbox refused open /proc/"),
    "a socket": ("import socket\ndef f(x):\n    socket.socket().connect(('127.0.0.1', 9))\n",
                 "the sandbox refused socket.__new__: it has no network"),
    "a print flood": ("def f(x):\n    while True:\n        try:\n            print('x' * 1000)\n        except OSError:\n"
                      "            return x\n", "printed 1 MiB or more (a print loop?)"),
    "os._exit": ("import os\ndef f(x):\n    os._exit(0)\n", "stopped before its checks were done (exit code 0: os._exit()?)"),
    "ctypes": ("import ctypes\ndef f(x):\n    return ctypes.CDLL(None).fork()\n",
               "the sandbox refused ctypes.dlopen: not allowed in the sandbox"),
    "a kill of its parent": ("import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
                             "the sandbox refused os.kill: it may not start or signal processes"),
}


@pytest.mark.parametrize("what", HOSTILE)
def test_hostile_code_is_one_line_within_the_time_limit_and_leaves_nothing(box, what):
    code, said = HOSTILE[what]
    results, line, seconds = call(box, code)
    assert line.startswith(said), line
    assert seconds < 2.5  # the 1 s limit, the kill and the reading
    assert not Path("/tmp/sandbox-escaped.txt").exists()


def test_a_huge_allocation_fails_at_the_memory_limit_and_a_smaller_one_runs(box):
    code = "def f(mib):\n    return len(bytearray(mib * 2 ** 20))\n"
    results, line, seconds = call(box, code, calls=([200], [300], [10 ** 6]))
    assert line == "" and results == [{"value": 200 * 2 ** 20}, {"error": "raised MemoryError"}, {"error": "raised MemoryError"}]
    assert seconds < 5  # no swapping: the allocation fails at once


def test_it_works_in_its_own_folder_which_is_gone_after(box):
    code = ("import os, tempfile\ndef f(x):\n    open('mine.txt', 'w').write('hello')\n"
            "    return [os.getcwd() == tempfile.gettempdir(), open('mine.txt').read()]\n")
    results, line, _ = call(box, code, calls=([1],))
    assert line == "" and results == [{"value": [True, "hello"]}]


def test_what_it_leaves_running_is_ended_when_processes_are_allowed(box):
    """With processes allowed (the exercises' default), a detached sleeper (a double fork and
    setsid) is found and ended: the run says so, and the process table holds no sleeper."""
    code = (f"import os\ndef f(x):\n    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
            f"            os.execv({SLEEP!r}, ['sleep', {MARK!r}])\n        os._exit(0)\n    os.wait()\n    return x\n")
    results, line, _ = call(box, code, limits=Limits(time=1, processes=True, own_folder=True), calls=([1],))
    assert results == [{"value": 1}] and line == "left a process running (os.fork, os.setsid?): end every process it starts"


def test_there_is_no_network_device_where_the_machine_allows_a_namespace(box):
    results, line, _ = call(box, "def f(x):\n    return [l.split(':')[0].strip() for l in open('/proc/self/net/dev').read().splitlines()[2:]]\n",
                            calls=([1],))
    if box.isolation:  # root, or user namespaces on: the helper's own network namespace
        assert results == [{"value": ["lo"]}]
    else:  # the audit hook alone refuses sockets (the test above)
        pytest.skip("this machine allows no network namespace")


def test_limits_are_the_callers_and_the_default_is_the_exercises(box):
    """No hook by default: the worker may write anywhere its user may (the exercises need no more)."""
    target = Path(f"/tmp/sandbox-default-{os.getpid()}.txt")
    try:
        results, run = box.call(f"def f(x):\n    open({str(target)!r}, 'w').write('x')\n    return x\n", "f", [[1]],
                                Limits(time=1))
        assert run.violation() == "" and results == [{"value": 1}] and target.exists()
    finally:
        target.unlink(missing_ok=True)
