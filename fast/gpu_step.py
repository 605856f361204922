"""The decode loop's one-token steps on a GPU (fast/decode.py enters both for each turn; read it
first): attention without cuDNN's kernel, and the steps of a turn replayed as one CUDA graph. On a GPU
an eager step is launch-bound: the GPU waits on the host launching the kernels of every layer.
"""
import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def sdpa_without_cudnn(model):
    """On a GPU, attention without SDPA's cuDNN backend for the turn; elsewhere nothing changes.
    cuDNN's attention builds a graph for every new shape, and the keys grow by one at every step:
    on an H200 a step at key lengths not met before took 79-82 ms with it, 28-34 ms without
    (docs/benchmarks.md). Flash or memory-efficient attention run instead."""
    if model.device.type != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class GraphedSteps:
    """The one-token steps of a turn on a GPU, captured once as a CUDA graph and replayed: one launch
    a step instead of about 1,100 kernels (the 0.5B shape at 64 rows on an H200: 30.8 -> 7.0 ms a
    step in bf16, docs/benchmarks.md). A graph replays fixed shapes and addresses, so every row
    stays in the batch to the turn's end (a stopped row's tokens are dropped, as `generate` drops
    them), the cache keeps the turn's width (TurnLayer.fix_shape) under a ready mask whose next
    column is set at each step, and sampling stays outside the graph. On a CPU (the tests) the
    same steps run eagerly."""

    def __init__(self, model, cache, attn, pos, max_new_tokens):
        self.model, self.cache, self.column = model, cache, attn.shape[1]
        self.mask = F.pad(attn.bool(), (0, max_new_tokens))[:, None, None, :]
        self.token, self.pos = pos.new_zeros(len(pos), 1), pos[:, None].clone()
        for layer in cache.layers:
            layer.fix_shape()
        self.graph = torch.cuda.CUDAGraph() if model.device.type == "cuda" else None
        if self.graph is not None:
            self.capture()

    def forward(self):
        kind = self.model.device.type  # autocast's weight cache off: a captured step casts the weights itself
        with torch.autocast(kind, torch.get_autocast_dtype(kind), enabled=torch.is_autocast_enabled(kind),
                            cache_enabled=False):
            return self.model(input_ids=self.token, position_ids=self.pos, attention_mask=self.mask,
                              past_key_values=self.cache).logits[:, -1]

    def capture(self):
        """Two steps warm up on a side stream (as capture wants), then one is captured. Their keys
        land past the prompt, masked, and are overwritten by the turn's own."""
        with torch.cuda.device(self.model.device):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.forward(), self.forward()
            torch.cuda.current_stream().wait_stream(side)
            for layer in self.cache.layers:
                layer.at.fill_(self.column)
            with torch.cuda.graph(self.graph):
                self.logits = self.forward()

    def __call__(self, token):
        """The logits after `token` (one a row): its position, its own key unmasked, one step."""
        self.token.copy_(token[:, None])
        self.pos.add_(1)
        self.mask[..., self.column] = True
        self.column += 1
        if self.graph is None:
            return self.forward()
        self.graph.replay()
        return self.logits
