"""What a task declares, so that every entry point (train.py, config.py, tools/) can run it without
naming it. Each task's own file ends with one `TASK = Task(...)`; tasks.py lists them, by --env.

Two kinds, one per paper:
  "tool"  MT-GRPO's episodes (env_search.py, env_calc.py): G episodes per question, the model may
          call a tool before it answers; the tool-use rows of estimators.py give the advantages
          from the rubric's turn and outcome rewards (rewards.py).
  "game"  AT-GRPO's two-role tasks (env_two_roles.py says what their episodes have): tree sampling
          over levels (a board, a puzzle, a problem) drawn from a seed; the game rows of estimators.py.

A task declares its own flags in its file (`Option`); config.py collects them into its Args, and
every other task refuses them changed.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Option:
    """A flag a task declares in its own file: --name (dashes for underscores), its type, default and
    help (config.py prefixes the tasks that read it), and its check: check(value) is True when the
    value may run (`what` says what it must be), or choices, the values it may take."""
    name: str
    kind: type
    default: object
    help: str
    check: object = None
    what: str = ""
    choices: tuple = ()


@dataclass(frozen=True)
class Task:
    name: str  # --env
    kind: str  # "tool" or "game" (above)
    summary: str  # --env's help: what it is, and its paper
    item: str  # what a step draws and an evaluation counts: "question" or "level"
    table: tuple  # (metric, label): train.py's summary table, tools/compare.py's
    plot: tuple  # the metrics tools/compare.py plots against the step
    each: str  # the evaluation's per-item 0/1 string (tools/compare.py's paired intervals)
    defaults: dict = field(default_factory=dict)  # the flags it sets otherwise than config.Args
    flags: tuple = ()  # config.Args' flags only it reads: another task refuses them changed
    options: tuple = ()  # the flags it declares itself (Option): its own, as `flags`
    progress: tuple = ()  # the metrics the progress bar shows (default: the table's first three)
    check: object = None  # args -> None, or one line on what its flags cannot do together
    prefill: str = "<answer>"  # what starts every model turn (--prefill auto)
    # a tool-use task: its data, its episode, where a turn ends, its rewards
    load: object = None  # args -> (data, training items, test items); items are {"question", "answers"}
    make_env: object = None  # (item, data, args) -> a fresh episode (.messages, .step, .completion, .answers)
    stop_strings: list = None  # a model turn ends at the first of these
    rubric: object = None  # rewards.Rubric: tags, turn and outcome rewards
    # a two-role task: its roles, levels and episodes (env_two_roles.py), and the constant-answer check
    roles: tuple = ()  # the team's roles in the order they act; --policy per-role: one model each
    make_level: object = None  # (seed, args) -> a level; seeds from 10**9 on are the test split's
    make_tasks: object = None  # (seeds, args, levels=None) -> one episode per level
    shorter: str = ""  # what shortens its longest prompt, when the context check refuses it
    constant: object = None  # (levels, args, answers) -> {answer: success}: where a fixed answer means
    # something (the move games: evaluate_games.py), the best success of one answer whatever the level
    # tools/compare.py: runs beside the paper's estimators, and the paired differences it reports
    order: tuple = ()  # its runs in the report's order (default: the kind's paper's estimators)
    pairs: tuple = ()  # (a, b): a − b at the last evaluation, with a bootstrap interval

    def owns(self, flag):
        """Does this task read `flag`, one that some tasks do not?"""
        return flag in self.flags or any(o.name == flag for o in self.options)
