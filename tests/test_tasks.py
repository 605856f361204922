"""tasks.py, the one table of tasks: each task's file declares it, every entry point reads it, and no
module outside the task files names a task (a new task is its file and its line in the table)."""
import ast
import re
import pathlib

import pytest

import config
import estimators
import rewards
import tasks

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the files a task is made of: its env_ file (the games share env_two_roles.py's workflow)
TASK_FILES = {f"env_{n}.py" for n in tasks.TASKS} | {"env_two_roles.py"}
# measurements of one named task's workload, by design (their own docstrings say which)
MEASUREMENTS = ("speedlab", "scripts")


def names_of_tasks(path):
    """(line, what) of every place in the file that names a task: a string that is a task's name, or
    an import of a task's env_ file. config.py's default --env is the one name allowed."""
    found, tree = [], ast.parse(path.read_text())
    modules = {f"env_{n}" for n in tasks.TASKS}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in tasks.TASKS:
            found.append((node.lineno, repr(node.value)))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name in modules]
        elif isinstance(node, ast.ImportFrom) and node.module in modules:
            found.append((node.lineno, node.module))
    if path.name == "config.py":  # env: str = flag("search", ...): the default
        found = [f for f in found if f != (next(n.lineno for n in ast.walk(tree) if isinstance(n, ast.AnnAssign)
                                                    and n.target.id == "env"), repr(config.Args.env))]
    return found


def test_no_module_outside_the_task_files_names_a_task(tmp_path):
    (tmp_path / "old.py").write_text('import env_search\nif args.env == "search":\n    pass\nGAMES = ("sokoban",)\n')
    assert names_of_tasks(tmp_path / "old.py") == [(1, "env_search"), (2, "'search'"), (4, "'sokoban'")]
    files = [p for d in ("", "machinery", "tools", "fast", "exercises") for p in sorted((ROOT / d).glob("*.py"))
             if p.name not in TASK_FILES | {"tasks.py"}]
    assert len(files) > 40 and not any(str(p.relative_to(ROOT)).startswith(MEASUREMENTS) for p in files)
    named = {str(p.relative_to(ROOT)): found for p in files if (found := names_of_tasks(p))}
    assert not named, f"task names outside the task files: {named}"


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_every_task_declares_what_the_entry_points_read(name):
    task = tasks.TASKS[name]
    assert task.name == name and task.kind in tasks.KINDS and task.item in ("question", "level")
    assert config.ALGOS[name] == estimators.names(task.kind) and estimators.DEFAULT[task.kind] in config.ALGOS[name]
    assert len(task.table) >= 3 and set(task.plot) <= {k for k, _ in task.table} | {"reward"}
    assert all(flag in config.Args.__dataclass_fields__ for flag in (*task.flags, *task.defaults))
    assert all(k in {k for k, _ in task.table} for k in task.progress)
    assert {a for pair in task.pairs for a in pair} <= set(task.order or config.ALGOS[name])
    if task.kind == "tool":  # its data, its episode, where a turn ends, its rewards
        assert callable(task.load) and callable(task.make_env) and task.stop_strings
        assert isinstance(task.rubric, rewards.Rubric) and task.each == "exact_match_each"
        assert {k.removesuffix("_rate") for k, _ in task.table[1:]} <= set(task.rubric.maxima)
        assert f"</{task.rubric.tags.call}>" in task.stop_strings and f"</{task.rubric.tags.answer}>" in task.stop_strings
    else:
        assert callable(task.make_level) and callable(task.make_tasks) and task.roles and task.stop_strings
        assert task.constant is None or callable(task.constant)
    parsed = config.parse_args(["--env", name])
    assert parsed.prefill == task.prefill and all(getattr(parsed, k) == v for k, v in task.defaults.items())


def test_a_flag_of_another_task_is_refused_in_one_line(capsys):
    for argv, said in ((["--env", "sokoban", "--top-k", "3"], "--top-k 3 needs --env search (--env sokoban does not read it)"),
                       (["--env", "planpath", "--max-calls", "2"], "--max-calls 2 needs --env search"),
                       (["--boxes", "2"], "--boxes 2 needs --env sokoban (--env search does not read it)")):
        with pytest.raises(SystemExit):
            config.parse_args(argv)
        assert said in capsys.readouterr().err.strip().splitlines()[-1]


# what only a game's own files may say: its rules' words and its modules (moves.py: the move games')
GAME_MODULES = {"sokoban", "planpath", "sudoku", "moves"}
GAME_WORDS = re.compile(r"sokoban|plan-?path|sudoku|UDLR|U/D/L/R|U, D, L|<answer>[UDLR][ <]", re.IGNORECASE)


def game_words_in(path):
    """(line, what) of every import of a game's module and every string in the code (docstrings
    aside: they may name examples) that names a game or spells its moves."""
    found, tree = [], ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(
        n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body and isinstance(n.body[0], ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found += [(node.lineno, m.group()) for m in GAME_WORDS.finditer(node.value)]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name in GAME_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module in GAME_MODULES:
            found.append((node.lineno, node.module))
    return found


def test_no_shared_module_spells_a_games_moves_or_names_it(tmp_path):
    (tmp_path / "old.py").write_text('"""Sokoban."""\nimport sokoban\nfrom moves import parse_moves\n'
                                     'FORMAT = "U, D, L or R"\nEXAMPLE = "<answer>U</answer>"\nHELP = "plan-path"\n')
    assert game_words_in(tmp_path / "old.py") == [(2, "sokoban"), (3, "moves"), (4, "U, D, L"), (5, "<answer>U<"),
                                                  (6, "plan-path")]
    own = {f"env_{n}.py" for n in tasks.TASKS} | {f"{m}.py" for m in GAME_MODULES} | {"tasks.py"}
    files = [p for d in ("", "machinery", "tools", "fast") for p in sorted((ROOT / d).glob("*.py")) if p.name not in own]
    assert {"env_two_roles.py", "evaluate_games.py", "atgrpo.py", "config.py", "train.py"} <= {p.name for p in files}
    named = {str(p.relative_to(ROOT)): found for p in files if (found := game_words_in(p))}
    assert not named, f"a game's words outside its files: {named}"
