"""How one exercise is graded: in the worker, its cases run on the student's functions and what
they return goes to the report as plain data; in check.py, those values are compared with the
expected ones, which never enter the worker (the teacher's key, key.py, or a handout's sealed
values, seal.py). sandbox.py runs check_exercise in a worker process of its own.

A student does not need to read this file: the cases are in cases.py. It imports cases.py (what
to check) and sandbox.py (describe, one line for an exception), and key.py only for --solutions;
check.py imports it.
"""
import importlib.util
import json
import sys
import traceback
import warnings
from pathlib import Path

from cases import CASES, EXERCISES, WITHOUT_TORCH
from sandbox import describe, one_line


# ------------------------------------------------ comparing (in check.py, on plain data only)
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


class Open:
    """One case's expectation in the clear (the teacher's key): matches(got) within close()'s
    tolerance, notes(got) of the known wrong answers got matches, shown() for a failure."""

    def __init__(self, value, near=()):
        self.value, self.near = value, list(near)

    def matches(self, got):
        return close(got, self.value)

    def notes(self, got):
        return [note for value, note in self.near if close(got, value)]

    def shown(self):
        return show(self.value)


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


def judge(n, cases, expected, results):
    """(passed, failure) of exercise n from its results, one per case in order (see outcome), and
    its expectations (Open or seal.Sealed), one per case. failure is "" when every case passes,
    else the first failing case as lines: its name, its input, what was expected and what came
    back. None when the results end before a failing case: the worker stopped, and the caller
    says why."""
    for i, ((name, _, inputs), expectation, result) in enumerate(zip(cases, expected, results)):
        if "missing" in result:  # NotImplementedError
            other = result["missing"]
            if (other != EXERCISES[n][1]
                    and other in [f for _, f, _ in EXERCISES.values()]):
                return False, f"needs {other} first: it is not implemented yet"  # ex2 calling ex1
            return False, "not implemented yet" if i == 0 else f"{name}: not implemented yet"
        if "raised" in result:
            return False, failure(name, inputs, expectation, one_line(result["raised"]))
        got = unplain(result.get("got"))
        if not expectation.matches(got):
            return False, failure(name, inputs, expectation, show(got), expectation.notes(got))
    return (True, "") if len(results) >= len(cases) else None


def failure(name, inputs, expectation, got, notes=()):
    """The lines that report a failing case (lists of numbers went in as float64 tensors), and a
    note for each known wrong answer that came back."""
    given = ", ".join(f"{key}={show(value, 300)}" for key, value in inputs.items())
    return "\n".join([name, f"input:    {given}", f"expected: {expectation.shown()}",
                      f"got:      {got}"] + [f"note: {note}" for note in notes])


# ------------------------------------------------ running the cases (in the worker)
def outcomes(cases):
    """What the functions return on each case (see outcome), up to the first one that raises.
    The worker does not know the expected values: it reports every case, and check.py judges
    them in order, up to the first failure."""
    for name, run, inputs in cases:
        result = outcome(run, inputs)
        yield result
        if "got" not in result:
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
    """The project's own functions for exercise n (--solutions: the teacher's key.py has them)."""
    from key import SOLUTIONS
    return SOLUTIONS[n]()


def exercises_used_by(n):
    """The other exercises whose ex*.py file exercise n's file imported (just loaded)."""
    return [m for m, (_, filename, _) in EXERCISES.items()
            if m != n and Path(filename).stem in sys.modules]


def check_exercise(report, n, solutions, folder):
    """The worker's checks of exercise n (sandbox.py calls it in the worker): load the functions,
    then one report line per case."""
    if n not in WITHOUT_TORCH:
        try:
            import torch  # noqa: F401
        except ImportError:
            others = " and ".join(map(str, sorted(WITHOUT_TORCH)))
            report.write(stop=f"needs PyTorch (pip install torch); exercises {others} run without it")
            return
    try:
        functions = project_functions(n) if solutions else student_functions(n, Path(folder))
    except Exception as error:
        where = "the project's code" if solutions else EXERCISES[n][1]
        report.write(stop=f"could not load {where}: {describe(error)}")
        return
    report.write(loaded=True, used=[] if solutions else exercises_used_by(n))
    for i, result in enumerate(outcomes(CASES[n](*functions))):
        report.write(case=i, **result)


def warm(solutions):
    """The helper's warm-up (once, before its first worker): for --solutions, the project's
    modules, so that no worker pays their import."""
    if solutions:
        for n in EXERCISES:
            project_functions(n)
