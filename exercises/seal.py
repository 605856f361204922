"""Sealed expected values: what a handout folder holds instead of the answers (sealed.json).

A value is sealed as a salted, slow hash of its text at a fixed number of decimals: check.py
hashes what a student's function returned the same way and compares the two hashes, so it can
say "passed" without the expected value being in the folder. The salt is new for every handout
and every value has a label of its own, so one hash says nothing about another; 100,000 rounds
of PBKDF2 make each try take tens of milliseconds, so guessing a number by trying candidates is
slow, though not impossible: a grade comes from the teacher's key (`gradebook.py`), not from
a student's own check. The decimals of each case are chosen so that every number of its
expected value sits well inside a rounding step: a right answer computed another way (float32,
another order of the sums) rounds to the same text.

It imports no other file of the exercises; check.py, quiz.py and handout.py import it.
"""
import hashlib
import json
import math
from decimal import ROUND_DOWN, Decimal, InvalidOperation

ITERATIONS = 100_000  # PBKDF2-HMAC-SHA256 rounds a value
DECIMALS = (5, 4, 6, 3, 2)  # tried in this order for a case's expected value (see decimals_for)
MARGIN = 0.1  # a number must sit at least this fraction of a rounding step away from a boundary
QUIZ_DECIMALS = 3  # the quiz asks for three decimals, rounded or cut


def text(value, decimals):
    """value as canonical text: numbers at `decimals` places (ints and floats alike, -0 as 0),
    strings quoted, lists and tuples alike; anything else as text that no expected value has."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        x = float(value)
        if math.isnan(x) or math.isinf(x):
            return str(x)
        shown = f"{x:.{decimals}f}"
        return shown[1:] if shown.startswith("-") and float(shown) == 0 else shown
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(text(v, decimals) for v in value) + "]"
    return f"<{type(value).__name__}>"


def numbers(value):
    """Every number in a nested value."""
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield float(value)


def decimals_for(values):
    """The first of DECIMALS at which every number of `values` is at least MARGIN of a rounding
    step away from a rounding boundary (x.5 at that place)."""
    def clear(x, d):
        if math.isnan(x) or math.isinf(x):
            return True
        scaled = abs(x) * 10 ** d
        return abs(scaled - math.floor(scaled) - 0.5) >= MARGIN
    return next((d for d in DECIMALS if all(clear(x, d) for v in values for x in numbers(v))),
                DECIMALS[0])


def seal(salt, label, value_text, iterations=ITERATIONS):
    """The hash of one value's text under its label."""
    return hashlib.pbkdf2_hmac("sha256", f"{label}|{value_text}".encode(), bytes.fromhex(salt),
                               iterations).hex()


def quiz_texts(value):
    """The texts a quiz answer may take: rounded or cut to QUIZ_DECIMALS places."""
    try:
        cut = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-QUIZ_DECIMALS), ROUND_DOWN)
    except InvalidOperation:
        return {text(value, QUIZ_DECIMALS)}
    return {text(value, QUIZ_DECIMALS), text(float(cut), QUIZ_DECIMALS)}


# ------------------------------------------------ comparing (check.py, on plain data only)
class Sealed:
    """One case's sealed expectation, as grade.Open is an open one: matches(got), notes(got) (the
    notes of the known wrong answers got equals) and shown() (what a failure prints)."""

    def __init__(self, salt, label, entry, iterations):
        self.salt, self.label, self.iterations = salt, label, iterations
        self.decimals, self.expected = int(entry["decimals"]), str(entry["expected"])
        self.near = [(str(h), str(note)) for h, note in entry.get("near", [])]
        self.seen = {}

    def hashed(self, got):
        key = text(got, self.decimals)
        if key not in self.seen:
            self.seen[key] = seal(self.salt, self.label, key, self.iterations)
        return self.seen[key]

    def matches(self, got):
        return self.hashed(got) == self.expected

    def notes(self, got):
        return [note for h, note in self.near if h == self.hashed(got)]

    @staticmethod
    def shown():
        return "sealed (your teacher's key has it)"


class SealedFile:
    """sealed.json as written by handout.py: the cases' and the quiz's sealed values."""

    def __init__(self, path):
        data = json.loads(path.read_text(encoding="utf-8"))
        self.salt, self.iterations = str(data["salt"]), int(data["iterations"])
        bytes.fromhex(self.salt)  # ValueError for a salt that is not hex
        self.cases, self.quiz = data["cases"], data["quiz"]

    def expectations(self, n, names):
        """Exercise n's sealed expectations, one per case name, in order."""
        entries = self.cases[str(n)]
        if [entry["name"] for entry in entries] != list(names):
            raise ValueError(f"sealed.json's cases of exercise {n} are not cases.py's")
        return [Sealed(self.salt, f"case|{n}|{i}", entry, self.iterations)
                for i, entry in enumerate(entries)]

    def quiz_right(self, key, value):
        """A quiz answer, rounded or cut to three decimals, against the sealed ones."""
        hashed = seal(self.salt, f"quiz|{key}", text(value, QUIZ_DECIMALS), self.iterations)
        return hashed in set(self.quiz[key])


def sealed_file(values, quiz, salt, iterations=ITERATIONS):
    """sealed.json's content. values: {n: [(name, expected, near misses), ...]} with expected the
    project's own value; quiz: {id: expected number}."""
    cases = {}
    for n, entries in values.items():
        cases[str(n)] = []
        for i, (name, expected, near) in enumerate(entries):
            d = decimals_for([expected] + [value for value, _ in near])
            label = f"case|{n}|{i}"
            cases[str(n)].append({
                "name": name, "decimals": d,
                "expected": seal(salt, label, text(expected, d), iterations),
                "near": [[seal(salt, label, text(value, d), iterations), note]
                         for value, note in near if text(value, d) != text(expected, d)]})
    return {"about": "the expected values of cases.py and of the quiz, sealed (seal.py): "
                     "check.py compares hashes; the values are not here",
            "iterations": iterations, "salt": salt, "cases": cases,
            "quiz": {key: sorted(seal(salt, f"quiz|{key}", t, iterations) for t in quiz_texts(v))
                     for key, v in quiz.items()}}
