"""MT-GRPO inside TRL's GRPOTrainer, for runs bigger than one GPU: our search environment,
rewards and turn-level advantages, with TRL's scaling (accelerate: DDP, FSDP, DeepSpeed ZeRO;
vLLM generation). Read train.py first; this file is only the bridge. Commands: docs/scale.md.

    python tools/scale_trl.py --max_steps 1 --output_dir runs/trl-smoke          # CPU smoke, bundled model
    accelerate launch --config_file zero2.yaml tools/scale_trl.py --model Qwen/Qwen2.5-7B-Instruct \\
        --use_vllm --vllm_mode colocate --bf16 --output_dir runs/trl-7b

Three pieces; everything else is TRL's own (flags: GRPOConfig's names, `--help` lists them):
  rollout_func          plays two-turn SearchEnv episodes with policy.play_episodes through TRL's
                        generator (our decode loop on TRL's model, or TRL's vLLM with --use_vllm)
                        and returns the model tokens and the environment tokens, env_mask 0 on
                        the environment tokens: they stay in attention and carry no loss
  REWARD_FUNCS          the six rewards of rewards.py, which TRL logs one by one
  TurnLevelGRPOTrainer  replaces TRL's one advantage per sequence by MT-GRPO's per token: every
                        model token of turn k carries A_k (the --algo row of estimators.py, --alpha)
Loss: TRL's loss_type "dapo" (the default here) is ours `--loss-type token`, "grpo" is ours `seq`;
tests/test_scale_trl.py checks both against loss.policy_update on the same batch.
"""
import dataclasses
import os
from types import SimpleNamespace

import torch

import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project root: python tools/scale_trl.py

import env_search
import estimators
import mtgrpo
import questions as qa
import rewards
import retrieval
from policy import BUNDLED, bundled_model_dir, play_episodes, prompt_ids

try:
    import datasets
    from trl import GRPOConfig, GRPOTrainer, TrlParser
    from trl.models import unwrap_model_for_generation
except ImportError as e:
    raise SystemExit(f"tools/scale_trl.py needs TRL ({e}): pip install -r requirements-scale.txt -c requirements.txt")

# where TRL's defaults differ from ours (train.py): ours win unless given on the command line
OUR_DEFAULTS = dict(output_dir="runs/trl", max_completion_length=64, learning_rate=1e-5, beta=0.0,
                    loss_type="dapo", scale_rewards="group", temperature=1.0, epsilon=0.2, logging_steps=1,
                    report_to="none", disable_dropout=True, gradient_checkpointing=False,
                    vllm_importance_sampling_correction=False,
                    use_cpu=not torch.cuda.is_available())


@dataclasses.dataclass
class TaskArgs:
    """The task's flags (as train.py's); TRL's GRPOConfig flags are accepted beside them."""
    model: str = dataclasses.field(default=BUNDLED, metadata={"help": "hub id, local folder, or the bundled model"})
    algo: str = dataclasses.field(default="mt", metadata={"help": "a search estimator of estimators.py that "
                                                                  "needs the rewards alone: "
                                                                  + ", ".join(estimators.names("search", needing=()))})
    alpha: float = dataclasses.field(default=1.0, metadata={"help": "MT-GRPO turn discount"})
    one_shot: bool = dataclasses.field(default=True, metadata={"help": "show the worked example"})
    search_top_k: int = dataclasses.field(default=1, metadata={"help": "documents per search (train.py: --top-k)"})
    max_words: int = dataclasses.field(default=120, metadata={"help": "words per document shown"})
    retriever_url: str = dataclasses.field(default="", metadata={"help": "Search-R1-style server (full Wikipedia)"})
    corpus: str = dataclasses.field(default="", metadata={"help": "JSONL of {title, text} instead of the bundled one"})
    train_questions: str = dataclasses.field(default="", metadata={"help": "JSONL of {question, answers}"})
    prefill: str = dataclasses.field(default="<reasoning>", metadata={"help": "text that starts every turn"})


# ---------------------------------------------------------------- rewards (rewards.py)
def reward_func(name):
    """TRL reward function for one of rewards.py's six components, scored on the episode."""
    def score(completions, episode, answers, **_):
        return [rewards.reward_components(e, a)[name] for e, a in zip(episode, answers)]
    score.__name__ = name
    return score


REWARD_FUNCS = [reward_func(name) for name in rewards.MAXIMA]


# ---------------------------------------------------------------- rollout
def make_env(prompt, retriever, task):
    """The SearchEnv of a dataset prompt (its last message is the question)."""
    return env_search.SearchEnv(prompt[-1]["content"], [], retriever, k=task.search_top_k,
                                max_words=task.max_words, one_shot=task.one_shot)


def make_rollout(task, retriever):
    """TRL's rollout_func: one two-turn episode per prompt (the prompts come G times each)."""
    def rollout_func(prompts, trainer):
        tok, args = trainer.processing_class, trainer.args
        envs = [make_env(p, retriever, task) for p in prompts]
        cfg = SimpleNamespace(prefill=task.prefill, max_completion_length=args.max_completion_length,
                              temperature=args.temperature, top_p=args.top_p, bf16=args.bf16, plain=False)
        if args.use_vllm:  # one turn for every active episode, as token ids: TRL's vLLM (server or colocate)
            vllm_turn = lambda ids: trainer.vllm_generation.generate(ids, None, 1)[1]  # noqa: E731
            samples, _ = play_episodes(None, tok, envs, cfg, env_search.STOP_STRINGS, generate=vllm_turn)
        else:  # our decode loop on TRL's model, unwrapped as TRL does for its own generate
            with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                             gather_deepspeed3_params=args.ds3_gather_for_generation) as model, \
                    torch.no_grad(), trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False):
                samples, _ = play_episodes(model, tok, envs, cfg, env_search.STOP_STRINGS)
        start = [len(prompt_ids(tok, e.messages, task.prefill)) for e in envs]
        return {"prompt_ids": [s.ids[:n] for s, n in zip(samples, start)],
                "completion_ids": [s.ids[n:] for s, n in zip(samples, start)],
                "logprobs": None,  # TRL computes them itself
                "env_mask": [[int(k > 0) for k in s.turn[n:]] for s, n in zip(samples, start)],
                "turn_of_token": [s.turn[n:] for s, n in zip(samples, start)],
                "episode": [e.completion for e in envs]}
    return rollout_func


# ---------------------------------------------------------------- turn-level advantages
class TurnLevelGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with MT-GRPO's per-token advantages; nothing else of TRL changes."""

    def __init__(self, *args, algo="mt", alpha=1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.algo, self.alpha = algo, alpha

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)  # rollout, TRL's rewards, logs
        out["advantages"] = self.token_advantages(inputs, out["completion_ids"].shape[1])
        return out

    def token_advantages(self, inputs, width):
        """(B, width): A_k on the tokens of turn k, 0 on environment tokens and padding. Groups
        are normalised over all processes' episodes, as TRL does for its own advantages."""
        G = self.num_generations
        local = torch.tensor([[rewards.turn_reward(x["episode"], x["answers"]),
                               rewards.outcome_reward(x["episode"], x["answers"]), max(x["turn_of_token"], default=1)]
                              for x in inputs], device=self.accelerator.device)  # R^T, R^O, turns played
        both = self.accelerator.gather(local).double().cpu()
        A = estimators.BY_NAME[self.algo].fn(both[:, :1].view(-1, G, 1), both[:, 1].view(-1, G), both[:, 2].long().view(
            -1, G), self.alpha, self.scale_rewards).view(len(both), -1)
        mine = A[self.accelerator.process_index * len(inputs):][:len(inputs)]
        adv = torch.zeros(len(inputs), width)
        for i, x in enumerate(inputs):
            per_token, _ = mtgrpo.token_advantages(x["turn_of_token"], mine[i].tolist())
            adv[i, :len(per_token)] = torch.tensor(per_token)
        return adv.to(self.accelerator.device)


# ---------------------------------------------------------------- command line
def parse(argv=None):
    parser = TrlParser((TaskArgs, GRPOConfig))
    parser.set_defaults(**OUR_DEFAULTS)
    try:
        task, config = parser.parse_args_and_config(argv)
    except ValueError as e:  # TRL's and transformers' own checks of GRPOConfig
        parser.error(str(e).splitlines()[0])
    if task.algo not in estimators.names("search", needing=()):  # GiGPO's states, IGPO's probabilities: train.py only
        parser.error(f"--algo must be one of {', '.join(estimators.names('search', needing=()))}, got {task.algo!r}"
                     + (": its inputs beyond the rewards are made by train.py only" if task.algo in estimators.BY_NAME else ""))
    if config.loss_type not in ("dapo", "grpo"):
        parser.error("--loss_type: dapo (ours token) or grpo (ours seq); the others are not MT-GRPO's loss")
    return task, config


def training_set(task, retriever):
    """The training questions as TRL's dataset: the prompt messages and the gold answers."""
    if task.train_questions:
        questions = qa.load_qa_jsonl(task.train_questions)
    else:
        questions = qa.train_test_questions("", "", task.corpus)[0]
    rows = [{"prompt": make_env([{"content": q["question"]}], retriever, task).messages,
             "answers": q["answers"]} for q in questions]
    return datasets.Dataset.from_list(rows)


def main(argv=None):
    task, config = parse(argv)
    try:
        retriever = retrieval.make_retriever(task.retriever_url or None, task.corpus or None, task.max_words)
        if task.retriever_url:
            retrieval.check_retriever(retriever)
        data = training_set(task, retriever)
    except (ImportError, OSError, ValueError) as e:
        raise SystemExit(f"Could not load the data: {e}")
    if config.use_vllm:  # a turn ends at a tool call or an answer, which the environment must see
        config.generation_kwargs = {"stop": env_search.STOP_STRINGS, "include_stop_str_in_output": True,
                                    **(config.generation_kwargs or {})}
    model = bundled_model_dir() if task.model == BUNDLED else task.model
    if os.path.isdir(model) and not os.path.exists(os.path.join(model, "config.json")):
        raise SystemExit(f"{task.model} is a folder but not a model (no config.json): give a hub id or a model folder")
    trainer = TurnLevelGRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=config, train_dataset=data,
                                   rollout_func=make_rollout(task, retriever), algo=task.algo, alpha=task.alpha)
    trainer.train()


if __name__ == "__main__":
    main()
