"""What a task declares, so that every entry point (train.py, config.py, tools/) can run it without
naming it. Each task's own file ends with one `TASK = Task(...)`; tasks.py lists them, by --env.

Two kinds, one per paper:
  "tool"  MT-GRPO's episodes (env_search.py, env_calc.py): G episodes per question, the model may
          call a tool before it answers; the tool-use rows of estimators.py give the advantages
          from the rubric's turn and outcome rewards (rewards.py).
  "game"  AT-GRPO's two roles on a board (env_sokoban.py, env_planpath.py, env_two_roles.py):
          tree sampling over levels drawn from a seed; the game rows of estimators.py.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Task:
    name: str  # --env
    kind: str  # "tool" or "game" (above)
    summary: str  # --env's help: what it is, and its paper
    item: str  # what a step draws and an evaluation counts: "question" or "level"
    table: tuple  # (metric, label): train.py's summary table, tools/compare.py's; the first three on the progress bar
    plot: tuple  # the metrics tools/compare.py plots against the step
    each: str  # the evaluation's per-item 0/1 string (tools/compare.py's paired intervals)
    defaults: dict = field(default_factory=dict)  # the flags it sets otherwise than config.Args
    flags: tuple = ()  # the flags only it reads: another task refuses them changed
    prefill: str = "<answer>"  # what starts every model turn (--prefill auto)
    # a tool-use task: its data, its episode, where a turn ends, its rewards
    load: object = None  # args -> (data, training items, test items); items are {"question", "answers"}
    make_env: object = None  # (item, data, args) -> a fresh episode (.messages, .step, .completion, .answers)
    stop_strings: list = None  # a model turn ends at the first of these
    rubric: object = None  # rewards.Rubric: tags, turn and outcome rewards
    # a game: its levels and its tasks (evaluate_games.py)
    make_level: object = None  # (seed, args) -> a level
    make_tasks: object = None  # (seeds, args, levels=None) -> one two-role task per level
    solves: object = None  # (level, moves) -> True when the moves solve it
    # tools/compare.py: runs beside the paper's estimators, and the paired differences it reports
    order: tuple = ()  # its runs in the report's order (default: the kind's paper's estimators)
    pairs: tuple = ()  # (a, b): a − b at the last evaluation, with a bootstrap interval
