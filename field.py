"""The field's turn credit for search episodes: estimators other projects ship, each as its source
computes it, so that tools/credit.py can score it against the true advantage and train.py can
train with it (--algo, estimators.py's table). mtgrpo.py keeps the MT-GRPO paper's own.

All take mtgrpo.py's layout: turn_rewards (groups, G, K-1) R^T_1..R^T_{K-1}, outcome_rewards
(groups, G) R^O, turns (groups, G) the turns each episode played (1..K), and return (groups, G, K),
A_k at index k-1; a turn an episode did not play gets 0 (it has no token). Two need more of the
episodes (estimators.Estimator.needs, made by `inputs`): GiGPO's the state each turn began in,
IGPO's the gold answer's probability under the policy before and after each turn. An episode's own
reward sequence (`step_rewards`) is r_k = R^T_k for its turns before the last and r_T = R^O at
its last turn T: a turn that answers earns the outcome, a turn that calls earns its call's reward.
"""
import torch

from mtgrpo import group_norm, turn_advantages
from sample import Sample

KEVIN_GAMMA = 0.4  # Kevin (arXiv 2507.11948): "sum with gamma = 0.4" was its best turn return


def step_rewards(turn_rewards, outcome_rewards, turns):
    """(r, played): r (groups, G, K) the reward of each turn an episode played, R^T_k before its
    last turn and R^O at it, 0 after; played (groups, G, K) True for k <= T."""
    R_T = torch.as_tensor(turn_rewards, dtype=torch.float64)
    R_O = torch.as_tensor(outcome_rewards, dtype=torch.float64)
    T = torch.as_tensor(turns, dtype=torch.long)
    K = R_T.shape[2] + 1
    if T.shape != R_O.shape or bool(((T < 1) | (T > K)).any()):
        raise ValueError(f"turns must be (groups, G) = {tuple(R_O.shape)} with values 1..{K}, got "
                         f"{tuple(T.shape)} {T.unique().tolist()}")
    k = torch.arange(1, K + 1)
    played = k <= T[..., None]
    last = k == T[..., None]
    r = torch.where(played & ~last, torch.cat([R_T, torch.zeros_like(R_O)[..., None]], 2), torch.zeros(()))
    return torch.where(last, R_O[..., None], r), played


def turn_index_loo(turn_rewards, outcome_rewards, turns, alpha=1.0, scale="group"):
    """Per-turn-index leave-one-out (PipelineRL PR #135, ServiceNow/PipelineRL at 58d3934,
    pipelinerl/finetune/rl/__init__.py lines 477-520, populate_rl_data). Samples are grouped by
    (group, turn index k); each turn's step reward is the episode's reward (pipelinerl/rollouts.py
    lines 79-83 put the rollout's reward on every step; here R = sum_k R^T_k + R^O). Among the
    episodes that played turn k:
        A_{i,k} = (R_i - mean_{j != i} R_j) / (std_j R_j + 1e-4)
    the std over all of them (pandas, ddof 1), the episode included; 0 where one episode alone
    played turn k. scale "none" does not divide (its divide_advantage_by_std false), "batch"
    divides by the std of every played turn's R in the step. alpha is not used."""
    r, played = step_rewards(turn_rewards, outcome_rewards, turns)
    R = (r.sum(2, keepdim=True) * played).double()  # the episode's reward on each turn it played
    n = played.sum(1, keepdim=True)  # episodes that played turn k
    mean_others = (R.sum(1, keepdim=True) - R) / (n - 1).clamp(min=1)
    mean = R.sum(1, keepdim=True) / n.clamp(min=1)
    std = (((R - mean) ** 2 * played).sum(1, keepdim=True) / (n - 1).clamp(min=1)).sqrt()
    divisor = {"group": std + 1e-4, "batch": R[played].std() + 1e-4 if played.sum() > 1 else 1.0, "none": 1.0}[scale]
    return torch.where(played & (n > 1), (R - mean_others) / divisor, torch.zeros(()))


def discounted_returns(turn_rewards, outcome_rewards, turns, alpha=1.0, scale="group", gamma=KEVIN_GAMMA):
    """Discounted per-turn returns, normalised over every turn of the group (Kevin, arXiv
    2507.11948, as PrimeIntellect-ai/verifiers PR #536 implements it: verifiers/rl/trainer/
    generator.py lines 670-694, _compute_stepwise_returns, and 504-516; gamma 0.4, its default,
    rl/trainer/config.py lines 131-155). Each turn t is a sample with the return
        R_t = sum_{k=t}^{T} gamma^(k-t) r_k
    and A_t = (R_t - mean) / (std + 1e-8) over all the played turns of the G episodes of a question,
    the std the population one (np.std). scale "none" only centres, "batch" divides by the std of
    every played turn's return in the step. alpha is not used (gamma is Kevin's)."""
    r, played = step_rewards(turn_rewards, outcome_rewards, turns)
    R = torch.zeros_like(r)
    running = torch.zeros_like(r[..., 0])
    for k in reversed(range(r.shape[2])):
        running = r[..., k] + gamma * running
        R[..., k] = running
    flat, mask = R.flatten(1), played.flatten(1)
    n = mask.sum(1, keepdim=True).clamp(min=1)
    mean = (flat * mask).sum(1, keepdim=True) / n
    std = (((flat - mean) ** 2 * mask).sum(1, keepdim=True) / n).sqrt()
    divisor = {"group": std + 1e-8, "batch": R[played].std(unbiased=False) + 1e-8, "none": 1.0}[scale]
    return torch.where(mask, (flat - mean) / divisor, torch.zeros(())).view_as(R)


def last_step_broadcast(turn_rewards, outcome_rewards, turns, alpha=1.0, scale="group"):
    """Last-step broadcast (Trinity-RFT step_wise_grpo; SkyRL's step-wise trajectories, PR #436;
    rLLM's stepwise_advantage.mode broadcast): the last step's reward, normalised over the group's
    episodes, (r_T - mean) / (std + 1e-6), copied to every turn. In search the last step earns R^O,
    so this is GRPO-OR up to the epsilon (tests/test_field.py): it is no row of estimators.py."""
    r, played = step_rewards(turn_rewards, outcome_rewards, turns)
    last = (r * (torch.arange(1, r.shape[2] + 1) == played.sum(2, keepdim=True))).sum(2)
    centred = last - last.mean(1, keepdim=True)
    std = last.std(1, keepdim=True) if last.shape[1] > 1 else torch.ones_like(last)
    return torch.where(played, (centred / (std + 1e-6))[..., None], torch.zeros(()))


# ---------------------------------------------------------------- GiGPO's anchor states, in search
GIGPO_OMEGA, GIGPO_GAMMA = 1.0, 0.95  # as atgrpo.gigpo_advantages (verl-agent's defaults)


def anchor_states(observations, G, K):
    """(groups, G, K) ids of the state each turn began in, equal within a group where two episodes
    had seen the same thing: the question (turn 1, shared by all G) and the same observations since
    (the tool results, or the same error). The agent's own words are not part of the state, the
    environment's are: two different queries that retrieve the same document meet again.
    observations: per episode, the observation after each of its turns but the last (SearchEnv's
    user messages). -1 for a turn an episode did not play."""
    ids = torch.full((len(observations) // G, G, K), -1, dtype=torch.long)
    for g in range(len(observations) // G):
        seen = {}
        for i, obs in enumerate(observations[g * G:(g + 1) * G]):
            for k in range(len(obs) + 1):
                ids[g, i, k] = seen.setdefault(tuple(obs[:k]), len(seen))
    return ids


def anchor_state_groups(turn_rewards, outcome_rewards, turns, alpha=1.0, scale="group", states=None,
                        omega=GIGPO_OMEGA, gamma=GIGPO_GAMMA):
    """GiGPO (arXiv 2505.10978) in search, as atgrpo.gigpo_advantages computes it for the games:
    A_k = A^E + omega A^S_k. A^E = norm(R) over the G episodes, R the episode's summed rewards
    (GiGPO's episode group: GRPO-MR's advantage); A^S_k = norm of the discounted return from turn k,
    R_k = sum_{l>=k} gamma^(l-k) r_l (eq. 5), over the turns of the group that began in the same
    anchor state (`states`, anchor_states), the std of that step group ("none": centred only). A
    state one turn alone reached gives A^S = 0 (the singleton rule). alpha is not used."""
    r, played = step_rewards(turn_rewards, outcome_rewards, turns)
    states = torch.as_tensor(states, dtype=torch.long)
    if states.shape != r.shape:
        raise ValueError(f"states must be (groups, G, K) = {tuple(r.shape)}, got {tuple(states.shape)}")
    to_go, running = torch.zeros_like(r), torch.zeros_like(r[..., 0])
    for k in reversed(range(r.shape[2])):
        running = r[..., k] + gamma * running
        to_go[..., k] = running
    step = torch.zeros_like(r)
    for g in range(r.shape[0]):
        for s in states[g][played[g]].unique().tolist():
            members = played[g] & (states[g] == s)
            step[g][members] = group_norm(to_go[g][members][None], "none" if scale == "none" else "group")[0]
    episode = group_norm(r.sum(2), scale)
    return torch.where(played, episode[..., None] + omega * step, torch.zeros(()))


# ---------------------------------------------------------------- IGPO's information-gain turn reward
def gold_probabilities(model, tok, contexts, gold, fill_logprobs, temperature=1.0, micro_batch_size=8, bf16=True,
                       tag="answer"):
    """p = exp(mean log pi(gold tokens)) after each context, the answer teacher-forced as
    <answer>gold</answer> (IGPO, GuoqingWang1/IGPO at bff163b, scrl/llm_agent/generation.py lines
    295-423: the mean over the gold answer's tokens, under the current policy). contexts: token id
    lists; gold: one text per context; tag: the task's answer tag (rewards.Tags). Equal contexts are computed once. fill_logprobs is
    loss.fill_logprobs, passed in: config.py reads this file through estimators.py, and nothing
    config reaches may reach the update."""
    enc = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    opening, closing = enc(f"<{tag}>"), enc(f"</{tag}>")
    wanted = {}
    for c, g in zip(contexts, gold):
        wanted.setdefault((tuple(c), g), enc(g))
    rows = [Sample(ids=list(c) + opening + ids + closing, mask=[], adv=[]) for (c, _), ids in wanted.items()]
    for s in rows:
        s.mask = s.adv = [0] * len(s.ids)
    fill_logprobs(model, rows, "old_logp", temperature, micro_batch_size, bf16)
    for ((c, g), ids), s in zip(list(wanted.items()), rows):
        start, n = len(c) + len(opening), len(ids)  # the gold tokens; old_logp[t] scores token t + 1
        wanted[c, g] = torch.tensor(s.old_logp[start - 1:start - 1 + n], dtype=torch.float64).mean().exp().item()
    return [wanted[tuple(c), g] for c, g in zip(contexts, gold)]


def info_gains(model, tok, samples, answers, K, args, fill_logprobs, tag="answer"):
    """(episodes, K-1) IGPO's turn rewards R^T_k = p_k - p_{k-1} for each turn k that did not end its
    episode (0 after), p_k the gold answer's probability (gold_probabilities) once turn k's result
    is in the context, p_0 before turn 1. The context is the prompt turn k+1 was sampled from,
    without the prefill; the gold answer is the question's first."""
    cut = len(tok(args.prefill, add_special_tokens=False)["input_ids"]) if args.prefill else 0
    contexts = [(i, s.ids[:start - cut]) for i, s in enumerate(samples) for start in s.starts]
    p = gold_probabilities(model, tok, [c for _, c in contexts], [answers[i][0] for i, _ in contexts], fill_logprobs,
                           args.temperature, args.micro_batch_size or 8, args.bf16, tag)  # 0: auto, as train sizes it
    gains, at = torch.zeros(len(samples), K - 1, dtype=torch.float64), 0
    for i, s in enumerate(samples):
        mine, at = p[at:at + len(s.starts)], at + len(s.starts)
        for k in range(1, len(mine)):
            gains[i, k - 1] = mine[k] - mine[k - 1]
    return gains


def info_gain_turns(turn_rewards, outcome_rewards, turns, alpha=1.0, scale="group", info_gain=None):
    """MT-GRPO's advantages (mtgrpo.turn_advantages) with IGPO's information gain as the turn reward:
    A_k = sum_l alpha^(l-k) norm(IG_l) + alpha^(K-k) norm(R^O). No hand-written verifier decides a
    turn's reward. (IGPO's own advantage is the plain return-to-go minus the group's mean, with no
    std: not this.) turn_rewards is not used."""
    info_gain = torch.as_tensor(info_gain, dtype=torch.float64)
    if info_gain.shape != torch.as_tensor(turn_rewards).shape:
        raise ValueError(f"info_gain must have turn_rewards' shape {tuple(torch.as_tensor(turn_rewards).shape)}, "
                         f"got {tuple(info_gain.shape)}")
    return turn_advantages(info_gain, outcome_rewards, "mt", alpha, scale)


def inputs(needs, envs, samples, G, model, tok, args, fill_logprobs=None, tag="answer", critic=None):
    """What a tool-use row needs beyond its rewards (estimators.Estimator.needs), for one step's
    episodes (G per question, in order): "states" (anchor_states), "info_gain" (info_gains, with
    loss.fill_logprobs and the task's answer tag), "values" (the critic's V(s_k), critic.py) and
    "tokens" (the model tokens of each turn)."""
    out, K = {}, args.max_calls + 1
    if "states" in needs:
        out["states"] = anchor_states([[m["content"] for m in e.completion if m["role"] == "user"] for e in envs], G, K)
    if "info_gain" in needs:
        out["info_gain"] = info_gains(model, tok, samples, [e.answers for e in envs], K, args,
                                      fill_logprobs, tag).view(-1, G, K - 1)
    if "values" in needs:
        if critic is None:
            raise SystemExit(f"--algo {args.algo} needs a critic: train one with train.py --algo {args.algo}")
        out["values"] = critic.values(samples).view(-1, G, K)
    if "tokens" in needs:
        out["tokens"] = torch.tensor([[s.turn.count(k) for k in range(1, K + 1)] for s in samples]).view(-1, G, K)
    return out
