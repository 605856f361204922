"""tools/scale_trl.py on several processes: are the groups normalised across processes?

With --algo mr our advantage of an episode is norm(R^T + R^O), and TRL's own reward is the sum of
the six rewards, R^T + R^O: so on every rank, every model token of every episode must carry the
sequence advantage TRL computed itself from the rewards it gathered from all processes. With
G = 4 and 2 episodes per process, each group is split over two processes.

    torchrun --nproc_per_node 2 scripts/trl_multiprocess_check.py                     # CPU, bundled model
    accelerate launch --num_processes 8 scripts/trl_multiprocess_check.py --model M    # GPUs

(On the CPU, `accelerate launch --cpu --num_processes 2` started one process here, with no
distributed state; torchrun starts two, which TRL runs as MULTI_CPU over gloo.)

Extra flags go to tools/scale_trl.py. Prints one line per rank and step; exits non-zero on a mismatch.
"""
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools import scale_trl  # noqa: E402


class Checked(scale_trl.TurnLevelGRPOTrainer):
    """Compares each rank's per-token advantages with TRL's gathered sequence advantages."""

    def token_advantages(self, inputs, width):
        adv = super().token_advantages(inputs, width)
        ranks, rank = self.accelerator.num_processes, self.accelerator.process_index
        trls = list(self._logs["advantages"])[-len(inputs) * ranks:][rank * len(inputs):][:len(inputs)]
        for i, x in enumerate(inputs):
            model_tokens = torch.tensor([k > 0 for k in x["turn_of_token"]])
            ours = adv[i, :len(model_tokens)][model_tokens.to(adv.device)].cpu()
            if not torch.allclose(ours, torch.full_like(ours, trls[i]), atol=1e-5):
                raise SystemExit(f"rank {rank}, episode {i}: ours {ours.unique().tolist()} != TRL's {trls[i]:.6f}")
        print(f"rank {rank} of {ranks}: {len(inputs)} episodes, per-token advantages equal TRL's gathered "
              f"ones: {[round(a, 4) for a in trls]}", flush=True)
        return adv


if __name__ == "__main__":
    scale_trl.TurnLevelGRPOTrainer = Checked
    with tempfile.TemporaryDirectory() as out:
        scale_trl.main(["--algo", "mr", "--num_generations", "4", "--per_device_train_batch_size", "2",
                        "--max_steps", "2", "--max_completion_length", "24", "--save_strategy", "no",
                        "--output_dir", out, *sys.argv[1:]])
