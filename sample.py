"""What a rollout hands the update: one `Sample` per sequence, the token ids exactly as generated
(never decoded and re-encoded), a loss mask that is 1 only on model tokens (prompt and
environment tokens stay in attention with mask 0), and one advantage per token. Search episodes
are made by policy.play_episodes, and train.search_step sets their mask and advantages from
mtgrpo.token_advantages; AT-GRPO's are made whole by atgrpo.py. The loss (loss.py) reads them.
"""
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
