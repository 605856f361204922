"""A step's rollouts as data: OUT/rollouts/step_N.jsonl (written by checkpoint.save_rollouts) read
back, its groups, and each rollout cut into its turns with their rewards and advantages. One
group as a table is what the trackers show at each evaluation (machinery/trackers.py); tools/show.py
draws the same rows as an HTML page or AT-GRPO's tree.
"""
import sys

from machinery.records import read_jsonl

KEYS = ("group", "role", "rewards", "tokens", "mask", "adv", "turn")


# ---------------------------------------------------------------- reading
def read_rollouts(path):
    """One dict per line, as checkpoint.save_rollouts writes them; a last line cut by a kill is
    left out with a note (--resume writes that step again), any other bad line stops with it named."""
    types = {"group": str, "role": str} | {k: list for k in ("tokens", "mask", "adv", "turn", "rewards")}
    try:
        rows = read_jsonl(path, types, row_problem, cut_end=True)
    except ValueError as e:
        raise SystemExit(f"{e}; expected one JSON object with {', '.join(KEYS)} per line, as train.py "
                         "writes them") from None
    with open(path, "rb") as f:
        if sum(1 for line in f if line.strip()) > len(rows):
            print(f"note: {path}: its last line was cut (the run stopped while writing it) and is "
                  "left out", file=sys.stderr)
    return rows


def row_problem(row):
    """What is wrong with a rollout row whose keys have the right types, or None: the per-token
    lists are as long as tokens, tokens are text, the rest numbers (the page escapes and colours them)."""
    if not len(row["tokens"]) == len(row["mask"]) == len(row["adv"]) == len(row["turn"]):
        return "tokens, mask, adv and turn differ in length"
    if not all(isinstance(t, str) for t in row["tokens"]):
        return "'tokens' must hold only strings"
    for key in ("mask", "adv", "turn", "rewards"):
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in row[key]):
            return f"'{key}' must hold only numbers"
    if not row["rewards"]:
        return "'rewards' is empty (a row holds the reward of each of its turns)"
    return None


def groups_of(rows):
    """[(group name, its rows)] in the order the groups first appear."""
    groups = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    return list(groups.items())


def pick_group(groups, index=None):
    """Index I, or by default the first group that trains (some advantage not zero), else 0."""
    if index is None:
        return next((i for i, (_, rows) in enumerate(groups)
                     if any(a for r in rows for a in r["adv"])), 0)
    if not 0 <= index < len(groups):
        raise SystemExit(f"--group {index}: this step has {len(groups)} groups; "
                         f"pick one of 0..{len(groups) - 1}")
    return index


# ---------------------------------------------------------------- one rollout, cut into its turns
def segments(row):
    """Runs of tokens [(kind, turn, indices)]: the prompt, each turn's model tokens, and the
    environment tokens between turns (tool results, error messages)."""
    segs, seen_model = [], False
    for i, t in enumerate(row["turn"]):
        kind = "turn" if t > 0 else ("environment" if seen_model else "prompt")
        seen_model |= t > 0
        if segs and segs[-1][:2] == (kind, t):
            segs[-1][2].append(i)
        else:
            segs.append((kind, t, [i]))
    return segs


def prompt_of(row):
    """The prompt's tokens (the masked tokens before the first model token)."""
    segs = segments(row)
    return [row["tokens"][i] for i in segs[0][2]] if segs and segs[0][0] == "prompt" else []


def advantage_of_turn(row):
    """{turn k: A_k}: every model token of turn k carries its turn's advantage A_k."""
    return dict(sorted((t, a) for a, m, t in zip(row["adv"], row["mask"], row["turn"]) if m and t > 0))


def reward_labels(row):
    """Tool use: rewards[k] belongs to turn k, the last one is the outcome reward R^O (only a
    tool-use sample has more than one reward). The games: AT-GRPO's one reward belongs to the turn the sample's tokens were generated at;
    the GRPO baseline and GiGPO give every sample of a trajectory that trajectory's return (their
    groups are named "trajectories of level ...", atgrpo.trajectory_samples)."""
    turns = sorted(advantage_of_turn(row)) or [1]
    if row["group"].startswith("trajectories of"):
        return ["trajectory return"]
    if len(row["rewards"]) == 1:
        return [f"turn {turns[0]}"]
    return [f"turn {k + 1}" + (" (outcome)" if k == len(row["rewards"]) - 1 else "")
            for k in range(len(row["rewards"]))]


# ---------------------------------------------------------------- one group as a table
def group_table(rows, prompt_end=300):
    """(columns, data) of one group for a tracker's table (machinery/trackers.py): a row per
    rollout with the last prompt_end characters of its prompt, each turn's text (the
    environment's reply after it, marked), then its rewards and its advantage per turn as numbers
    (a column each, which a tracker can sort; None where a rollout has no such turn)."""
    turns = max((t for r in rows for t in r["turn"]), default=0)
    labels = list(dict.fromkeys(l for r in rows for l in reward_labels(r)))
    columns = (["rollout", "prompt (end)"] + [f"turn {k}" for k in range(1, turns + 1)]
               + [f"reward: {l}" for l in labels] + [f"advantage: turn {k}" for k in range(1, turns + 1)])
    data = []
    for k, row in enumerate(rows):
        texts, last = {t: "" for t in range(1, turns + 1)}, 0
        for kind, t, idx in segments(row):
            text = "".join(row["tokens"][i] for i in idx)
            if kind == "turn":
                texts[t], last = texts[t] + text, t
            elif kind == "environment":  # the reply to the turn before it
                texts[last] += " [environment] " + text.strip()
        rewards = dict(zip(reward_labels(row), row["rewards"]))
        advs = advantage_of_turn(row)
        data.append([k, "".join(prompt_of(row))[-prompt_end:], *texts.values(),
                     *(rewards.get(l) for l in labels), *(advs.get(t) for t in range(1, turns + 1))])
    return columns, data


def greedy_table(path):
    """(columns, data) of a greedy evaluation's episodes (checkpoint.save_greedy) for a tracker's
    table: a row per test question in order, with its answers, the model's turns (the
    environment's replies marked) and its exact match as a number, so that one sees which
    question flipped between evaluations. Read as data: SystemExit in one line if malformed."""
    try:
        rows = read_jsonl(path, {"question": str, "answers": list, "completion": list, "exact_match": int}, cut_end=True)
    except ValueError as e:
        raise SystemExit(f"{e}; expected one JSON object with question, answers, completion and exact_match "
                         "per line, as train.py writes them") from None
    data = []
    for i, r in enumerate(rows):
        turns = " ".join(m.get("content", "") if m.get("role") == "assistant" else f"[environment] {m.get('content', '')}"
                         for m in r["completion"] if isinstance(m, dict))
        data.append([i, r["question"], " | ".join(map(str, r["answers"])), turns, float(r["exact_match"])])
    return ["question #", "question", "answers", "episode", "exact match"], data
