"""The AT-GRPO paper's planning workflow with two roles, which Sokoban (env_sokoban.py) and
Plan-Path (env_planpath.py) both play ("Stronger Together: On-Policy Reinforcement Learning for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1). Each turn the planner proposes moves, which are tried on a
copy of the board, and the executor, who sees the result, plays moves on the real board; with
planner=False (the single-agent baseline) the executor plays alone. An agent's reward is
local + alpha * team (the paper's). Whose team term: team_term "own" (this project's default)
measures the planner's on the copy its proposal was played on; "shared" (the paper's public code,
PettingLLMs 2e3c5f2, agents/tool_agent.py and plan_agent.py `calculate_reward`) gives the planner
the executor's, the real board's progress over the turn, once the turn is over (team_share).

`TwoRoleTask` is the whole workflow: the turn order, the proposal on a copy, the execution on the
real board, the prompts. A game subclasses it and says only what is its own (the hooks at the end
of the class): its rules, how its board is shown, how moves play and what they earn, the team
reward, one line of progress. Read top to bottom: the answer format, reading the model's moves,
then TwoRoleTask.

TwoRoleTask has what atgrpo.py needs of an environment (roles, turn, done, team_share, copy(),
messages(role), act(role, text)) and, for evaluation (evaluate_games.py), solved and restart().
"""
import copy
import re

from sokoban import moves_in

ROLES = ("planner", "executor")
TEAM_TERMS = ("own", "shared")  # --team-term: the planner's team term from its own copy, or the executor's
STOP_STRINGS = ["</answer>", "\n"]  # a turn ends at either: the answer is its first line, and
# free text after it is neither generated nor trained (it was 85 % of the tokens: docs/sokoban.md)
ANSWER_FORMAT = {1: "Answer with one move inside answer tags: U, D, L or R, for example <answer>L</answer>.",
                 "n": "Answer with at most {} moves inside answer tags: U, D, L or R, for example "
                      "<answer>L U</answer>."}  # measured: more varied samples than "<answer>R R D</answer>"
# what train.py's table and tools/compare.py show of a game (task.Task.table, .plot): rates are
# fractions of the maximum; rewards are in reward units. A game names its distance metric itself.
TABLE = (("success", "success rate"), ("best_constant_success", "best constant answer's success"),
         ("board_ablation_success", "success, another level's board"), ("distinct_answers", "distinct answer sequences"),
         ("DISTANCE", "DISTANCE"), ("reward_planner", "planner reward"), ("reward_executor", "executor reward"))
PLOT = ("success", "best_constant_success", "board_ablation_success")
FLAGS = ("size", "min_solution", "max_solution", "max_turns", "moves_per_turn", "team_alpha", "team_term",
         "positions", "single_agent")  # the flags both games read (task.Task.flags)
DEFAULTS = {"steps": 60, "batch_size": 8, "num_generations": 4, "max_completion_length": 8,
            "scale_rewards": "batch", "micro_batch_size": 16, "eval_every": 10, "save_every": 10}


def table(distance, label):
    """TABLE with the game's distance metric and its label."""
    return tuple((distance, label) if k == "DISTANCE" else (k, what) for k, what in TABLE)


TEAM = ("You are the {} of a team of two: the planner proposes moves, they are tried on a copy "
        "of the {}, and the executor sees the result and decides the moves really played.")


# ---------------------------------------------------------------- the model's moves
ANSWER_TAGS = re.compile(r"<(/?)answer>", re.IGNORECASE)  # an opening or closing tag


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
    return moves_in(answer) if answer is not None else None


# ---------------------------------------------------------------- the workflow
class TwoRoleTask:
    """One level played in turns by the planner and the executor (or the executor alone). An
    answer counts up to moves_per_turn moves. The episode ends when the level is solved or after
    max_turns turns. act(role, text) returns that agent's reward, local + alpha * team, over the
    planner's copy (the real board is untouched) or the executor's real board. An answer without
    readable moves gets FORMAT_PENALTY (team 0) and a note shown to the next role. With
    team_term "shared" the planner's act returns its local reward only, and team_share holds the
    executor's alpha * team of the turn just played, which atgrpo adds to the planner's. All
    attributes are immutable and messages(role) is a pure function of them, so copies give
    byte-identical prompts and acting on a copy never changes the original (tree sampling)."""

    NOUN = "board"  # what the prompts call the level
    RULES = ""  # the game's rules: the start of every system prompt
    FORMAT_PENALTY = -2.0  # an answer with no readable moves
    DISTANCE = "distance"  # the log's name for distance_left()

    def __init__(self, level, max_turns=4, alpha=1.0, planner=True, moves_per_turn=1, positions=False,
                 team_term="own"):
        if team_term not in TEAM_TERMS:
            raise ValueError(f"team_term must be one of {', '.join(TEAM_TERMS)}, not {team_term!r}")
        self.level = self.state = level
        self.max_turns, self.alpha, self.planner, self.team_term = max_turns, alpha, planner, team_term
        self.moves_per_turn, self.positions = moves_per_turn, positions
        self.roles = ROLES if planner else ("executor",)
        self.turn = 0
        self.moves = 0  # moves the executor has played (blocked ones too)
        self.answers = ()  # the executor's moves of each turn, "-" for an unreadable answer
        self.next_role = self.roles[0]
        self.observation = ""  # what the last act produced, shown to the next role
        self.team_share = 0.0  # "shared": the executor's alpha * team of the last turn, the planner's too

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
        system = self.RULES + (TEAM.format(role, self.NOUN) if self.planner else
                               f"Your moves are played on the {self.NOUN}.")
        answer = ANSWER_FORMAT[1] if self.moves_per_turn == 1 else ANSWER_FORMAT["n"].format(self.moves_per_turn)
        lines = [f"Turn {self.turn + 1} of {self.max_turns}. The {self.NOUN}:", *self.view(),
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
            return self.FORMAT_PENALTY
        after, local, blocked, _ = self.play(moves)
        self.observation = (f"The planner proposes: {' '.join(moves)}\nPlayed on a copy of the {self.NOUN}, the "
                            f"proposal gives:\n{self.board(after)}\n{self.progress(self.state, after, blocked)}")
        if self.team_term == "shared":
            return local  # its team term comes when the turn is over (team_share)
        return local + self.alpha * self.team_reward(self.state, after)

    def _execute(self, moves):
        """The executor: play the moves on the real board and end the turn."""
        before = self.state
        if moves is None:
            local = self.FORMAT_PENALTY
            self.observation = "Last turn's answer had no readable moves: nothing was played."
        else:
            self.state, local, blocked, played = self.play(moves)
            self.moves += played
            self.observation = (f"Last turn these moves were played: {' '.join(moves)}\n"
                                f"{self.progress(before, self.state, blocked)}")
        self.answers += ("".join(moves) if moves else "-",)
        self.turn += 1
        self.next_role = self.roles[0]
        team = self.alpha * self.team_reward(before, self.state)
        self.team_share = team if self.team_term == "shared" and self.planner else 0.0
        return local + team

    # ------------------------------------------------ what each game says (env_sokoban.py, env_planpath.py)
    @property
    def solved(self):
        """Is the level solved?"""
        raise NotImplementedError

    def view(self):
        """The lines that show self.state in the user prompt (the board, and more)."""
        raise NotImplementedError

    def board(self, state):
        """The board of `state` as text (shown after a proposal)."""
        raise NotImplementedError

    def play(self, moves):
        """(state after, local reward, blocked moves, moves played) of moves from self.state."""
        raise NotImplementedError

    def team_reward(self, before, after):
        """The team's progress from `before` to `after`."""
        raise NotImplementedError

    def progress(self, before, after, blocked):
        """One line on what the moves did, shown to the next role."""
        raise NotImplementedError

    def distance_left(self):
        """How far the level is from solved (logged as DISTANCE)."""
        raise NotImplementedError


def longest_messages(tasks):
    """The longest prompt a role is shown in these tasks (for the context check): the one after a
    first answer of as many moves as a turn allows, whose observation (a proposal and the board it
    gives, or the moves played) is the longest a prompt holds; a prompt holds one observation."""
    prompts = []
    for task in tasks:
        prompts.append(task.messages(task.roles[0]))
        after = task.copy()
        after.act(after.roles[0], "<answer>" + " ".join("U" * after.moves_per_turn) + "</answer>")
        if not after.done:
            prompts.append(after.messages(after.next_role))
    return max(prompts, key=lambda messages: sum(len(m["content"]) for m in messages))
