"""BM25 tokenizer variants measured on the generated test clues and the human-written questions
(data/human_questions.jsonl), every variant in one run. Each variant replaces
retrieval.tokenize for documents and queries alike; the generated clues are made before, with
the current tokenizer, so both question sets are the same in every row.

    .venv/bin/python scripts/tokenizer_variants.py     # a Markdown table, in %
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import retrieval  # noqa: E402
import questions as qs  # noqa: E402

QUESTION_WORDS = frozenset("what who when where how did does do".split())  # stop words since 2026-11-27
MORE_QUESTION_WORDS = frozenset("why whom whose".split())
current = retrieval.tokenize


def keep_question_words(text):
    """The tokenizer before the question words became stop words."""
    return [t for t in re.findall(r"[^\W_]+", text.lower())
            if t not in retrieval.STOPWORDS - QUESTION_WORDS]


def plural_stem(t):
    if len(t) > 4 and t.endswith("ies"):
        return t[:-3] + "y"
    if len(t) > 3 and t.endswith("s") and not t.endswith(("ss", "us", "is")):
        return t[:-1]
    return t


VARIANTS = {
    "current": current,
    "question words kept (before)": keep_question_words,
    "why, whom, whose as stop words too": lambda x: [t for t in current(x) if t not in MORE_QUESTION_WORDS],
    "drop 1-character tokens": lambda x: [t for t in current(x) if len(t) > 1],
    "plural stemming": lambda x: [plural_stem(t) for t in current(x)],
    "all three (the last two, and why, whom, whose)":
        lambda x: [plural_stem(t) for t in current(x) if t not in MORE_QUESTION_WORDS and len(t) > 1],
}


def main():
    docs = retrieval.load_wiki_corpus()
    test = qs.split_by_article(qs.make_questions(docs, seed=0), seed=0)[1]
    human = qs.load_titled_qa_jsonl(qs.HUMAN_QUESTIONS)
    sets = "clues hit@1 | clues hit@3 | clues alias k=1 | clues alias k=3 | human hit@1 | human hit@3 | human alias k=1 | human alias k=3"
    print(f"| tokenizer | {sets} |\n" + "|---" * 9 + "|")
    for name, tokenize in VARIANTS.items():
        retrieval.tokenize = tokenize
        retriever = retrieval.BM25Retriever(docs)
        clues, people = qs.recall(retriever, test), qs.recall(retriever, human)
        cells = [100 * r[k][i] for r in (clues, people) for i in (0, 1) for k in (1, 3)]
        print(f"| {name} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    retrieval.tokenize = current


if __name__ == "__main__":
    main()
