"""The committed lesson notebook carries the outputs of one top-to-bottom run (CI executes it
again headless, .ci/run); this checks the file itself, without a kernel."""
import json
import os

NOTEBOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "notebooks", "lesson.ipynb")


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def problems(nb):
    """What shows the notebook was not committed straight from one clean run, or []."""
    cells, found = code_cells(nb), []
    counts = [c.get("execution_count") for c in cells]
    if counts != list(range(1, len(cells) + 1)):
        found.append(f"execution counts {counts}, not 1..{len(cells)}: run it top to bottom in a fresh kernel")
    for i, c in enumerate(cells):
        if any(o.get("output_type") == "error" for o in c.get("outputs", [])):
            found.append(f"code cell {i} holds an error")
    silent = [i for i, c in enumerate(cells[2:], 2) if not c.get("outputs")]  # setup cells 0-1 print little
    if silent:
        found.append(f"code cells {silent} have no output")
    return found


def test_the_committed_notebook_holds_one_clean_run():
    with open(NOTEBOOK, encoding="utf-8") as f:
        nb = json.load(f)
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert problems(nb) == []


def test_the_check_sees_an_unexecuted_or_failed_notebook():
    with open(NOTEBOOK, encoding="utf-8") as f:
        nb = json.load(f)
    cells = code_cells(nb)
    cells[3]["outputs"] = [{"output_type": "error", "ename": "KeyError", "evalue": "x", "traceback": []}]
    cells[4]["execution_count"], cells[5]["outputs"] = None, []
    found = problems(nb)
    assert len(found) == 3 and "code cell 3 holds an error" in found and "no output" in found[2]
