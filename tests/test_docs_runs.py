"""docs/runs/ holds the args and logs of every run a page cites, and nothing else: every folder in
it is cited by a page, and every run path a page cites is there.

What counts as citing docs/runs (decided from how the pages write it):
  - a markdown link whose target, resolved from the page's own folder, lies under docs/runs/:
    `[report](runs/search-seeds/results.md)` in docs/*.md, `[logs](docs/runs/quick/)` in README.md;
  - the text `docs/runs/NAME...` anywhere in a page, in backticks or in a command
    (`--from docs/runs/credit/*.json`, `--out docs/runs/search-seeds --report-only`): a path from
    the project root, and docs/runs/ holds only the committed runs.
A bare `runs/NAME` outside a link is not a citation: it is the reader's own run folder in a
command (`train.py --out runs/quick`, `--model runs/pp/checkpoint`), which docs/runs/ need not hold.
A glob (`docs/runs/credit/*.json`) must match at least one file; a wildcard folder name cites no
folder in particular. A page inside docs/runs/NAME/ (a run's own report) does not cite NAME.
"""
import glob
import os
import posixpath
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = "docs/runs"  # paths below are "/"-separated, as the pages write them
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")  # a markdown link's target
TEXT = re.compile(r"(?<![\w./-])docs/runs/[\w.*/-]*")  # docs/runs/... written out, from the root


def pages(deep):
    """README.md and docs/*.md, and with `deep` every markdown page under docs/, from the root."""
    found = glob.glob(os.path.join(ROOT, "docs", "**" if deep else "", "*.md"), recursive=deep)
    return ["README.md", *sorted(os.path.relpath(p, ROOT).replace(os.sep, "/") for p in found)]


def citations(page):
    """(line number, path from the root) of every docs/runs/... path the page cites."""
    out = []
    for number, line in enumerate(open(os.path.join(ROOT, page), encoding="utf-8"), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:|#", target):  # a URL or an anchor on the page
                continue
            target = target.split("#")[0]
            path = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
            if path.startswith(RUNS + "/"):
                out.append((number, path + ("/" if target.endswith("/") else "")))
        out += [(number, m.rstrip(".,")) for m in TEXT.findall(line)]
    return [(n, p) for n, p in out if p.rstrip("/") != RUNS]


def run_name(path):
    return path[len(RUNS) + 1:].split("/")[0]


def test_every_docs_runs_folder_is_cited():
    cited = set()
    for page in pages(deep=True):
        for _, path in citations(page):
            name = run_name(path)
            if not glob.has_magic(name) and not page.startswith(f"{RUNS}/{name}/"):
                cited.add(name)
    folders = sorted(os.listdir(os.path.join(ROOT, RUNS)))
    uncited = [name for name in folders if name not in cited]
    assert not uncited, (f"{len(uncited)} of {len(folders)} folders in docs/runs/ are cited by no page "
                         "(a link into it, or `docs/runs/NAME`): " + ", ".join(uncited))


def test_every_cited_run_path_exists():
    missing = []
    for page in pages(deep=False):
        for number, path in citations(page):
            full = os.path.join(ROOT, path)
            if glob.has_magic(path):
                ok = bool(glob.glob(full))
            else:
                ok = os.path.isdir(full) if path.endswith("/") else os.path.exists(full)
            if not ok:
                missing.append(f"{page}:{number}: {path}")
    assert not missing, "cited but not in docs/runs/:\n  " + "\n  ".join(missing)
