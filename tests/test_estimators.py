"""estimators.py, the one table of estimators: every entry point reads it, no other module lists
estimator names, and every search row computes advantages in mtgrpo.py's layout."""
import ast
import pathlib

import pytest
import torch

import config
import estimators
import mtgrpo
from tools import compare, credit_figures

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMES = {e.name for e in estimators.TABLE}


def listed_names(path):
    """(line, names) of every literal in the file that lists estimator names: a dict with two or more
    of them as keys, or a tuple, list or set holding three or more."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in NAMES}
            if len(keys) >= 2:
                found.append((node.lineno, sorted(keys)))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in NAMES}
            if len(items) >= 3:
                found.append((node.lineno, sorted(items)))
    return found


def test_no_module_but_the_table_lists_estimator_names(tmp_path):
    """Forgetting one list was a KeyError after the model loaded: now there is one list."""
    (tmp_path / "old.py").write_text('NAMES = {"mt": "MT-GRPO", "mr": "GRPO-MR"}\nORDER = ("or", "mr", "mt")\n'
                                     'PAIR = ("mt", "or")\n')
    assert listed_names(tmp_path / "old.py") == [(1, ["mr", "mt"]), (2, ["mr", "mt", "or"])]  # the check sees lists
    files = [p for d in ("", "machinery", "tools", "fast", "speedlab", "scripts", "exercises")
             for p in sorted((ROOT / d).glob("*.py")) if p.name != "estimators.py"]
    assert len(files) > 40
    listed = {str(p.relative_to(ROOT)): found for p in files if (found := listed_names(p))}
    assert not listed, f"estimator names listed outside estimators.py: {listed}"


def test_the_entry_points_take_their_names_from_the_table():
    for env, kind in (("search", "tool"), ("sokoban", "game"), ("planpath", "game")):
        assert config.ALGOS[env] == estimators.names(kind)
    assert config.parse_args([]).algo == "mt" and config.parse_args(["--env", "planpath"]).algo == "at"
    assert credit_figures.ESTIMATORS["search"] == estimators.names("tool", trainable=False)  # mt_half measured, not trained
    assert "mt_half" in credit_figures.ESTIMATORS["search"] and "mt_half" not in config.ALGOS["search"]
    assert credit_figures.NAMES["at"] == "AT-GRPO (tree)" and credit_figures.NAMES["gigpo"] == "GiGPO"
    assert compare.ORDER["search"] == ("or", "mr", "mt") and compare.ORDER["planpath"] == ("grpo-solo", "grpo", "at", "at-roles")
    for name in estimators.names("tool"):  # every trainable tool-use estimator parses, and names its source
        assert config.parse_args(["--algo", name]).algo == name and estimators.BY_NAME[name].source
    assert estimators.label("mt") == "MT-GRPO" and estimators.label("nope") == "nope"


@pytest.mark.parametrize("name", estimators.names("tool", trainable=False))
def test_every_search_row_gives_per_turn_advantages(name):
    """Shape (groups, G, K); 0 on a turn an episode did not play for the field's; equal rewards give
    no group-relative credit."""
    R_T = torch.tensor([[[0.7, 0.2], [0.2, 0.0], [0.0, 0.0]], [[0.2, 0.0], [0.2, 0.0], [0.2, 0.0]]])
    R_O = torch.tensor([[1.0, 0.5, 0.0], [1.0, 1.0, 1.0]])
    turns = torch.tensor([[3, 2, 1], [2, 2, 2]])
    inputs = {"states": torch.tensor([[[0, 1, 2], [0, 1, -1], [0, -1, -1]], [[0, 1, -1]] * 3]),
              "info_gain": R_T / 2, "values": torch.tensor([[[0.5, 0.2, 0.1]] * 3] * 2),
              "tokens": torch.tensor([[[3, 4, 5]] * 3] * 2)}  # what field.inputs makes of episodes, for the rows that need it
    A = estimators.BY_NAME[name].fn(R_T, R_O, turns, 1.0, "group", **{n: inputs[n] for n in estimators.BY_NAME[name].needs})
    assert A.shape == (2, 3, 3) and torch.isfinite(A).all()
    if estimators.BY_NAME[name].paper != "MT-GRPO" and name != "igpo":  # igpo: MT-GRPO's form, A_k on every k
        # (the rule estimators.py states: 0 on a turn an episode did not play)
        assert A[0, 2, 1:].tolist() == [0.0, 0.0] and A[0, 1, 2].item() == 0.0


def test_the_paper_rows_are_mtgrpo_s():
    R_T, R_O = torch.tensor([[[0.7, 0.2], [0.2, 0.0], [0.0, 0.0]]]), torch.tensor([[1.0, 0.5, 0.0]])
    turns = torch.tensor([[3, 2, 1]])
    for name in ("or", "mr", "mt"):
        assert torch.equal(estimators.BY_NAME[name].fn(R_T, R_O, turns, 0.7, "group"),
                           mtgrpo.turn_advantages(R_T, R_O, name, 0.7, "group"))
    assert torch.equal(estimators.BY_NAME["mt_half"].fn(R_T, R_O, turns, 1.0, "group"),
                       mtgrpo.turn_advantages(R_T, R_O, "mt", 0.5, "group"))


THROWAWAY = '''
import estimators, mtgrpo
row = estimators.Estimator("throwaway", "Throwaway", "half of GRPO-OR's advantage", "field", "tool", "episodes",
                           "a test's row", lambda R_T, R_O, turns, alpha, scale: 0.5 * mtgrpo.turn_advantages(R_T, R_O, "or", alpha, scale))
estimators.TABLE += (row,)
estimators.BY_NAME[row.name] = row
'''


def test_a_throwaway_row_goes_through_every_door_with_no_other_edit(tmp_path, tiny_model_dir):
    """A row added to the table before any other module loads (sitecustomize: what an edit of
    estimators.py alone would be) trains, is compared, shown, and re-scored from a committed credit
    file with a paired interval against MT-GRPO: its function, its row and this test, nothing else."""
    import json
    import os
    import subprocess
    import sys
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(THROWAWAY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    tiny = ["--model", tiny_model_dir, "--batch-size", "1", "--num-generations", "2", "--max-completion-length", "6",
            "--eval-every", "0", "--micro-batch-size", "2", "--bf16", "false", "--steps", "1"]

    def run(*argv):
        done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout
    run("train.py", "--algo", "throwaway", "--out", str(tmp_path / "run"), *tiny)
    line = [json.loads(x) for x in open(tmp_path / "run" / "log.jsonl")][-1]
    assert line["step"] == 1 and "loss" in line
    run("tools/show.py", str(tmp_path / "run"))
    assert "Throwaway" in run("tools/compare.py", "--env", "search", "--out", str(tmp_path / "cmp"), "--algos", "throwaway",
                              "--", *tiny)
    source = ROOT / "docs" / "runs" / "credit" / "search-step0-field-bf16.json"
    report = run("tools/credit.py", "--from", str(source), "--pair", "throwaway,mt", "--bootstrap", "10")
    assert "| Throwaway |" in report and "Pearson Throwaway − MT-GRPO:" in report
