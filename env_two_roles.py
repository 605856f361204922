"""The two-role seam: what an AT-GRPO task's episode has, and the paper's planning workflow with
two roles, which Sokoban, Plan-Path and Sudoku play ("Stronger Together: On-Policy Reinforcement
Learning for Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1).

An episode of a two-role task (what atgrpo.py, evaluate_games.py, train.py's context check and
tools/ read; task.Task says what the task declares beside it):
  ROLES           the team's roles, in the order they act in a turn
  roles           the roles playing this episode: ROLES, or the last alone (--single-agent)
  next_role       the role that acts next
  turn, done      turns completed (0 at the start); True once the episode is over
  solved          the level is solved (the success rate)
  team_share      after a turn: the reward its earlier agents get on top of theirs (0: none)
  answers         what each turn played, one string a turn ("-": nothing readable)
  copy()          an independent copy (tree sampling scores each candidate on its own)
  restart()       a copy back at the first state, same turn and role (the board ablation)
  messages(role)  the chat messages [system, user] `role` sees now, a pure function of the state
  act(role, text) play `role`'s output; returns its reward
  example(role)   a well-formed answer `role` could give now (the context check plays it)
  metrics()       this episode's numbers that an evaluation averages ({"moves": 3, ...})
A task whose roles do other work implements these itself (env_math.py, env_code.py).

The workflow here, `TwoRoleTask`: each turn the planner proposes actions (moves, fills), which are
tried on a copy of the state, and the executor, who sees the result, plays actions on the real
state; with planner=False (the single-agent baseline) the executor plays alone. An agent's reward is
local + alpha * team (the paper's). Whose team term: team_term "own" (this project's default)
measures the planner's on the copy its proposal was played on; "shared" (the paper's public code,
PettingLLMs 2e3c5f2, agents/tool_agent.py and plan_agent.py `calculate_reward`) gives the planner
the executor's, the real state's progress over the turn, once the turn is over (team_share).
A task subclasses TwoRoleTask and says only what is its own (the hooks at the end of the class):
its answers (their format, how they are read, an example), its rules, how its state is shown, how
actions play and what they earn, the team reward, one line of progress. Read top to bottom: the
answer tags, the flags every two-role task shares, then TwoRoleTask.
"""
import copy
import re

from task import Option

ROLES = ("planner", "executor")
TEAM_TERMS = ("own", "shared")  # --team-term: the planner's team term from its own copy, or the executor's
STOP_STRINGS = ["</answer>", "\n"]  # a turn ends at either: the answer is its first line, and
# free text after it is neither generated nor trained (it was 85 % of the tokens: docs/sokoban.md)
# what train.py's table and tools/compare.py show of a game (task.Task.table, .plot): rates are
# fractions of the maximum; rewards are in reward units. A game names its distance metric itself.
TABLE = (("success", "success rate"), ("best_constant_success", "best constant answer's success"),
         ("board_ablation_success", "success, another level's board"), ("distinct_answers", "distinct answer sequences"),
         ("DISTANCE", "DISTANCE"), ("reward_planner", "planner reward"), ("reward_executor", "executor reward"))
PLOT = ("success", "best_constant_success", "board_ablation_success")
DEFAULTS = {"steps": 60, "batch_size": 8, "num_generations": 4, "max_completion_length": 8,
            "scale_rewards": "batch", "micro_batch_size": 16, "eval_every": 10, "save_every": 10}
# the flags of every two-role task (task.Option), and those of the planner/executor workflow
TEAM_OPTIONS = (
    Option("max_turns", int, 4, "turns per episode", lambda v: v >= 1, "at least 1"),
    Option("team_alpha", float, 1.0, "AT-GRPO's alpha, agent reward = local + alpha * team (not MT-GRPO's turn "
           "discount: --alpha)"),
    Option("single_agent", bool, False, "the last role alone, a baseline"))
OPTIONS = (*TEAM_OPTIONS,
           Option("moves_per_turn", int, 1, "actions an answer may play (the rest is ignored)", lambda v: v >= 1, "at least 1"),
           Option("team_term", str, "own", "the planner's team term from the copy its proposal was played on (own) "
                  "or the executor's on the real state, shared (the paper's code)", choices=TEAM_TERMS))


def check(args):
    """The workflow's flags together: the team term is the planner's."""
    if args.team_term != "own" and args.single_agent:
        return "--team-term is the planner's: it needs two roles (no --single-agent)"


def table(distance, label):
    """TABLE with the game's distance metric and its label."""
    return tuple((distance, label) if k == "DISTANCE" else (k, what) for k, what in TABLE)


TEAM = ("You are the {} of a team of two: the planner proposes {}, they are tried on a copy "
        "of the {}, and the executor sees the result and decides the {} really played.")


# ---------------------------------------------------------------- the answer tags
ANSWER_TAGS = re.compile(r"<(/?)answer>", re.IGNORECASE)  # an opening or closing tag


def answer_in(text):
    """The text inside the last <answer>...</answer> of a model's output, None without one. An
    answer left open (the model ran on without </answer>) counts up to the end of its line. One
    pass over the tags (a regex <answer>(.*?)</answer> takes quadratic time on "<answer>" * n): an
    answer runs from an opening tag to the next closing tag, as that regex reads it."""
    answer = start = opened = None  # the last answer; where the open one starts; the last <answer>
    for tag in ANSWER_TAGS.finditer(text):
        if not tag.group(1):
            opened = tag.end()
            start = opened if start is None else start
        elif start is not None:
            answer, start = text[start:tag.start()], None
    if answer is None and opened is not None:
        answer = text[opened:].partition("\n")[0]
    return answer


# ---------------------------------------------------------------- the workflow
class TwoRoleTask:
    """One level played in turns by the planner and the executor (or the executor alone). An
    answer counts up to moves_per_turn actions. The episode ends when the level is solved or after
    max_turns turns. act(role, text) returns that agent's reward, local + alpha * team, over the
    planner's copy (the real state is untouched) or the executor's real state. An answer without
    readable actions gets FORMAT_PENALTY (team 0) and a note shown to the next role. With
    team_term "shared" the planner's act returns its local reward only, and team_share holds the
    executor's alpha * team of the turn just played, which atgrpo adds to the planner's. All
    attributes are immutable and messages(role) is a pure function of them, so copies give
    byte-identical prompts and acting on a copy never changes the original (tree sampling)."""

    ROLES = ROLES
    NOUN = "board"  # what the prompts call the level
    UNIT = "actions"  # what the prompts call what an answer plays ("moves", "fills")
    RULES = ""  # the task's rules: the start of every system prompt
    ANSWER_FORMAT = {1: "", "n": ""}  # the answer's format for one action, and for at most {} of them
    FORMAT_PENALTY = -2.0  # an answer with no readable actions

    def __init__(self, level, max_turns=4, alpha=1.0, planner=True, moves_per_turn=1, positions=False,
                 team_term="own"):
        if team_term not in TEAM_TERMS:
            raise ValueError(f"team_term must be one of {', '.join(TEAM_TERMS)}, not {team_term!r}")
        self.level = self.state = level
        self.max_turns, self.alpha, self.planner, self.team_term = max_turns, alpha, planner, team_term
        self.moves_per_turn, self.positions = moves_per_turn, positions
        self.roles = ROLES if planner else ("executor",)
        self.turn = 0
        self.moves = 0  # actions the executor has played (blocked ones too)
        self.answers = ()  # the executor's actions of each turn, "-" for an unreadable answer
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
        """A copy back at the first state but at the same turn and role (the board ablation)."""
        again = self.copy()
        again.state, again.observation = self.level, ""
        return again

    def messages(self, role):
        """The chat messages [system, user] for `role`, who must act next."""
        self._check(role)
        system = self.RULES + (TEAM.format(role, self.UNIT, self.NOUN, self.UNIT) if self.planner else
                               f"Your {self.UNIT} are played on the {self.NOUN}.")
        answer = self.ANSWER_FORMAT[1] if self.moves_per_turn == 1 else self.ANSWER_FORMAT["n"].format(self.moves_per_turn)
        lines = [f"Turn {self.turn + 1} of {self.max_turns}. The {self.NOUN}:", *self.view(),
                 self.observation, answer]
        user = "\n".join(line for line in lines if line)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def act(self, role, text):
        """Apply `role`'s output text and return its reward (class docstring)."""
        self._check(role)
        actions = self.parse(text)
        if actions is not None:
            actions = actions[:self.moves_per_turn]
        return self._propose(actions) if role == "planner" else self._execute(actions)

    def _check(self, role):
        """Only the role whose move it is may act, and only while the episode runs."""
        if self.done:
            raise ValueError("the episode is over")
        if role != self.next_role:
            raise ValueError(f"it is the {self.next_role}'s move, not the {role}'s")

    def _propose(self, actions):
        """The planner: play the proposal on a copy and show the result to the executor."""
        self.next_role = "executor"
        if actions is None:
            self.observation = f"The planner's answer had no readable {self.UNIT}: there is no proposal."
            return self.FORMAT_PENALTY
        after, local, blocked, _ = self.play(actions)
        self.observation = (f"The planner proposes: {' '.join(actions)}\nPlayed on a copy of the {self.NOUN}, the "
                            f"proposal gives:\n{self.board(after)}\n{self.progress(self.state, after, blocked)}")
        if self.team_term == "shared":
            return local  # its team term comes when the turn is over (team_share)
        return local + self.alpha * self.team_reward(self.state, after)

    def _execute(self, actions):
        """The executor: play the actions on the real state and end the turn."""
        before = self.state
        if actions is None:
            local = self.FORMAT_PENALTY
            self.observation = f"Last turn's answer had no readable {self.UNIT}: nothing was played."
        else:
            self.state, local, blocked, played = self.play(actions)
            self.moves += played
            self.observation = (f"Last turn these {self.UNIT} were played: {' '.join(actions)}\n"
                                f"{self.progress(before, self.state, blocked)}")
        self.answers += ("".join(actions) if actions else "-",)
        self.turn += 1
        self.next_role = self.roles[0]
        team = self.alpha * self.team_reward(before, self.state)
        self.team_share = team if self.team_term == "shared" and self.planner else 0.0
        return local + team

    # ------------------------------------------------ what each task says (env_sokoban.py, env_sudoku.py ...)
    def parse(self, text):
        """The actions in a model's output (answer_in reads the tags), None if none is readable."""
        raise NotImplementedError

    def example(self, role):
        """A well-formed answer `role` could give now, as the model would write it."""
        raise NotImplementedError

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

    def play(self, actions):
        """(state after, local reward, blocked actions, actions played) of actions from self.state."""
        raise NotImplementedError

    def team_reward(self, before, after):
        """The team's progress from `before` to `after`."""
        raise NotImplementedError

    def progress(self, before, after, blocked):
        """One line on what the actions did, shown to the next role."""
        raise NotImplementedError

    def metrics(self):
        """This episode's numbers an evaluation averages ({"moves": ..., the distance left})."""
        raise NotImplementedError


def longest_messages(tasks):
    """The longest prompt a role is shown in these tasks (for the context check): each task played to
    its end with its examples (as many actions as a turn allows, for the workflow here), every
    prompt on the way counted (a team's prompts may grow with the turns)."""
    prompts = []
    for task in tasks:
        episode = task.copy()
        while not episode.done:
            prompts.append(episode.messages(episode.next_role))
            episode.act(episode.next_role, episode.example(episode.next_role))
    return max(prompts, key=lambda messages: sum(len(m["content"]) for m in messages))
