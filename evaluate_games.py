"""Evaluation of the two-role tasks: success, and the checks that a policy which ignores the level
cannot pass. train.py's evaluation and tools/evaluate.py call `evaluate`.

A small model can learn one answer that often works instead of reading the level, and success
alone cannot tell the two apart. So beside success every evaluation logs:
  board_ablation_success  success when every prompt shows another level (level i sees level
                          i+1's, ShownAnother): a policy that reads the level drops;
  distinct_answers        how many different answer sequences the policy played (distinct);
  best_constant_success   where the task says what a fixed answer is (task.Task.constant: the move
                          games, moves.py), the best success of one answer played on every level.

Levels are played with one answer per agent and turn (atgrpo.parallel_rollout, greedy in
train.py). A task gives make_level(seed, args) and make_tasks(seeds, args, levels); its episodes
have what env_two_roles.py lists.
"""
from collections import Counter

import atgrpo


def episode_metrics(played, final):
    """Success rate, turns played, each of the task's own numbers (its episodes' metrics(): moves,
    the distance left ...), and the mean reward of each role's played answers."""
    log = {"success": sum(t.solved for t in final) / len(final),
           "turns": sum(t.turn for t in final) / len(final), "one_turn": sum(t.turn == 1 for t in final) / len(final)}
    numbers = [t.metrics() for t in final]
    log.update({k: sum(n[k] for n in numbers) / len(numbers) for k in numbers[0]})
    for role in final[0].ROLES:
        rewards = [r for who, r in played if who == role]
        if rewards:
            log[f"reward_{role}"] = sum(rewards) / len(rewards)
    return log


def evaluate(sampler, seeds, args, task, chunks=lambda levels: [levels]):
    """Play the levels of `seeds` (module docstring) and return the episode metrics, the checks,
    and success_each, one character 0/1 per level in order (tools/compare.py pairs runs by it).
    `chunks(level indices)` yields the parts played together (train.py: a part at a time under a
    progress bar)."""
    levels = tuple(task.make_level(s, args) for s in seeds)
    trajectories, final, ablated = [], [], []
    for part in chunks(list(range(len(levels)))):
        here, next_ones = [levels[i] for i in part], [levels[(i + 1) % len(levels)] for i in part]
        played = atgrpo.parallel_rollout(task.make_tasks(None, args, here), sampler)
        trajectories, final = trajectories + played[0], final + played[1]
        shown = [ShownAnother(real, decoy) for real, decoy in zip(task.make_tasks(None, args, here),
                                                                  task.make_tasks(None, args, next_ones))]
        ablated += [s.real for s in atgrpo.parallel_rollout(shown, sampler)[1]]
    log = episode_metrics([(t.role, t.reward) for tr in trajectories for t in tr], final)
    log["board_ablation_success"] = sum(t.solved for t in ablated) / len(ablated)
    if task.constant:
        answers = Counter("".join(t.answers).replace("-", "") for t in final)
        commonest = tuple(a for a, _ in answers.most_common(3) if a)
        log["best_constant_success"] = max(task.constant(levels, args, commonest).values())
    log["distinct_answers"] = distinct(t.answers for t in final)
    log["success_each"] = "".join(str(int(t.solved)) for t in final)
    return log


class ShownAnother:
    """The board ablation: plays `real`, but every prompt comes from `shown`, another level that
    is given the same answers (and starts over when it ends first: solved, or its team agreed), so
    the policy never sees its own level. To atgrpo.parallel_rollout it is an environment like any other."""

    def __init__(self, real, shown):
        self.real, self.shown = real, shown

    roles = property(lambda self: self.real.roles)
    turn = property(lambda self: self.real.turn)
    done = property(lambda self: self.real.done)
    team_share = property(lambda self: self.real.team_share)

    def messages(self, role):
        return self.shown.messages(role)

    def act(self, role, text):
        reward = self.real.act(role, text)
        if not self.real.done:
            self.shown.act(role, text)
            self.shown = self.shown.restart() if self.shown.done else self.shown
        return reward


def distinct(sequences):
    """How many different answer sequences; one that begins another counts with it (a level
    solved early stops its answers: R and R R are one answer, R played again and again)."""
    unique = set(sequences)
    return sum(not any(o[:len(s)] == s and o != s for o in unique) for s in unique)
