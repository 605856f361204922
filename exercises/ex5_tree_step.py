"""Exercise 5: one step of AT-GRPO's tree sampling.

Paper: AT-GRPO, "Stronger Together" (Zhao et al. 2025, arXiv 2510.11062v1). At turn t, agent a of
environment e samples K candidates from the same prompt. Each candidate is played on its own copy
of the environment and scored; the K form one group keyed (e, a, t), so they are compared with
each other fairly. The episode then continues from the best candidate (greedy):

    r_j    = copy_j.act(a, text_j)           copy_j = env.copy(), j = 1..K
    chosen = argmax_j r_j                    ties to the lowest index
    key    = (e, a, t)                       t = env.turn + 1, the 1-based turn
    branch = copy_chosen                     the state every later turn starts from

r_j is the agent's reward, local + alpha * team (env_two_roles.py). Here each role's team term
comes from the state its own answer made; with --team-term shared, as in the paper's code
(PettingLLMs 2e3c5f2, agents/tool_agent.py and plan_agent.py, calculate_reward), the planner's is
the executor's, added once the turn is over: one number for all K, so the choice stays
(docs/planpath.md, Rewards).

The original environment is never acted on: stepping it would play a move that was never chosen.
(The public code mixes them up: PettingLLMs, pettingllms/trainer/multi_agents_execution_engine.py
at commit a054fb1, acts on the original envs at line 750 while the prompts and rewards read the
chosen branch's copies made at line 825; see docs/exercises.md.)

Mirrors: atgrpo.tree_step.   Check your answer:  python exercises/check.py 5
"""


def tree_step(env, env_id, role, candidates):
    """Score K candidates on copies of env and pick the branch to continue from.

    env: an environment with .turn (turns completed so far), .copy() (an independent copy)
        and .act(role, text) -> float reward (acting changes the env it is called on).
    env_id: the environment's id.   role: the agent that acts now.
    candidates: list of K tuples (prompt_ids, response_ids, text); only text is played.
    Returns (key, rewards, chosen, branch):
      key = (env_id, role, env.turn + 1); rewards = list of the K rewards, in candidate order;
      chosen = index of the best reward, the lowest such index on ties;
      branch = the copy that the chosen candidate acted on.

    Hints:
      - one env.copy() per candidate, and keep the copies: one of them is the branch.
      - on equal rewards the lowest index wins: check what your argmax does on a tie.
      - read env.turn from env, not from a copy that has already acted.
    """
    raise NotImplementedError
