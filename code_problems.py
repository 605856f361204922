"""The coding team's problems (env_code.py): small function-writing problems made offline from
seeded templates, each with a golden solution and hidden golden tests.

A family is a function to write with parameters: `add_k(x)` returns x plus k, `shout(s)` returns s
in capitals followed by k copies of a mark, ... (FAMILIES, 21 of them). A seed draws a family, its
parameters, one example shown in the statement, and HIDDEN inputs for the hidden tests. The golden
solution is Python text made from the family's template; the expected output of every test is the
golden solution's, computed here, in the caller's process (it is this project's own code), and
kept here: the code the model writes is run on the inputs alone (env_code.py, machinery/sandbox.py),
and its outputs are compared in the caller.

    >>> p = make_problem(1)
    >>> p.statement
    'Write a Python function clamp(x) that takes an integer x and returns -5 when x is below -5, 6 when x is above 6, and x otherwise.'
    >>> call_text(p.name, p.example[0]), p.example[1], len(p.hidden_inputs)
    ('clamp(-16)', -5, 6)

Split: each family's parameter grid is split by a stable hash of (family, parameters): the fifth
with the lowest hashes (at least one) goes to the test split. Seeds below TEST_SEEDS (10**9) draw only training problems, seeds from it
on only test problems: a test problem is never one trained on (the same families, parameters the
training split never shows; the hidden inputs are drawn afresh for every seed).
"""
import itertools
import json
import random
import string
import zlib
from dataclasses import dataclass

TEST_SEEDS = 10 ** 9  # seeds from here on draw the test split
HIDDEN = 6  # hidden tests per problem
EXAMPLES = 3  # further golden tests kept for env_code's example answer (never shown as hidden ones)
TEST_SHARE = 5  # a family's parameter settings: one in TEST_SHARE (at least one) goes to the test split


@dataclass(frozen=True)
class Family:
    """A function to write: its name and arguments, what it does (a template over the parameters),
    its golden solution (a template), the parameter grid, and inputs(rng) -> one argument list."""
    name: str
    arguments: str  # "x", "s", "xs", "a, b"
    does: str  # "returns x plus {k}": the statement after "that"
    golden: str  # the body, indented, over the parameters
    grid: dict  # parameter -> the values it may take
    inputs: object  # rng -> [argument, ...]


@dataclass(frozen=True)
class Problem:
    """One problem: its statement, the function's name and signature, the golden solution (Python
    text), the example shown ((arguments,), expected), the hidden tests' inputs and expected outputs
    (plain JSON data), and further golden tests for example answers. Tuples throughout: immutable."""
    family: str
    params: tuple  # ((name, value), ...)
    name: str
    signature: str
    statement: str
    golden: str
    example: tuple  # (arguments, expected)
    hidden_inputs: tuple  # (arguments, ...), each a tuple
    hidden_expected: tuple  # the golden outputs, as JSON data
    spare: tuple  # EXAMPLES more (arguments, expected) pairs, none shown, none hidden


def ints(low, high):
    return lambda rng: [rng.randint(low, high)]


def words(alphabet, longest, shortest=0):
    return lambda rng: ["".join(rng.choice(alphabet) for _ in range(rng.randint(shortest, longest)))]


def number_list(low, high, longest, shortest=0):
    return lambda rng: [[rng.randint(low, high) for _ in range(rng.randint(shortest, longest))]]


FAMILIES = (
    Family("add_k", "x", "takes an integer x and returns x plus {k}", "return x + {k}",
           {"k": range(1, 21)}, ints(-30, 30)),
    Family("times_k", "x", "takes an integer x and returns x times {k}", "return x * {k}",
           {"k": range(2, 13)}, ints(-20, 20)),
    Family("affine", "x", "takes an integer x and returns {a} times x plus {b}", "return {a} * x + {b}",
           {"a": range(2, 6), "b": range(1, 10)}, ints(-10, 10)),
    Family("square_minus", "x", "takes an integer x and returns x squared minus {k}", "return x * x - {k}",
           {"k": range(1, 16)}, ints(-9, 9)),
    Family("clamp", "x", "takes an integer x and returns {lo} when x is below {lo}, {hi} when x is above {hi}, "
           "and x otherwise", "return min(max(x, {lo}), {hi})", {"lo": range(-10, 1), "hi": range(2, 13)},
           ints(-20, 20)),
    Family("is_multiple", "n", "takes an integer n and returns True when n is a multiple of {k}, else False",
           "return n % {k} == 0", {"k": range(2, 13)}, ints(0, 60)),
    Family("remainder", "n", "takes a non-negative integer n and returns the remainder of n divided by {k}",
           "return n % {k}", {"k": range(2, 16)}, ints(0, 100)),
    Family("between", "x", "takes an integer x and returns True when x is at least {lo} and at most {hi}, "
           "else False", "return {lo} <= x <= {hi}", {"lo": range(-5, 6), "hi": range(6, 16)}, ints(-10, 20)),
    Family("fizz", "n", "takes a positive integer n and returns the string 'Fizz' when n is a multiple of "
           "{k}, else n written as a string", "return 'Fizz' if n % {k} == 0 else str(n)",
           {"k": range(2, 10)}, ints(1, 40)),
    Family("digit_sum", "n", "takes a non-negative integer n and returns the sum of its decimal digits "
           "plus {k}", "return sum(int(d) for d in str(n)) + {k}", {"k": range(0, 12)}, ints(0, 9999)),
    Family("count_letter", "s", "takes a string s and returns how many times the letter {c!r} appears in s",
           "return s.count({c!r})", {"c": "abcdefgh"}, words("abcdefgh", 8)),
    Family("repeat", "s", "takes a string s and returns {k} copies of s joined with {sep!r} between them",
           "return {sep!r}.join([s] * {k})", {"k": range(2, 6), "sep": ("", "-", " ", ",")}, words("abcxyz", 4, 1)),
    Family("shout", "s", "takes a string s and returns s in capital letters followed by {k} copies of {m!r}",
           "return s.upper() + {m!r} * {k}", {"k": range(1, 7), "m": "!?"}, words(string.ascii_lowercase, 6, 1)),
    Family("pad_left", "s", "takes a string s and returns it padded on the left with {c!r} to {w} "
           "characters (s itself when it has {w} or more)", "return s.rjust({w}, {c!r})",
           {"c": "*-.0#", "w": range(3, 9)}, words("abc", 9)),
    Family("sum_above", "xs", "takes a list of integers xs and returns the sum of the numbers in it "
           "greater than {t}", "return sum(x for x in xs if x > {t})", {"t": range(-5, 6)},
           number_list(-10, 10, 6)),
    Family("count_below", "xs", "takes a list of integers xs and returns how many of them are smaller "
           "than {t}", "return sum(1 for x in xs if x < {t})", {"t": range(-5, 6)}, number_list(-10, 10, 6)),
    Family("largest_plus", "xs", "takes a non-empty list of integers xs and returns its largest number "
           "plus {k}", "return max(xs) + {k}", {"k": range(0, 12)}, number_list(-20, 20, 6, 1)),
    Family("first_n", "xs", "takes a list xs and returns a list of its first {n} elements (all of them "
           "when it has fewer)", "return xs[:{n}]", {"n": range(1, 9)}, number_list(0, 9, 9)),
    Family("last_n", "xs", "takes a list xs and returns a list of its last {n} elements (all of them "
           "when it has fewer)", "return xs[-{n}:]", {"n": range(1, 9)}, number_list(0, 9, 9)),
    Family("reverse_append", "xs", "takes a list of integers xs and returns it reversed, with {v} added at "
           "the end", "return xs[::-1] + [{v}]", {"v": range(0, 10)}, number_list(0, 9, 5)),
    Family("sum_times", "a, b", "takes two integers a and b and returns a plus b, times {k}",
           "return (a + b) * {k}", {"k": range(2, 13)}, lambda rng: [rng.randint(-9, 9), rng.randint(-9, 9)]),
)
BY_NAME = {f.name: f for f in FAMILIES}


def grid(family):
    """Every parameter setting of a family, in a fixed order: [((name, value), ...)]."""
    names = sorted(family.grid)
    return [tuple(zip(names, values)) for values in itertools.product(*(family.grid[n] for n in names))]


def splits(family):
    """{"train": [...], "test": [...]}: the family's parameter settings, ranked by a stable hash of
    (family, parameters); the first len // TEST_SHARE (at least one) are the test split's."""
    ranked = sorted(grid(family), key=lambda p: (zlib.crc32(repr((family.name, p)).encode()), p))
    cut = max(1, len(ranked) // TEST_SHARE)
    return {"test": ranked[:cut], "train": ranked[cut:]}


SPLITS = {(f.name, split): settings for f in FAMILIES for split, settings in splits(f).items()}


def golden_source(family, params):
    """The golden solution as Python text."""
    return f"def {family.name}({family.arguments}):\n    " + family.golden.format(**dict(params)) + "\n"


def plain(value):
    """A value as JSON data (tuples become lists): what a test compares."""
    return json.loads(json.dumps(value))


def call_text(name, arguments):
    """How a call reads in a prompt: add_k(3), shout('hi'), sum_above([1, -2])."""
    return f"{name}({', '.join(repr(a) for a in arguments)})"


def make_problem(seed):
    """The problem of `seed`: a family, parameters of its split, an example and HIDDEN + EXAMPLES
    distinct inputs (none equal to the example's), and the golden outputs of all of them."""
    rng = random.Random(seed)
    family = rng.choice(FAMILIES)
    params = rng.choice(SPLITS[family.name, "test" if seed >= TEST_SEEDS else "train"])
    source = golden_source(family, params)
    namespace = {}
    exec(source, namespace)  # the project's own golden solution, in this process
    golden = namespace[family.name]
    inputs, seen = [], set()
    for _ in range(200):  # distinct inputs (a family's input space holds far more than needed)
        arguments = tuple(family.inputs(rng))
        if repr(arguments) not in seen:
            seen.add(repr(arguments))
            inputs.append(arguments)
        if len(inputs) == 1 + HIDDEN + EXAMPLES:
            break
    outputs = [plain(golden(*plain(list(a)))) for a in inputs]
    signature = f"{family.name}({family.arguments})"
    statement = f"Write a Python function {signature} that {family.does.format(**dict(params))}."
    return Problem(family.name, params, family.name, signature, statement, source, (inputs[0], outputs[0]),
                   tuple(inputs[1:1 + HIDDEN]), tuple(outputs[1:1 + HIDDEN]),
                   tuple(zip(inputs[1 + HIDDEN:], outputs[1 + HIDDEN:])))
