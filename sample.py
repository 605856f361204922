"""What a rollout hands the update: one `Sample` per sequence, the token ids exactly as generated
(never decoded and re-encoded), a loss mask that is 1 only on model tokens (prompt and
environment tokens stay in attention with mask 0), and one advantage per token. Search episodes
are made by policy.play_episodes, and train.tool_step sets their mask and advantages from
mtgrpo.token_advantages; AT-GRPO's are made whole by atgrpo.py. The loss (loss.py) reads them.
`signal` measures what a step's samples can teach (train.py logs it).
"""
from collections import Counter
from dataclasses import dataclass


@dataclass
class Sample:
    ids: list  # prompt + turns + environment tokens, as generated / tokenised once
    mask: list = None  # 1 = model token that trains, 0 = prompt or environment token
    adv: list = None  # advantage of each token (0 where mask is 0)
    turn: list = None  # per token: the turn (1..K) that generated it, 0 for prompt and environment
    old_logp: list = None  # log-probs under the sampling policy (filled when mu > 1)
    ref_logp: list = None  # log-probs under the reference model (filled when beta > 0)
    role: str = ""  # which agent produced the sample (AT-GRPO per-role routing)
    group_name: str = ""  # names the group its advantage was normalised in ("group" in rollouts; tools/show.py)
    rewards: list = None  # the reward of each of its turns (tools/show.py)
    starts: list = None  # per turn k, len(ids) when it began: ids[:starts[k-1]] is the prompt it was sampled from
    values: list = None  # per turn played, the critic's V(s_k) (--algo mt_ppo, ppo: critic.py)
    returns: list = None  # per turn played, the critic's target R_k


def signal(samples):
    """The signal meter of a step's samples: how many groups; the fraction of them whose every
    sample has advantage 0 on every trained token (equal rewards, or one sample: no gradient), and
    of those with one sample; and the trained tokens of a turn, on average over (sample, turn)."""
    silent, size, tokens = {}, Counter(), Counter()
    for n, s in enumerate(samples):
        silent[s.group_name] = silent.get(s.group_name, True) and not any(a for a, m in zip(s.adv, s.mask) if m)
        size[s.group_name] += 1
        tokens.update((n, t) for t, m in zip(s.turn, s.mask) if m)
    return {"groups": len(silent), "zero_adv_groups": sum(silent.values()) / len(silent),
            "singleton_groups": sum(c == 1 for c in size.values()) / len(size),
            "tokens_per_turn": sum(tokens.values()) / max(1, len(tokens))}
