"""MT-GRPO inside TRL's GRPOTrainer, for runs bigger than one GPU: a tool-use task of tasks.py
(--env: search, the default, or calc), its rewards and turn-level advantages, with TRL's scaling (accelerate: DDP, FSDP, DeepSpeed ZeRO;
vLLM generation). Read train.py first; this file is only the bridge. Commands: docs/scale.md.

    python tools/scale_trl.py --max_steps 1 --output_dir runs/trl-smoke          # CPU smoke, bundled model
    accelerate launch --config_file zero2.yaml tools/scale_trl.py --model Qwen/Qwen2.5-7B-Instruct \\
        --use_vllm --vllm_mode colocate --bf16 --output_dir runs/trl-7b

Three pieces; everything else is TRL's own (flags: GRPOConfig's names, `--help` lists them):
  rollout_func          plays the task's two-turn episodes with policy.play_episodes through TRL's
                        generator (our decode loop on TRL's model, or TRL's vLLM with --use_vllm)
                        and returns the model tokens and the environment tokens, env_mask 0 on
                        the environment tokens: they stay in attention and carry no loss
  reward_funcs          the rewards of the task's rubric (search: rewards.py's six), which TRL logs one by one
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

import config
import estimators
import mtgrpo
import rewards
import tasks
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
    env: str = dataclasses.field(default=config.Args.env, metadata={"help": "a tool-use task of tasks.py: " + ", ".join(
        tasks.names("tool"))})
    model: str = dataclasses.field(default=BUNDLED, metadata={"help": "hub id, local folder, or the bundled model"})
    algo: str = dataclasses.field(default="mt", metadata={"help": "a tool-use estimator of estimators.py that "
                                                                  "needs the rewards alone: "
                                                                  + ", ".join(estimators.names("tool", needing=()))})
    alpha: float = dataclasses.field(default=1.0, metadata={"help": "MT-GRPO turn discount"})
    one_shot: bool = dataclasses.field(default=True, metadata={"help": "show the worked example"})
    search_top_k: int = dataclasses.field(default=1, metadata={"help": "search: documents per search (train.py: --top-k)"})
    max_words: int = dataclasses.field(default=120, metadata={"help": "search: words per document shown"})
    retriever_url: str = dataclasses.field(default="", metadata={"help": "search: Search-R1-style server (full Wikipedia)"})
    corpus: str = dataclasses.field(default="", metadata={"help": "search: JSONL of {title, text} instead of the bundled one"})
    train_questions: str = dataclasses.field(default="", metadata={"help": "search: JSONL of {question, answers}"})
    prefill: str = dataclasses.field(default="<reasoning>", metadata={"help": "text that starts every turn"})


# TaskArgs' flags as train.py names them (search_top_k: TRL's GRPOConfig has a top_k of its own)
AS_TRAIN = {"search_top_k": "top_k", "max_words": "max_words", "retriever_url": "retriever_url", "corpus": "corpus",
            "train_questions": "train_questions", "one_shot": "one_shot", "prefill": "prefill"}


def run_args(task):
    """config.Args of the task's flags, checked as train.py checks them (another task's flag is refused)."""
    defaults = {f.name: f.default for f in dataclasses.fields(TaskArgs)}
    argv = [f"--{theirs.replace('_', '-')}={getattr(task, ours)}" for ours, theirs in AS_TRAIN.items()
            if getattr(task, ours) != defaults[ours]]
    return config.parse_args(["--env", task.env, *argv])


# ---------------------------------------------------------------- rewards (the task's rubric)
def reward_func(rubric, name):
    """TRL reward function for one of the rubric's rewards, scored on the episode."""
    def score(completions, episode, answers, **_):
        return [rewards.reward_components(e, a, rubric)[name] for e, a in zip(episode, answers)]
    score.__name__ = name
    return score


def reward_funcs(rubric):
    return [reward_func(rubric, name) for name in rubric.maxima]


# ---------------------------------------------------------------- rollout
def make_env(prompt, data, args):
    """The episode of a dataset prompt (its last message is the question)."""
    return tasks.TASKS[args.env].make_env({"question": prompt[-1]["content"], "answers": []}, data, args)


def make_rollout(task, data):
    """TRL's rollout_func: one two-turn episode per prompt (the prompts come G times each)."""
    ours = run_args(task)
    stop = tasks.TASKS[ours.env].stop_strings

    def rollout_func(prompts, trainer):
        tok, args = trainer.processing_class, trainer.args
        envs = [make_env(p, data, ours) for p in prompts]
        cfg = SimpleNamespace(prefill=ours.prefill, max_completion_length=args.max_completion_length,
                              temperature=args.temperature, top_p=args.top_p, bf16=args.bf16, plain=False)
        if args.use_vllm:  # one turn for every active episode, as token ids: TRL's vLLM (server or colocate)
            vllm_turn = lambda ids: trainer.vllm_generation.generate(ids, None, 1)[1]  # noqa: E731
            samples, _ = play_episodes(None, tok, envs, cfg, stop, generate=vllm_turn)
        else:  # our decode loop on TRL's model, unwrapped as TRL does for its own generate
            with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                             gather_deepspeed3_params=args.ds3_gather_for_generation) as model, \
                    torch.no_grad(), trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False):
                samples, _ = play_episodes(model, tok, envs, cfg, stop)
        start = [len(prompt_ids(tok, e.messages, ours.prefill)) for e in envs]
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

    def __init__(self, *args, algo="mt", alpha=1.0, rubric=rewards.MT_GRPO, **kwargs):
        super().__init__(*args, **kwargs)
        self.algo, self.alpha, self.rubric = algo, alpha, rubric

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)  # rollout, TRL's rewards, logs
        out["advantages"] = self.token_advantages(inputs, out["completion_ids"].shape[1])
        return out

    def token_advantages(self, inputs, width):
        """(B, width): A_k on the tokens of turn k, 0 on environment tokens and padding. Groups
        are normalised over all processes' episodes, as TRL does for its own advantages."""
        G = self.num_generations
        local = torch.tensor([[rewards.turn_reward(x["episode"], x["answers"], self.rubric),
                               rewards.outcome_reward(x["episode"], x["answers"], self.rubric), max(x["turn_of_token"], default=1)]
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
    if task.algo not in estimators.names("tool", needing=()):  # GiGPO's states, IGPO's probabilities: train.py only
        parser.error(f"--algo must be one of {', '.join(estimators.names('tool', needing=()))}, got {task.algo!r}"
                     + (": it learns a critic, and TRL's GRPOTrainer trains none; train it with train.py"
                        if estimators.trains_critic(task.algo) else
                        ": its inputs beyond the rewards are made by train.py only" if task.algo in estimators.BY_NAME else ""))
    if config.loss_type not in ("dapo", "grpo"):
        parser.error("--loss_type: dapo (ours token) or grpo (ours seq); the others are not MT-GRPO's loss")
    if task.env not in tasks.names("tool"):
        parser.error(f"--env must be a tool-use task of tasks.py: {', '.join(tasks.names('tool'))}, got {task.env!r}")
    run_args(task)  # the task's flags, checked now
    return task, config


def training_set(items, data, args):
    """The training questions as TRL's dataset: the prompt messages and the gold answers."""
    rows = [{"prompt": make_env([{"content": q["question"]}], data, args).messages, "answers": q["answers"]}
            for q in items]
    return datasets.Dataset.from_list(rows)


def main(argv=None):
    task, config = parse(argv)
    ours = run_args(task)
    try:
        data, items, _ = tasks.TASKS[ours.env].load(ours)  # search: the retriever and the questions
        dataset = training_set(items, data, ours)
    except (ImportError, OSError, ValueError) as e:
        raise SystemExit(f"Could not load the data: {e}")
    if config.use_vllm:  # a turn ends at a tool call or an answer, which the environment must see
        config.generation_kwargs = {"stop": tasks.TASKS[ours.env].stop_strings, "include_stop_str_in_output": True,
                                    **(config.generation_kwargs or {})}
    model = bundled_model_dir() if task.model == BUNDLED else task.model
    if os.path.isdir(model) and not os.path.exists(os.path.join(model, "config.json")):
        raise SystemExit(f"{task.model} is a folder but not a model (no config.json): give a hub id or a model folder")
    rubric = tasks.TASKS[ours.env].rubric
    trainer = TurnLevelGRPOTrainer(model=model, reward_funcs=reward_funcs(rubric), args=config, train_dataset=dataset,
                                   rollout_func=make_rollout(task, data), algo=task.algo, alpha=task.alpha, rubric=rubric)
    trainer.train()


if __name__ == "__main__":
    main()
