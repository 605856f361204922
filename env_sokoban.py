"""The AT-GRPO paper's two-role Sokoban workflow as text ("Stronger Together: On-Policy RL for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062): each turn a planner proposes moves,
which are tried on a copy of the board, and an executor, who sees the result, plays the moves on
the real board. The game itself (board, rules, step rewards, solver, levels) is sokoban.py. Read
top to bottom: the team reward, reading the model's answer, the prompts, SokobanTask; then what
training needs around it (levels from the flags, episode metrics, the evaluation's checks).

An agent's reward is local + alpha * team (the paper's): local is the summed step rewards of its
moves (sokoban.step_reward). The team reward is ours (see docs/sokoban.md): progress over a turn,
with team="solver" (the default) the drop in the optimal number of moves left (the solver's), with
team="distance" the drop in D, the box-goal distance; +10 when the turn solves the level.
"""
import copy
import re
import sys
from collections import Counter

import atgrpo
import sokoban

FORMAT_PENALTY = -2.0  # an answer with no readable moves, as the paper's code: below any move's
# reward, else (at -0.1) a group that holds wrong moves (about -1 each) teaches answering nothing
TEAM_REWARDS = ("solver", "distance")  # progress = fewer optimal moves left, or smaller D
ROLES = ("planner", "executor")


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


# ---------------------------------------------------------------- the model's moves
ANSWER_TAGS = re.compile(r"<(/?)answer>", re.IGNORECASE)  # an opening or closing tag
STOP_STRINGS = ["</answer>", "\n"]  # a turn ends at either: the answer is its first line, and
# free text after it is neither generated nor trained (it was 85 % of the tokens: docs/sokoban.md)


def parse_moves(text):
    """The moves ["R", "R", "D"] in the last <answer>R R D</answer> (or <answer>["r", "right",
    "down"]</answer>, ...) of a model's output; None without an answer or readable moves.
    An answer left open (the model ran on without </answer>) counts up to the end of its line.
    One pass over the tags (a regex <answer>(.*?)</answer> takes quadratic time on "<answer>" * n):
    an answer runs from an opening tag to the next closing tag, as that regex reads it."""
    answer = start = opened = None  # the last answer; where the open one starts; the last <answer>
    for tag in ANSWER_TAGS.finditer(text):
        if not tag.group(1):
            opened = tag.end()
            start = opened if start is None else start
        elif start is not None:
            answer, start = text[start:tag.start()], None
    if answer is None and opened is not None:
        answer = text[opened:].partition("\n")[0]
    return sokoban.moves_in(answer) if answer is not None else None


# ---------------------------------------------------------------- the two-role task
RULES = ("Sokoban: push every box onto a goal.\n"
         "Symbols: # wall, _ floor, . goal, $ box, * box on a goal, @ you, + you on a goal.\n"
         "Moves: U up, D down, L left, R right. Walking into a box pushes it one cell. A box "
         "cannot be pushed into a wall or another box, and boxes can never be pulled. A blocked "
         "move does nothing. A box pushed into a corner off the goals is stuck for good.\n")
TEAM = ("You are the {} of a team of two: the planner proposes moves, they are tried on a copy "
        "of the board, and the executor sees the result and decides the moves really played.")
SYSTEM_PROMPTS = {"planner": RULES + TEAM.format("planner"),
                  "executor": RULES + TEAM.format("executor"),
                  "solo": RULES + "Your moves are played on the board."}
ANSWER_FORMAT = {1: "Answer with one move inside answer tags: U, D, L or R, for example <answer>L</answer>.",
                 "n": "Answer with at most {} moves inside answer tags: U, D, L or R, for example "
                      "<answer>L U</answer>."}  # measured: more varied samples than "<answer>R R D</answer>"


def positions(state):
    """The board as coordinates: "Positions (row, column): you (4, 4), boxes (4, 3), goals (3, 3)."."""
    where = lambda cells: " ".join(f"({r}, {c})" for r, c in sorted(cells))
    return (f"Positions (row, column): you {where([state.player])}, boxes {where(state.boxes)}, "
            f"goals {where(state.goals)}.")


class SokobanTask:
    """One level played in turns. Each turn the planner proposes moves, which are played on a
    copy, and the executor, seeing the result, plays moves on the real board; with planner=False
    (the single-agent baseline) the executor plays alone. An answer counts up to moves_per_turn
    moves. The episode ends when the level is solved or after max_turns turns. act(role, text)
    returns that agent's reward, local + alpha * team, where local is the summed step rewards of
    its moves and team is team_reward (of kind `team`), both over the planner's copy (the real
    board is untouched) or the executor's real board. An answer without readable moves gets
    FORMAT_PENALTY (team 0) and a note shown to the next role. All attributes are immutable and
    messages(role) is a pure function of them, so copies give byte-identical prompts and acting
    on a copy never changes the original (tree sampling)."""

    def __init__(self, level, max_turns=4, alpha=1.0, planner=True, moves_per_turn=1, team="solver",
                 positions=False):
        self.level = self.state = level
        self.max_turns, self.alpha, self.planner = max_turns, alpha, planner
        self.moves_per_turn, self.team, self.positions = moves_per_turn, team, positions
        self.roles = ROLES if planner else ("executor",)
        self.turn = 0
        self.moves = 0  # moves the executor has played (blocked ones too)
        self.answers = ()  # the executor's moves of each turn, "-" for an unreadable answer
        self.next_role = self.roles[0]
        self.observation = ""  # what the last act produced, shown to the next role

    @property
    def solved(self):
        return sokoban.is_solved(self.state)

    @property
    def done(self):
        return self.solved or self.turn >= self.max_turns

    def copy(self):
        """An independent copy: all attributes are immutable, so a shallow copy is a deep one."""
        return copy.copy(self)

    def restart(self):
        """A copy back at the first board but at the same turn and role (the board ablation)."""
        again = self.copy()
        again.state, again.observation = self.level, ""
        return again

    def messages(self, role):
        """The chat messages [system, user] for `role`, who must act next."""
        self._check(role)
        system = SYSTEM_PROMPTS[role if self.planner else "solo"]
        answer = ANSWER_FORMAT[1] if self.moves_per_turn == 1 else ANSWER_FORMAT["n"].format(self.moves_per_turn)
        lines = [f"Turn {self.turn + 1} of {self.max_turns}. The board:", sokoban.board_text(self.state),
                 positions(self.state) if self.positions else "", sokoban.status(self.state) + ".",
                 self.observation, answer]
        user = "\n".join(line for line in lines if line)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def act(self, role, text):
        """Apply `role`'s output text and return its reward (class docstring)."""
        self._check(role)
        moves = parse_moves(text)
        if moves is not None:
            moves = moves[:self.moves_per_turn]
        return self._propose(moves) if role == "planner" else self._execute(moves)

    def _check(self, role):
        """Only the role whose move it is may act, and only while the episode runs."""
        if self.done:
            raise ValueError("the episode is over")
        if role != self.next_role:
            raise ValueError(f"it is the {self.next_role}'s move, not the {role}'s")

    def _propose(self, moves):
        """The planner: play the proposal on a copy and show the result to the executor."""
        self.next_role = "executor"
        if moves is None:
            self.observation = "The planner's answer had no readable moves: there is no proposal."
            return FORMAT_PENALTY
        after, local, blocked, _ = sokoban.play(self.state, moves)
        self.observation = (f"The planner proposes: {' '.join(moves)}\n"
                            f"Played on a copy of the board, the proposal gives:\n{sokoban.board_text(after)}\n"
                            f"{sokoban.status(after, self.state)}, blocked moves: {blocked}.")
        return local + self.alpha * team_reward(self.state, after, self.team)

    def _execute(self, moves):
        """The executor: play the moves on the real board and end the turn."""
        before = self.state
        if moves is None:
            local = FORMAT_PENALTY
            self.observation = "Last turn's answer had no readable moves: nothing was played."
        else:
            self.state, local, blocked, played = sokoban.play(before, moves)
            self.moves += played
            self.observation = (f"Last turn these moves were played: {' '.join(moves)}\n"
                                f"{sokoban.status(self.state, before)}, blocked moves: {blocked}.")
        self.answers += ("".join(moves) if moves else "-",)
        self.turn += 1
        self.next_role = self.roles[0]
        return local + self.alpha * team_reward(before, self.state, self.team)


# ---------------------------------------------------------------- levels, metrics and checks for training
constant_successes = sokoban.constant_successes  # fixed answers' successes, from the game's file


def make_level(seed, args):
    """A seeded level with the curriculum knobs (room size, boxes, reverse steps, solution length)."""
    return sokoban.level_for(seed, args.size, args.boxes, args.reverse_steps,
                             solution=(args.min_solution, args.max_solution or None))


def make_tasks(seeds, args, levels=None):
    """One SokobanTask per seed (or per level given), with the task's knobs (turns, moves per
    turn, team reward)."""
    levels = levels or [make_level(s, args) for s in seeds]
    return [SokobanTask(level, args.max_turns, args.team_alpha, not args.single_agent,
                        args.moves_per_turn, args.team_reward, args.positions) for level in levels]


def episode_metrics(played, final):
    """Success rate, turns and moves played, the box-goal distance left, and the mean reward of
    each role's played answers."""
    log = {"success": sum(t.solved for t in final) / len(final),
           "turns": sum(t.turn for t in final) / len(final),
           "moves": sum(t.moves for t in final) / len(final),
           "box_distance": sum(sokoban.box_distance(t.state) for t in final) / len(final)}
    for role in ROLES:
        rewards = [r for who, r in played if who == role]
        if rewards:
            log[f"reward_{role}"] = sum(rewards) / len(rewards)
    return log


def evaluate(sample, seeds, args, chunks=lambda levels: [levels], game=None):
    """Play the levels with one answer per agent and turn (greedy in train.py's evaluation), then
    the three checks that a constant answer cannot pass:
      best_constant_success   the best success of one fixed answer played on every level
                              (constant_successes), the policy's 3 commonest included;
      board_ablation_success  success when every prompt shows another level's board
                              (level i sees level i+1's): a policy that reads the board drops;
      distinct_answers        how many different answer sequences the policy played (distinct);
    and success_each, one character 0/1 per level in order (compare.py pairs runs by it).
    `chunks(level indices)` yields the parts played together (train.py: a part at a time under
    a progress bar). `game` is the environment module (this one; env_planpath passes itself):
    its make_level, make_tasks, episode_metrics and constant_successes."""
    game = game or sys.modules[__name__]
    levels = tuple(game.make_level(s, args) for s in seeds)
    trajectories, final, ablated = [], [], []
    for part in chunks(list(range(len(levels)))):
        played = atgrpo.parallel_rollout(game.make_tasks(None, args, [levels[i] for i in part]), sample)
        trajectories, final = trajectories + played[0], final + played[1]
        decoys = game.make_tasks(None, args, [levels[(i + 1) % len(levels)] for i in part])
        ablated += atgrpo.parallel_rollout(game.make_tasks(None, args, [levels[i] for i in part]), sample, decoys)[1]
    log = game.episode_metrics([(t.role, t.reward) for tr in trajectories for t in tr], final)
    log["board_ablation_success"] = game.episode_metrics([], ablated)["success"]
    answers = Counter("".join(t.answers).replace("-", "") for t in final)
    commonest, budget = tuple(a for a, _ in answers.most_common(3) if a), args.max_turns * args.moves_per_turn
    constants = {**game.constant_successes(levels, budget),  # cached: the same test levels every time
                 **game.constant_successes(levels, budget, commonest)}
    log["best_constant_success"] = max(constants.values())
    log["distinct_answers"] = distinct(t.answers for t in final)
    log["success_each"] = "".join(str(int(t.solved)) for t in final)
    return log


def distinct(sequences):
    """How many different answer sequences; one that begins another counts with it (a level
    solved early stops its answers: R and R R are one answer, R played again and again)."""
    unique = set(sequences)
    return sum(not any(o[:len(s)] == s and o != s for o in unique) for s in unique)
