"""The task table: every task, by its --env name. Each is declared at the end of its own file (a
task.Task); train.py, config.py and tools/ read this table, and no other file names a task
(tests/test_tasks.py checks it). Adding a task is its file, and here its import and its entry.
"""
import env_calc
import env_code
import env_math
import env_planpath
import env_search
import env_sokoban
import env_sudoku

TASKS = {t.name: t for t in (env_search.TASK, env_calc.TASK, env_sokoban.TASK, env_sudoku.TASK, env_planpath.TASK,
                             env_math.TASK, env_code.TASK)}
KINDS = ("tool", "game")  # task.py: MT-GRPO's tool-use episodes, AT-GRPO's games


def names(kind=None):
    """The tasks' names in the table's order, of one kind if given."""
    return tuple(n for n, t in TASKS.items() if kind is None or t.kind == kind)


def owners(flag):
    """The tasks that read a task's own flag (task.Task.owns), as "a or b"."""
    return " or ".join(n for n, t in TASKS.items() if t.owns(flag))


def options():
    """Every task's own flags (task.Option), each once, in the table's order. Tasks that share a
    flag share its Option (env_two_roles.py's, say): two different ones of one name are refused."""
    found = {}
    for t in TASKS.values():
        for o in t.options:
            if found.setdefault(o.name, o) != o:
                raise ValueError(f"--{o.name.replace('_', '-')}: two tasks declare it differently; share one task.Option")
    return tuple(found.values())
