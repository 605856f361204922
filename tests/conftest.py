"""Shared fixtures: a tiny randomly-initialised Llama with the bundled model's tokenizer, and a
two-document corpus with its BM25 index. transformers is imported inside the fixtures, so test
files of pure functions do not pay for it."""
import pytest
import torch


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
