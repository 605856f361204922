"""Exercise 7: BM25, the search tool behind MT-GRPO's first turn.

Paper: MT-GRPO, Zeng et al. 2025, arXiv 2505.11821v1, lets the agent search Wikipedia before it
answers; this project searches an offline corpus with Okapi BM25 (Robertson & Zaragoza 2009,
"The Probabilistic Relevance Framework: BM25 and Beyond"):

    score(q, d) = sum over the DISTINCT query terms t of
                  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t)      = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))

N documents, n(t) of them contain t, tf(t, d) = how often t occurs in d, |d| = number of terms
of d, avgdl = the mean |d|. k1 caps what repeating a term earns; b (0..1) sets how much long
documents are penalised. The 1 + inside the log keeps idf positive even for common terms.

Mirrors: retrieval.BM25Retriever.scores.   Check your answer:  python exercises/check.py 7
"""
import math


def bm25_scores(query_terms, doc_terms, k1=1.5, b=0.75):
    """BM25 score of every document for the query.

    query_terms: list of str (already tokenised, may repeat a term).
    doc_terms: list of N documents, each a list of str (already tokenised; may be empty).
    Returns a list of N floats: 0.0 for a document that contains no query term.

    Hints:
      - a term asked twice counts once.
      - n(t) counts the documents that hold t, not its occurrences; tf counts them in one document.
      - the log is the natural log.
    """
    raise NotImplementedError
