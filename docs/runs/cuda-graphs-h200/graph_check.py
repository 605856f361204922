"""Device check of decode.GraphedSteps: tokens (graph vs the same steps eager, fp32 vs generate),
then ms a step of the 0.5B-shaped card, graphed vs the loop (graphed=False), 64 rows."""
import json, os, sys, tempfile, time
ROOT = os.getcwd()
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "scripts")]
import torch
import qwen_style
from machinery import decode
from policy import load_model
from qwen_shaped_smoke import SHAPES
from tools import bench

out, smollm = {}, ".kit/smollm"  # DIR: SmolLM2's tokenizer.json
dev = "cuda" if torch.cuda.is_available() else "cpu"
def sync():
    if dev == "cuda": torch.cuda.synchronize()
def turn(model, tok, prompts, n, **kw):
    sync(); t = time.perf_counter(); new = decode.generate_turn(model, tok, prompts, n, greedy=True, **kw); sync()
    return time.perf_counter() - t, new
with tempfile.TemporaryDirectory() as work:
    for name, shape, rows, n in (("tiny", dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, initializer_range=0.3), 4, 24),
                                 ("0.5B", SHAPES["0.5B"], 8, 128 if dev == "cuda" else 4)):
        path = os.path.join(work, name)
        qwen_style.save_model(path, "base", smollm, max_position_embeddings=32768, **shape)
        model, tok = load_model(path, dev)
        base = bench.search_prompts(tok, rows)[1]
        prompts = [p[:len(p) - i % 3] for p in base for i in range(8)]  # 8 a prompt, lengths differ
        capture, real = [], decode.GraphedSteps.capture
        decode.GraphedSteps.capture = lambda self: (capture.append(1), real(self))
        r = {}
        for bf16 in (True, False):
            kind = "bf16" if bf16 else "fp32"
            turn(model, tok, prompts, 8, bf16=bf16); turn(model, tok, prompts, 8, bf16=bf16, graphed=False)  # warm
            tg, g = turn(model, tok, prompts, n, bf16=bf16)
            tl, l = turn(model, tok, prompts, n, bf16=bf16, graphed=False)
            decode.GraphedSteps.capture = lambda self: setattr(self, "graph", None)
            te, e = turn(model, tok, prompts, n, bf16=bf16)
            decode.GraphedSteps.capture = lambda self: (capture.append(1), real(self))
            r[kind] = dict(graphed_ms=round(1e3 * tg / n, 2), loop_ms=round(1e3 * tl / n, 2), eager_fixed_ms=round(1e3 * te / n, 2),
                           rows=len(prompts), same_as_eager_fixed=f"{sum(a == b for a, b in zip(g, e))}/{len(g)}",
                           same_as_loop=f"{sum(a == b for a, b in zip(g, l))}/{len(g)}")
            if not bf16:
                th, h = turn(model, tok, prompts, n, bf16=False, reference=True)
                r[kind].update(generate_ms=round(1e3 * th / n, 2), same_as_generate=f"{sum(a == b for a, b in zip(g, h))}/{len(g)}")
            print(name, kind, r[kind], flush=True)
        r["captures"] = len(capture)
        if dev == "cuda":
            r["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 2)
        out[name] = r
        decode.GraphedSteps.capture = real
        del model; torch.cuda.empty_cache() if dev == "cuda" else None
print(json.dumps(out, indent=1))
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "graph_check.json"), "w"), indent=1)
