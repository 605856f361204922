"""Every advantage estimator this project trains or measures, one row each: its name (--algo), its
label, the kind of task it serves (task.py), its rollout scheme, its source, and the function that computes its advantages.
train.py, config.py and tools/ (show, compare, credit, credit_bias, scale_trl) take names and
labels from this table and list none of their own (tests/test_estimators.py checks it), so adding
a tool-use estimator is one function (mtgrpo.py for the MT-GRPO paper's, critic.py for the rows
with a critic, field.py for the others), one row here and one test: the throwaway row of
tests/test_estimators.py trains, is compared, shown and re-scored with no other edit.

A tool-use row's function maps one step's rewards to per-turn advantages:
    fn(turn_rewards (groups, G, K-1), outcome_rewards (groups, G), turns (groups, G), alpha, scale,
       **needs) -> (groups, G, K), A_k at index k-1 (mtgrpo.py's layout)
needs: a row's inputs beyond the rewards, by name (field.inputs makes them from the episodes):
"states" (groups, G, K) the anchor state each turn began in, "info_gain" (groups, G, K-1), "values"
(groups, G, K) a critic's V(s_k) (a row that needs it trains a critic: critic.py), "tokens"
(groups, G, K) the model tokens of each turn.
turns: the turns each episode played (it may answer before turn K; its later R^T are 0 and its
later A_k carry no token). Two rules every row follows:
  - zeros on the turns an episode did not play (k > turns): such a turn has no token, and
    tools/credit.py scores only played turns (MT-GRPO's own rows keep their formula's value there);
  - `paper` decides where a row runs by default: tools/compare.py runs the rows whose paper is its
    task's paper ("MT-GRPO" for tool use, "AT-GRPO" for the games); any other row runs when named
    (--algos), and tools/credit.py scores every row of the task's kind.
A game row's name selects its rollout scheme (atgrpo.rollout_samples), and its function gives the
advantages of that scheme's samples:
    trajectories  fn(trajectories, K, scale) -> per trajectory, the advantage of each of its answers
    tree          fn(groups, scale) -> per group, the advantage of each of its K candidates
"""
from dataclasses import dataclass

import atgrpo
import critic
import field
import mtgrpo

DEFAULT = {"tool": "mt", "game": "at"}  # --algo auto: each kind of task's paper's estimator (task.py)


@dataclass(frozen=True)
class Estimator:
    name: str  # --algo, and the key in logs, rollouts and credit files
    label: str  # progress bar, tables, plots
    summary: str  # one line: what it credits
    paper: str  # "MT-GRPO", "MT-GRPO v2", "AT-GRPO", "GiGPO" or "field" (another project's); compare's default: above
    kind: str  # the tasks it serves (task.py): "tool" (MT-GRPO's episodes) or "game" (AT-GRPO's)
    scheme: str  # tool: "episodes" (G per question); game: "tree" or "trajectories" (K per level)
    source: str  # the paper, or the file and lines it follows
    fn: object  # the advantages (module docstring)
    trainable: bool = True  # False: measured by tools/credit.py only (a setting of a trainable one)
    needs: tuple = ()  # tool: inputs beyond the rewards, passed by name (field.inputs): "states", "info_gain", "values", "tokens"


def mtgrpo_row(algo):
    """mtgrpo.turn_advantages as a tool-use row's function (it needs no `turns`)."""
    return lambda R_T, R_O, turns, alpha, scale: mtgrpo.turn_advantages(R_T, R_O, algo, alpha, scale)


TABLE = (
    Estimator("or", "GRPO-OR", "GRPO-OR, outcome reward", "MT-GRPO", "tool", "episodes",
              "MT-GRPO paper (arXiv 2505.11821v1): A_k = norm(R^O)", mtgrpo_row("or")),
    Estimator("mr", "GRPO-MR", "GRPO-MR, merged reward", "MT-GRPO", "tool", "episodes",
              "MT-GRPO paper: A_k = norm(sum R^T + R^O)", mtgrpo_row("mr")),
    Estimator("mt", "MT-GRPO", "MT-GRPO, turn-level advantages", "MT-GRPO", "tool", "episodes",
              "MT-GRPO paper: A_1 = norm(R^T) + norm(R^O), A_2 = norm(R^O); K > 2 this project's (mtgrpo.py)",
              mtgrpo_row("mt")),
    Estimator("mt_half", "MT-GRPO α=0.5", "MT-GRPO with its turn discount alpha at 0.5", "MT-GRPO", "tool",
              "episodes", "mtgrpo.py's K-turn form at alpha 0.5 (--algo mt --alpha 0.5)",
              lambda R_T, R_O, turns, alpha, scale: mtgrpo.turn_advantages(R_T, R_O, "mt", 0.5, scale), False),
    Estimator("loo", "per-turn LOO", "per-turn-index leave-one-out baseline (PipelineRL)", "field", "tool",
              "episodes", "PipelineRL PR #135 (58d3934), pipelinerl/finetune/rl/__init__.py 477-520: field.turn_index_loo",
              field.turn_index_loo),
    Estimator("kevin", "returns γ=0.4", "discounted per-turn returns, normalised over the group's turns (Kevin)",
              "field", "tool", "episodes", "Kevin (arXiv 2507.11948) as verifiers PR #536 computes it: "
              "field.discounted_returns", field.discounted_returns),
    Estimator("gigpo_search", "GiGPO (search)", "GiGPO's episode and anchor-state groups; a state is the question "
              "and the tool results seen", "GiGPO", "tool", "episodes", "GiGPO (arXiv 2505.10978) eq. 5-8, as "
              "atgrpo.gigpo_advantages: field.anchor_state_groups", field.anchor_state_groups, needs=("states",)),
    Estimator("igpo", "MT-GRPO, R^T = IG", "MT-GRPO with IGPO's information gain as the turn reward", "field", "tool",
              "episodes", "IGPO (arXiv 2510.14967), GuoqingWang1/IGPO at bff163b, scrl/llm_agent/generation.py "
              "295-423: field.info_gain_turns", field.info_gain_turns, needs=("info_gain",)),
    Estimator("mt_ppo", "MT-PPO", "MT-PPO, a learned critic's turn-level GAE over turn rewards", "MT-GRPO v2", "tool",
              "episodes", "MT-GRPO v2 (arXiv 2505.11821v2), GAE as quanwei0/RAGEN's turn level: critic.py",
              critic.mt_ppo_advantages, needs=("values", "tokens")),
    Estimator("ppo", "PPO", "PPO, a learned critic's turn-level GAE over the outcome reward", "MT-GRPO v2", "tool",
              "episodes", "PPO with a critic (MT-GRPO v2's baseline): critic.py", critic.ppo_advantages,
              needs=("values", "tokens")),
    Estimator("grpo", "GRPO", "GRPO baseline, trajectory groups", "AT-GRPO", "game", "trajectories",
              "AT-GRPO paper (arXiv 2510.11062v1), its GRPO baseline: atgrpo.trajectory_samples",
              lambda trajectories, K, scale: [[a] * len(t) for a, t in zip(
                  atgrpo.episode_advantages(trajectories, K, scale)[1], trajectories)]),
    Estimator("gigpo", "GiGPO", "GiGPO, trajectory and anchor-state groups", "GiGPO", "game", "trajectories",
              "GiGPO (arXiv 2505.10978) eq. 8, verl-agent gigpo/core_gigpo.py: atgrpo.gigpo_samples",
              lambda trajectories, K, scale: atgrpo.gigpo_advantages(trajectories, K, scale=scale)),
    Estimator("at", "AT-GRPO", "AT-GRPO, agent- and turn-wise groups", "AT-GRPO", "game", "tree",
              "AT-GRPO paper, tree sampling: atgrpo.tree_samples", atgrpo.tree_advantages),
)
BY_NAME = {e.name: e for e in TABLE}


def trains_critic(name):
    """Whether the row `name` needs a critic's values (MT-PPO, PPO: critic.py); False for a name not in the table."""
    return name in BY_NAME and "values" in BY_NAME[name].needs


def names(kind=None, trainable=True, paper=None, needing=None):
    """The estimators' names in the table's order: of one kind of task ("tool" or "game") and one
    paper if given, the trainable ones only unless trainable=False, and if `needing` is given only
    those whose extra inputs are among it (needing=(): the rewards alone)."""
    return tuple(e.name for e in TABLE if (kind is None or e.kind == kind) and (paper is None or e.paper == paper)
                 and (e.trainable or not trainable) and (needing is None or set(e.needs) <= set(needing)))


def label(name):
    """The estimator's label; an unknown name as it is."""
    return BY_NAME[name].label if name in BY_NAME else name
