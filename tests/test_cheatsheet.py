"""docs/cheatsheet.md against the code, and as a two-page handout.

The sheet: every number of its worked example recomputed with the project's functions
(mtgrpo.group_norm, turn_advantages, token_advantages; rewards.py on episodes that
env_search.SearchEnv records), every `file.py:name` it cites importable, every `--flag` (and literal
value) accepted by config.parse_args, every `Class.attr` and `param of function` of its symbol table
present, the defaults it says depart from the papers those of config.py and docs/reference-code.md,
and its sentences on α at K = 2, the shared team term and the prefill's free reward true to the code.
A changed number must fail: test_a_changed_number_fails changes each number cell of the example's
first row, one at a time.

The handout (scripts/cheatsheet.py): the sheet's print marks put the formulas and symbols on page 1,
the worked example on page 2, and no code names on paper; with Chromium, the PDF has exactly 2
pages, each part alone 1. No model is loaded."""
import contextlib
import dataclasses
import importlib.util
import inspect
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import config
import env_search
import mtgrpo
import rewards
from atgrpo import Group, tree_advantages
from scripts import cheatsheet as printer

ROOT = Path(__file__).resolve().parent.parent
SHEET = ROOT / "docs" / "cheatsheet.md"
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


# ---------------------------------------------------------------- the tests: the worked example (page 2)
@pytest.fixture(scope="module")
def text():
    return SHEET.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def pages(text):
    """The two printed pages as scripts/cheatsheet.py cuts them: [formulas and symbols, worked example]."""
    return printer.printed_pages(text)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_worked_example(pages, check):
    check(pages[1])  # on page 2 alone: a table moved off it fails


def test_a_changed_number_fails(pages):
    """Each number cell of the first row of each worked-example table, and the prose numbers,
    moved by 0.01: some check fails every time."""
    text = pages[1]
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


# ---------------------------------------------------------------- the tests: names and flags (the whole sheet)
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
    cells = [r["code name"] for r in table(text, "paper", "symbol", "code name")]
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


def test_the_tables_are_well_formed(text):
    for header, rows in tables(text):  # a stray | (write \\| in a cell) would shift the columns
        assert all(len(r) == len(header) for r in rows), header


# ---------------------------------------------------------------- the tests: what goes on paper
def headings(markdown):
    return re.findall(r"^#+ (.+)$", markdown, re.M)


def flat(markdown):
    """The text with its line breaks and runs of spaces as one space: a sentence wraps anywhere."""
    return " ".join(markdown.split())


def test_the_marks_put_formulas_and_symbols_on_page_1_and_the_worked_example_on_page_2(text, pages):
    one, two = pages
    assert headings(one)[1:] == ["Formulas", "Symbols", "Where the defaults depart from the papers"]
    assert [h.split(":")[0] for h in headings(two)] == ["Worked example"]
    screen = text.split(printer.SCREEN_ONLY)[1]
    assert headings(screen)[0] == "Where each formula is in the code"
    assert [h for h, _ in tables(one)] == [["formula", "flag"], ["symbol", "meaning", "flag"]]
    broken = {"no page mark": text.replace(printer.PAGE, ""), "no screen-only mark": text.replace(printer.SCREEN_ONLY, ""),
              "two page marks": text.replace(printer.SCREEN_ONLY, printer.PAGE + "\n" + printer.SCREEN_ONLY),
              "marks swapped": text.replace(printer.PAGE, "\0").replace(printer.SCREEN_ONLY, printer.PAGE).replace("\0", printer.SCREEN_ONLY)}
    for what, sheet in broken.items():
        with pytest.raises(SystemExit):
            printer.printed_pages(sheet)
            pytest.fail(f"{what}: printed_pages took it")


def code_on_paper(pages):
    """What names code on the printed pages: a `file.py:name`, or a table column of code names."""
    return ([m for page in pages for m in re.findall(r"\w+\.py:\w+", page)]
            + [h for page in pages for header, _ in tables(page) for h in header if "code" in h.lower()])


def test_no_code_names_on_paper(pages):
    assert code_on_paper(pages) == []
    one, two = pages
    for old, new in (("| `--algo mt` |", "| `--algo mt` (`mtgrpo.py:turn_advantages`) |"),
                     ("| formula | flag |\n|---|---|", "| formula | flag | code |\n|---|---|---|")):
        assert old in one and code_on_paper([one.replace(old, new), two]), new


ALPHA = "at K = 2, `A_1 = norm(R^T) + α·norm(R^O)`; α = 1, the default, is the paper's form"
TEAM = ("under `--scale-rewards group` it leaves the planner's advantages as its local rewards'; under `batch` "
        "(Sokoban's default) it changes the step's reward std, which rescales every advantage of the step, "
        "the executor's included")


def test_alpha_at_two_turns_as_the_code_computes_it(text, pages):
    """α weighs norm(R^O) in A_1 at K = 2 (turn_advantages, K = 2: A_1 = α^0 norm(R^T) + α^1 norm(R^O));
    the sheet says so on page 1 and nowhere that the K-turn form equals MT-GRPO for any α."""
    assert ALPHA in flat(pages[0])
    assert "equals MT-GRPO at K = 2" not in flat(text) and "any alpha" not in text
    turn, outcome, _ = episodes(pages[1])
    norm_t = mtgrpo.group_norm(torch.tensor(turn, dtype=torch.float64)[..., 0])
    norm_o = mtgrpo.group_norm(torch.tensor(outcome, dtype=torch.float64))
    for alpha in (0.0, 0.5, 1.0, 2.0):
        A = mtgrpo.turn_advantages(turn, outcome, "mt", alpha=alpha)
        assert torch.allclose(A[..., 0], norm_t + alpha * norm_o) and torch.allclose(A[..., 1], norm_o)
    assert torch.allclose(mtgrpo.turn_advantages(turn, outcome, "mt", alpha=1.0),
                          mtgrpo.turn_advantages(turn, outcome, "mt"))  # α = 1 is the default


def test_the_shared_team_term_as_the_code_computes_it(pages):
    """One number added to all K of a planner's group (TwoRoleTask.team_share): group scaling gives the
    planner the advantages of its local rewards; batch scaling divides every group of the step, the
    executor's too, by the new std (a larger one in this example)."""
    assert TEAM in flat(pages[0])
    planner = Group(("level 0", "planner", 1), [None] * 4, [0.99, -0.10, -1.01, 0.99], 0)
    executor = Group(("level 0", "executor", 1), [None] * 4, [1.99, -0.10, -2.01, 1.99], 0)
    shared = Group(planner.key, planner.candidates, [r + 1.99 for r in planner.rewards], 0)  # the executor's α·r^team
    local, both = tree_advantages([planner, executor], "group"), tree_advantages([shared, executor], "group")
    assert sum(local, []) == pytest.approx(sum(both, []))
    local, both = tree_advantages([planner, executor], "batch"), tree_advantages([shared, executor], "batch")
    rewards_std = lambda *groups: torch.tensor([g.rewards for g in groups]).std().item()
    assert rewards_std(shared, executor) > rewards_std(planner, executor)
    assert both[1] != pytest.approx(local[1])  # the executor's advantages change
    ratio = (rewards_std(planner, executor) + mtgrpo.EPS) / (rewards_std(shared, executor) + mtgrpo.EPS)
    assert sum(both, []) == pytest.approx([a * ratio for a in sum(local, [])], rel=1e-5)  # every one rescaled alike


def test_the_prefills_free_reward(pages):
    """The free share of R^O, recomputed: turns whose own text holds no tag, with and without the prefill."""
    g = re.search(r"R\^O = ([\d.]+): \"spacing\" ([\d.]+) \(any turn\), and from the prefill `<reasoning>` ([\d.]+) of "
                  r"XML format \(the turn starts with it\) and ([\d.]+) of tag usage", flat(pages[0]))
    assert g, "the formulas' sentence on the prefill"
    total, spacing, start, tag = map(float, g.groups())
    own = ["I should look this up.", "It is the Seine."]  # two model turns' own text: no tag

    def episode(prefill):
        return [{"role": "user", "content": "Which river flows through Paris?"},
                {"role": "assistant", "content": prefill + own[0]}, {"role": "user", "content": "Error: no call"},
                {"role": "assistant", "content": prefill + own[1]}]
    with_it, without = episode("<reasoning>"), episode("")
    near(total, rewards.outcome_reward(with_it, GOLD), "R^O of tagless turns after the prefill")
    near(spacing, rewards.xml_format_reward(without, GOLD), "XML format of tagless turns, no prefill")
    near(start, rewards.xml_format_reward(with_it, GOLD) - rewards.xml_format_reward(without, GOLD), "the prefill's XML format")
    near(tag, rewards.xml_tag_usage_reward(with_it, GOLD) - rewards.xml_tag_usage_reward(without, GOLD), "the prefill's tag usage")
    near(total, start + tag + spacing, "the free share's parts")


def reference_defaults():
    """docs/reference-code.md's hyper-parameter table: row -> (the reference's first number, ours)."""
    ref = (ROOT / "docs" / "reference-code.md").read_text(encoding="utf-8")
    first = lambda cell: float(re.match(r"[\d.e-]+", cell).group(0)) if re.match(r"\d", cell) else None
    return {r[""]: (first(r[h]), first(r["this code's CPU defaults"]))
            for r in table(ref, "", "this code's CPU defaults") for h in r if h.startswith("reference")}


def test_the_departures_are_the_defaults(pages):
    """Each value of "Where the defaults depart from the papers" against config.py (search and Sokoban
    defaults) and the reference's values against docs/reference-code.md."""
    block = flat(pages[0].split("## Where the defaults depart from the papers")[1])
    search, sokoban = config.parse_args([]), config.parse_args(["--env", "sokoban"])
    ref = reference_defaults()
    assert "one token mean over the step (`--loss-type token`" in block and search.loss_type == "token"
    g = re.search(r"μ = (\d+) \(`--num-iterations (\d+)`\).*? trains with μ = (\d+)", block)
    assert int(g[1]) == int(g[2]) == search.num_iterations and (float(g[3]), float(g[1])) == ref["μ (num_iterations)"]
    g = re.search(r"β = ([\d.]+) \(`--beta ([\d.]+)`\): no reference model", block)
    assert float(g[1]) == float(g[2]) == search.beta and (0.0, search.beta) == ref["β"]
    assert "prefill `<reasoning>` (`--prefill`)" in block and search.prefill == "<reasoning>"
    assert "(`--one-shot true`)" in block and search.one_shot is True
    g = re.search(r"G = (\S+) \(the MT-GRPO reference: (\S+)\), lr (\S+) \((\S+)\), temperature (\S+) \((\S+)\), "
                  r"max grad norm (\S+) \(([\d.]+)\)", block)
    for i, (field, row) in enumerate([("num_generations", "G (num_generations)"), ("learning_rate", "learning rate"),
                                      ("temperature", "temperature"), ("max_grad_norm", "max grad norm")]):
        ours, theirs = float(g[2 * i + 1]), float(g[2 * i + 2])
        assert ours == getattr(search, field) and (theirs, ours) == ref[row], field
    assert "(`--team-term own`;" in block and search.team_term == sokoban.team_term == "own"
    assert "Sokoban divides by the step's std (`--scale-rewards batch`), the paper by the group's" in block
    assert sokoban.scale_rewards == "batch"


def test_the_printer_says_what_to_install(tmp_path, monkeypatch, pages):
    """Without mistune or without chromium, scripts/cheatsheet.py stops with one line naming the install."""
    monkeypatch.setitem(sys.modules, "mistune", None)  # import mistune raises ImportError
    with pytest.raises(SystemExit, match=r"^scripts/cheatsheet.py needs mistune: .*requirements-notebook.txt[^\n]*$"):
        printer.to_html(pages)
    monkeypatch.setattr(printer.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match=r"^scripts/cheatsheet.py needs chromium: apt-get install -y chromium[^\n]*$"):
        printer.print_pdf(str(tmp_path / "sheet.html"), str(tmp_path / "sheet.pdf"))


# ---------------------------------------------------------------- the tests: the handout, printed by Chromium
def mediabox(pdf):
    """The first page's (width, height) in points."""
    box = re.search(rb"/MediaBox\s*\[\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", pdf)
    return float(box[3]) - float(box[1]), float(box[4]) - float(box[2])


def headings_by_page(pdf):
    """The PDF's bookmarks (Chromium's --generate-pdf-document-outline: one per heading), as a list
    of pages, each the titles whose destination is on it, top to bottom. Titles here are ASCII: (...)
    strings; a destination is [page /XYZ x y zoom], y from the bottom of the page."""
    kids = re.search(rb"/Type /Pages\s*/Count \d+\s*/Kids \[([^\]]*)\]", pdf)
    order = [int(n) for n in re.findall(rb"(\d+) 0 R", kids[1])]
    pages = [[] for _ in order]
    for title, page, y in re.findall(rb"/Title \(((?:\\.|[^\\)])*)\)\s*/Dest \[(\d+) 0 R /XYZ [\d.]+ ([\d.]+)", pdf):
        pages[order.index(int(page))].append((-float(y), re.sub(rb"\\(.)", rb"\1", title).decode()))
    return [[title for _, title in sorted(page)] for page in pages]


@pytest.mark.chromium
@pytest.mark.skipif(importlib.util.find_spec("mistune") is None, reason="needs mistune (requirements-notebook.txt)")
def test_the_handout_is_two_pages_formulas_then_worked_example(tmp_path):
    """scripts/cheatsheet.py on A4 and on Letter: 2 portrait pages (/Type /Page objects), the formulas,
    symbols and departures' headings on page 1, the worked example's on page 2. A page 1 too long
    for its sheet would print a third page: the worked example starts a new sheet."""
    for paper, size in (("a4", (595.3, 841.9)), ("letter", (612.0, 792.0))):
        out = tmp_path / f"sheet-{paper}.pdf"
        run = subprocess.run([sys.executable, str(ROOT / "scripts" / "cheatsheet.py"), str(out), "--paper", paper],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        assert printer.page_count(out) == 2 and f"{out}: 2 pages" in run.stdout
        pdf = out.read_bytes()
        assert mediabox(pdf) == pytest.approx(size, abs=1.5), paper
        one, two = headings_by_page(pdf)
        assert one[0].startswith("Cheat sheet") and one[1:] == ["Formulas", "Symbols", "Where the defaults depart from the papers"], (paper, one)
        assert [h.split(":")[0] for h in two] == ["Worked example"], (paper, two)
