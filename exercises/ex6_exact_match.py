"""Exercise 6: the exact-match reward of MT-GRPO.

Paper: MT-GRPO, Zeng et al. 2025, arXiv 2505.11821v1: part of the outcome reward R^O is 1.0 when
the final answer is exactly one of the gold aliases (TriviaQA lists several per question).

    final answer = the stripped text inside the first <answer>...</answer> of the LAST assistant
                   turn that contains such a pair (earlier turns count if later ones have none)
    reward       = 1.0 if answer.lower().strip() == alias.lower().strip() for some alias,
                   0.0 otherwise, and 0.0 when there is no answer or the answer is blank

Mirrors: rewards.exact_match_reward (with rewards.final_answer and rewards.exact_match).
Check your answer:  python exercises/check.py 6
"""
import re


def exact_match_reward(completion, answers):
    """1.0 if the final answer is exactly a gold alias (ignoring case and outer spaces), else 0.0.

    completion: list of chat messages {"role": "assistant" or "user", "content": str}: the model's
        turns and the environment's replies (tool results come back as "user" messages).
    answers: list of gold aliases (str).
    Returns a float.

    Hints:
      - an answer may span several lines, and it ends at the first closing tag after it.
      - only "assistant" messages hold the model's answers; the last one that has an answer
        counts.
      - "Paris, France" is not "Paris": the whole answer must equal an alias, not contain it.
      - a blank answer never matches, not even a blank alias.
    """
    raise NotImplementedError
