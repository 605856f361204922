"""The AT-GRPO paper's two-role Sokoban workflow as text ("Stronger Together: On-Policy RL for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1): each turn a planner proposes moves,
which are tried on a copy of the board, and an executor, who sees the result, plays the moves on
the real board. The game itself (board, rules, step rewards, solver, levels) is sokoban.py; the
two-role workflow (turn order, the proposal on a copy, the prompts) is env_two_roles.py, and the
answers of moves moves.py, which both move games share. This file holds only what is Sokoban's: the team reward, the rules and the board
as the model sees them (SokobanTask), and the levels from the flags. Read top to bottom.

An agent's reward is local + alpha * team (the paper's): local is the summed step rewards of its
moves (sokoban.step_reward). The team reward is ours (see docs/sokoban.md): progress over a turn,
with team="solver" (the default) the drop in the optimal number of moves left (the solver's), with
team="distance" the drop in D, the box-goal distance; +10 when the turn solves the level.
"""
import env_two_roles
import moves
import sokoban
from moves import MoveTask
from task import Option, Task

FORMAT_PENALTY = -2.0  # an answer with no readable moves, as the paper's code: below any move's
# reward, else (at -0.1) a group that holds wrong moves (about -1 each) teaches answering nothing


# ---------------------------------------------------------------- the team reward
def team_reward(before, after, team="solver"):
    """The team's progress over one turn, +10 if now solved. team="solver": optimal moves left
    before - after (a turn that makes the level unsolvable: -10); "distance": D before - after."""
    bonus = sokoban.SOLVE_REWARD if sokoban.is_solved(after) and not sokoban.is_solved(before) else 0.0
    if team == "distance":
        return sokoban.box_distance(before) - sokoban.box_distance(after) + bonus
    left_before, left_after = sokoban.moves_left(before), sokoban.moves_left(after)
    if left_after is None:
        return 0.0 if left_before is None else -sokoban.SOLVE_REWARD
    return (left_before or 0) - left_after + bonus


# ---------------------------------------------------------------- the board as the model sees it
RULES = ("Sokoban: push every box onto a goal.\n"
         "Symbols: # wall, _ floor, . goal, $ box, * box on a goal, @ you, + you on a goal.\n"
         "Moves: U up, D down, L left, R right. Walking into a box pushes it one cell. A box "
         "cannot be pushed into a wall or another box, and boxes can never be pulled. A blocked "
         "move does nothing. A box pushed into a corner off the goals is stuck for good.\n")


def positions(state):
    """The board as coordinates: "Positions (row, column): you (4, 4), boxes (4, 3), goals (3, 3)."."""
    where = lambda cells: " ".join(f"({r}, {c})" for r, c in sorted(cells))
    return (f"Positions (row, column): you {where([state.player])}, boxes {where(state.boxes)}, "
            f"goals {where(state.goals)}.")


class SokobanTask(MoveTask):
    """Sokoban in env_two_roles.TwoRoleTask's workflow, answering moves (moves.MoveTask). Local
    reward: the summed step rewards of an answer's moves (sokoban.step_reward); team reward: team_reward of kind `team`. The user
    prompt shows the board, with positions=True its coordinates, and its status line."""

    NOUN, RULES, FORMAT_PENALTY, DISTANCE = "board", RULES, FORMAT_PENALTY, "box_distance"

    def __init__(self, level, max_turns=4, alpha=1.0, planner=True, moves_per_turn=1, team="solver",
                 positions=False, team_term="own"):
        super().__init__(level, max_turns, alpha, planner, moves_per_turn, positions, team_term)
        self.team = team

    @property
    def solved(self):
        return sokoban.is_solved(self.state)

    def view(self):
        return [sokoban.board_text(self.state), positions(self.state) if self.positions else "",
                sokoban.status(self.state) + "."]

    def board(self, state):
        return sokoban.board_text(state)

    def play(self, moves):
        return sokoban.play(self.state, moves)

    def team_reward(self, before, after):
        return team_reward(before, after, self.team)

    def progress(self, before, after, blocked):
        return f"{sokoban.status(after, before)}, blocked moves: {blocked}."

    def distance_left(self):
        return sokoban.box_distance(self.state)


# ---------------------------------------------------------------- levels from the flags
TEAM_REWARDS = ("solver", "distance")  # --team-reward (team_reward above)
OPTIONS = (*env_two_roles.OPTIONS, *moves.OPTIONS,  # Sokoban's own flags besides those it shares
           Option("boxes", int, 1, "boxes per level", lambda v: v >= 1, "at least 1"),
           Option("reverse_steps", int, 10, "moves of reverse play from the solved state", lambda v: v >= 1, "at least 1"),
           Option("team_reward", str, "solver", "team progress = drop in optimal moves left (solver) or in box-goal "
                  "distance", choices=TEAM_REWARDS))


def make_level(seed, args):
    """A seeded level with the curriculum knobs (room size, boxes, reverse steps, solution length)."""
    return sokoban.level_for(seed, args.size, args.boxes, args.reverse_steps,
                             solution=(args.min_solution, args.max_solution or None))


def make_tasks(seeds, args, levels=None):
    """One SokobanTask per seed (or per level given), with the task's knobs (turns, moves per
    turn, team reward)."""
    levels = levels or [make_level(s, args) for s in seeds]
    return [SokobanTask(level, args.max_turns, args.team_alpha, not args.single_agent,
                        args.moves_per_turn, args.team_reward, args.positions, getattr(args, "team_term", "own"))
            for level in levels]


# the setup of docs/results-sokoban.md
TASK = Task("sokoban", "game", "Sokoban, planner + executor (AT-GRPO paper)", "level",
            table=env_two_roles.table("box_distance", "box-goal distance (cells)"), plot=env_two_roles.PLOT,
            each="success_each", defaults=env_two_roles.DEFAULTS, options=OPTIONS,
            check=lambda args: env_two_roles.check(args) or moves.check(args), stop_strings=env_two_roles.STOP_STRINGS,
            roles=env_two_roles.ROLES, shorter=moves.SHORTER, make_level=make_level, make_tasks=make_tasks, constant=moves.constant(sokoban.solves))
