"""docs/cheatsheet.md against the code: every number of its worked example recomputed with the
project's functions (mtgrpo.group_norm, turn_advantages, token_advantages; rewards.py on episodes
that env_search.SearchEnv records), every `file.py:name` it cites importable, every `--flag`
(and literal value) accepted by config.parse_args, every `Class.attr` and `param of function` of
its symbol table present. A changed number must fail: test_a_changed_number_fails changes each
number cell of the example's first row, one at a time. No model is loaded."""
import contextlib
import dataclasses
import importlib
import inspect
import io
import re
from pathlib import Path

import pytest
import torch

import config
import env_search
import mtgrpo
import rewards

SHEET = Path(__file__).resolve().parent.parent / "docs" / "cheatsheet.md"
TOL = 0.0005  # the sheet shows 3 decimals
ALGOS = {"GRPO-OR": "or", "GRPO-MR": "mr", "MT-GRPO": "mt"}
COMPONENTS = {"tool execution": "tool_execution", "answer in results": "answer_in_results",
              "answer presence": "answer_presence", "exact match": "exact_match",
              "XML format": "xml_format", "XML tag usage": "xml_tag_usage"}


# ---------------------------------------------------------------- the four episodes, as SearchEnv records them
GOLD = ["Seine", "River Seine"]
DOCS = {"river through Paris": ("Seine", "The Seine is a river that flows through Paris."),
        "river in France": ("Loire", "The Loire is the longest river in France.")}


class Retriever:
    def search(self, query, k):
        title, text = DOCS[query]
        return [{"title": title, "text": text, "score": 1.0}]


def call(query):
    return ('<reasoning>I should search.</reasoning>\n'
            f'<tool>{{"name": "wiki_search", "args": {{"query": "{query}"}}}}</tool>')


def answer(text):
    return f"<reasoning>The result says so.</reasoning>\n<answer>{text}</answer>"


TURNS = {1: [call("river through Paris"), answer("Seine")],
         2: [call("river in France"), answer("Loire")],
         3: ["<reasoning>I remember it.</reasoning>\n<answer>the Seine river</answer>"],
         4: ['<reasoning>I should search.</reasoning>\n<tool>{"name": "wiki_search", query: river Paris}</tool>',
             answer("Seine")]}


def completion(episode):
    env = env_search.SearchEnv("Which river flows through Paris?", GOLD, Retriever(), max_turns=2)
    for text in TURNS[episode]:
        env.step(text)
    assert env.done
    return env.completion


# ---------------------------------------------------------------- reading the sheet
def number(cell):
    return float(cell.strip().replace("−", "-").lstrip("+"))


def tables(text):
    """Every markdown table: (header cells, rows of cells)."""
    found, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])])  # not at \|
        elif block:
            found.append((block[0], [r for r in block[2:]]))
            block = []
    return found


def table(text, *columns):
    """The one table whose header has all these columns, as a list of {column: cell}."""
    hits = [(h, rows) for h, rows in tables(text) if all(c in h for c in columns)]
    assert len(hits) == 1, f"expected one table with columns {columns}, found {len(hits)}"
    header, rows = hits[0]
    assert all(len(r) == len(header) for r in rows), f"a row of the table {columns} has the wrong number of cells"
    return [dict(zip(header, r)) for r in rows]


def episodes(text):
    """R^T (groups=1, G, 1) and R^O (1, G) from the rewards table, in its episode order."""
    rows = table(text, "episode", "what happened", "R^T", "R^O")
    return ([[[number(r["R^T"])] for r in rows]], [[number(r["R^O"]) for r in rows]],
            [int(r["episode"]) for r in rows])


def near(written, computed, what):
    assert abs(written - computed) <= TOL, f"{what}: the sheet says {written}, the code gives {computed:.4f}"


# ---------------------------------------------------------------- the checks, on a text
def check_rewards(text):
    for row in table(text, "episode", "what happened", "R^T", "R^O"):
        ep = int(row["episode"])
        comps = rewards.reward_components(completion(ep), GOLD)
        for column, key in COMPONENTS.items():
            near(number(row[column]), comps[key], f"episode {ep}, {column}")
        near(number(row["R^T"]), rewards.turn_rewards(completion(ep), GOLD, 2)[0], f"episode {ep}, R^T")
        near(number(row["R^T"]), comps["tool_execution"] + comps["answer_in_results"], f"episode {ep}, R^T")
        near(number(row["R^O"]), rewards.outcome_reward(completion(ep), GOLD), f"episode {ep}, R^O")


def check_statistics(text):
    turn, outcome, _ = episodes(text)
    t, o = torch.tensor(turn, dtype=torch.float64)[0, :, 0], torch.tensor(outcome, dtype=torch.float64)[0]
    values = {"R^T": t, "R^O": o, "R^T + R^O": t + o}
    rows = table(text, "reward", "mean_G", "std_G")
    assert {r["reward"] for r in rows} == set(values)
    for r in rows:
        near(number(r["mean_G"]), values[r["reward"]].mean().item(), f"mean_G {r['reward']}")
        near(number(r["std_G"]), values[r["reward"]].std(unbiased=True).item(), f"std_G {r['reward']}")


def check_advantages(text):
    turn, outcome, order = episodes(text)
    norm_t = mtgrpo.group_norm(torch.tensor(turn, dtype=torch.float64)[..., 0])[0].tolist()
    norm_o = mtgrpo.group_norm(torch.tensor(outcome, dtype=torch.float64))[0].tolist()
    adv = {name: mtgrpo.turn_advantages(turn, outcome, algo)[0].tolist() for name, algo in ALGOS.items()}
    rows = table(text, "episode", "norm(R^T)", "norm(R^O)")
    assert [int(r["episode"]) for r in rows] == order
    for i, r in enumerate(rows):
        near(number(r["norm(R^T)"]), norm_t[i], f"episode {order[i]}, norm(R^T)")
        near(number(r["norm(R^O)"]), norm_o[i], f"episode {order[i]}, norm(R^O)")
        for name in ALGOS:
            for k in (1, 2):
                near(number(r[f"{name} A_{k}"]), adv[name][i][k - 1], f"episode {order[i]}, {name} A_{k}")


def mt_advantages(text, episode):
    turn, outcome, order = episodes(text)
    return mtgrpo.turn_advantages(turn, outcome, "mt")[0, order.index(episode)].tolist()


def check_tokens(text):
    episode = int(re.search(r"Token advantages of episode (\d+) under MT-GRPO", text).group(1))
    rows = table(text, "tokens", "turn k", "advantage", "loss mask")
    turns = [int(r["turn k"]) for r in rows]
    adv, mask = mtgrpo.token_advantages(turns, mt_advantages(text, episode))
    for r, a, m in zip(rows, adv, mask):
        near(number(r["advantage"]), a, f"token advantage of {r['tokens']!r}")
        assert int(r["loss mask"]) == m, f"loss mask of {r['tokens']!r}"
    model_turns = sum(1 for m in completion(episode) if m["role"] == "assistant")
    assert sorted(set(turns) - {0}) == list(range(1, model_turns + 1)), "one span per model turn"


NUM = r"([+−-]?\d+(?:\.\d+)?)"  # a number in a sentence, without the full stop after it


def check_prose(text):
    """The numbers written in sentences under the tables."""
    g = re.search(rf"Episode (\d+) shows the credit: GRPO-OR gives its broken call the same {NUM} .*?"
                  rf"lowers the call turn to {NUM} and leaves the answer turn at {NUM}",
                  text, re.S)
    assert g, "the sentence on the credit of the broken call"
    ep = int(g.group(1))
    turn, outcome, order = episodes(text)
    near(number(g.group(2)), mtgrpo.turn_advantages(turn, outcome, "or")[0, order.index(ep), 0].item(), "OR A_1")
    near(number(g.group(3)), mt_advantages(text, ep)[0], "MT-GRPO A_1")
    near(number(g.group(4)), mt_advantages(text, ep)[1], "MT-GRPO A_2")
    g = re.search(rf"norm\(R\^O\) of episode (\d+)\s+is {NUM}", text)
    ep = int(g.group(1))
    exact = mtgrpo.group_norm(torch.tensor(outcome, dtype=torch.float64))[0, order.index(ep)].item()
    assert abs(number(g.group(2)) - exact) <= 0.00005, f"norm(R^O) of episode {ep} to 4 decimals"
    g = re.search(rf"Episode (\d+) has one model turn: .*?A_1 = {NUM}", text, re.S)
    ep = int(g.group(1))
    assert sum(1 for m in completion(ep) if m["role"] == "assistant") == 1
    near(number(g.group(2)), mt_advantages(text, ep)[0], f"episode {ep}'s A_1")


CHECKS = (check_rewards, check_statistics, check_advantages, check_tokens, check_prose)


# ---------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def text():
    return SHEET.read_text(encoding="utf-8")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_worked_example(text, check):
    check(text)


def test_a_changed_number_fails(text):
    """Each number cell of the first row of each worked-example table, and the prose numbers,
    moved by 0.01: some check fails every time."""
    mutations = []
    lines = text.splitlines()
    for header, rows in tables(text):
        if not any(c in header for c in ("R^T", "mean_G", "norm(R^T)", "turn k")):
            continue
        first = "| " + " | ".join(rows[0]) + " |"
        assert first in lines, first
        for j, cell in enumerate(rows[0]):
            if header[j] in ("episode", "loss mask", "turn k") or not re.fullmatch(r"[+−-]?\d+(\.\d+)?", cell):
                continue
            changed = rows[0][:j] + [f"{number(cell) + 0.01:.3f}"] + rows[0][j + 1:]
            mutations.append(text.replace(first, "| " + " | ".join(changed) + " |", 1))
    for sentence in ("leaves the answer turn at +0.833", "lowers the call turn to +0.152", "A_1 = −1.181"):
        assert sentence in text, sentence
        mutations.append(text.replace(sentence, sentence[:-1] + "9"))
    assert len(mutations) > 20
    for i, changed in enumerate(mutations):
        assert changed != text
        failed = False
        for check in CHECKS:
            try:
                check(changed)
            except (AssertionError, ValueError, AttributeError):  # a wrong number, or one that no longer parses
                failed = True
                break
        assert failed, f"mutation {i} passed every check"


def resolve(path, name):
    module = importlib.import_module(path.replace("/", "."))
    obj = module
    for part in name.split("."):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif dataclasses.is_dataclass(obj) and part in {f.name for f in dataclasses.fields(obj)}:
            return True
        else:
            return False
    return True


def test_every_code_reference_exists(text):
    refs = set(re.findall(r"`([\w/]+)\.py:([\w.]+)`", text))
    assert len(refs) > 30
    missing = [f"{p}.py:{n}" for p, n in sorted(refs) if not resolve(p, n)]
    assert not missing, f"not in the code: {missing}"


def known_flags():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        config.parse_args(["--help"])
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out.getvalue())) - {"--help"}


def parses(argv):
    for extra in ([], ["--env", "planpath"]):
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                config.parse_args(argv + extra)
                return True
            except SystemExit:
                pass
    return False


def test_every_flag_exists_and_its_values_parse(text):
    flags = known_flags()
    used = re.findall(r"`(--[a-z][a-z0-9-]*)((?: [^`]+)?)`", text)
    assert len(used) > 20
    unknown = sorted({f for f, _ in used if f not in flags})
    assert not unknown, f"no such flag in config.py: {unknown}"
    values = {(f, v.strip()) for f, v in used if re.fullmatch(r" [a-z0-9.-]+", v)}  # `--max-calls N` is a symbol
    assert len(values) > 10
    refused = sorted(f"{f} {v}" for f, v in values if not parses([f, v]))
    assert not refused, f"config.parse_args refuses: {refused}"


MODULES = ("config", "atgrpo", "env_search", "env_two_roles", "sample", "mtgrpo", "loss", "rewards")


def lookup(name):
    for m in MODULES:
        obj = getattr(importlib.import_module(m), name, None)
        if obj is not None:
            return obj
    raise AssertionError(f"{name} is in none of {MODULES}")


def test_symbol_table_code_names_exist(text):
    cells = [r["code name"] for r in table(text, "paper", "symbol", "flag", "code name")]
    attrs = [tuple(a.split(".")) for c in cells for a in re.findall(r"`([A-Z]\w*\.\w+)`", c)]
    params = [(p, f) for c in cells for names, f in re.findall(r"((?:`\w+`, )*`\w+`) of `(\w+)`", c)
              for p in re.findall(r"`(\w+)`", names)]
    assert len(attrs) >= 8 and len(params) >= 10
    for cls_name, attr in attrs:
        cls = lookup(cls_name)
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        assert hasattr(cls, attr) or attr in fields or re.search(rf"self\.{attr}\b", inspect.getsource(cls)), \
            f"{cls_name}.{attr}"
    for param, func in params:
        assert param in inspect.signature(lookup(func)).parameters, f"{param} of {func}"


def test_the_sheet_is_one_page_of_well_formed_tables(text):
    assert len(text.splitlines()) < 150
    for header, rows in tables(text):  # a stray | (write \\| in a cell) would shift the columns
        assert all(len(r) == len(header) for r in rows), header
