"""questions.py: aliases, clues and leaks, generated questions and their split, the QA JSONL
loader, the benchmark and the command line."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import env_search as es
import questions as qs
import retrieval

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wiki():
    """The real corpus and its index, built once for this file: (docs, retriever)."""
    docs = retrieval.load_wiki_corpus()
    return docs, retrieval.BM25Retriever(docs)


@pytest.fixture(scope="module")
def questions(wiki):
    return qs.make_questions(wiki[0], seed=0)


# ---------------------------------------------------------------- generated questions


def test_aliases_clues_and_leaks():
    assert qs.title_aliases("Mercury (planet)") == ["Mercury (planet)", "Mercury"]
    assert qs.title_aliases("The Beatles") == ["The Beatles", "Beatles"]
    assert qs.title_aliases("Jaws") == ["Jaws"]
    assert qs.make_clue("Toucans are birds of the Neotropics.", ["Toucan"], 4) == "___ are birds of…"
    assert qs.make_clue("The Beatles were a band.", ["The Beatles", "Beatles"], 9) == "___ were a band."
    assert qs.leaks("a toucan's beak", ["Toucan"]) and not qs.leaks("a bird", ["Toucan"])
    assert qs.split_sentences("Arthur C. Clarke wrote it. It was 1968. Then U.S. forces came.") == [
        "Arthur C. Clarke wrote it.", "It was 1968.", "Then U.S. forces came."]


def test_questions_are_deterministic_and_seeded(wiki):
    docs = wiki[0][:1500]
    first, again, other = (qs.make_questions(docs, seed=s) for s in (0, 0, 1))
    assert first == again and first != other
    assert [q["title"] for q in first] == [q["title"] for q in again]


def test_questions_blank_the_answer(questions):
    assert len(questions) > 5000
    for q in questions:
        assert q["answers"][0] == q["title"] and qs.BLANK in q["question"]
        prefix = "Which Wikipedia article is this about: "
        assert q["question"].startswith(prefix)
        clue = q["question"][len(prefix):].lower()
        assert not any(a.lower() in clue for a in q["answers"] if len(a) > 3)


def test_one_shot_example_asks_a_generated_style_question():
    question = es.ONE_SHOT_EXAMPLE[0]["content"]
    prefix, suffix = qs.QUESTION_TEMPLATE.split("{clue}")
    assert question.startswith(prefix + qs.BLANK) and question.endswith(suffix)


def test_split_by_article(questions):
    train, test = qs.split_by_article(questions, seed=0)
    assert len(test) >= 500 and len(train) + len(test) == len(questions)
    assert not {q["title"] for q in train} & {q["title"] for q in test}
    assert qs.split_by_article(questions, seed=0) == (train, test)
    assert {q["title"] for q in qs.split_by_article(questions, seed=1)[1]} != {q["title"] for q in test}


def test_raw_question_finds_the_article_often_but_not_always(wiki, questions):
    test = qs.split_by_article(questions, seed=0)[1][:300]
    found = sum(q["title"] == h["title"] for q in test for h in wiki[1].search(q["question"], 1))
    assert 0.5 < found / len(test) < 0.97


TINY = {"title": "Tiny", "text": "Tiny is small."}
GOOD = [{"title": t, "text": f"{t} is a city with a long history of trade and a famous old cathedral."}
        for t in ("Gamma", "Delta", "Epsilon")]  # at seed 0 all three go to train


def test_a_corpus_without_usable_articles_is_refused():
    with pytest.raises(ValueError, match=r"none of the 1 articles gives a question.*bigger corpus"):
        qs.make_questions([TINY])


def test_a_corpus_too_small_to_split_is_refused(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in [TINY] + GOOD) + "\n", encoding="utf-8")
    assert len(qs.make_questions(GOOD)) == 3
    with pytest.raises(ValueError) as error:
        qs.train_test_questions(corpus_path=str(path))
    message = str(error.value)
    assert message.startswith(f"{path} gives 3 questions (3 train, 0 test: ")
    assert "--train-questions and --test-questions" in message and "\n" not in message


# ---------------------------------------------------------------- QA JSONL loader


def write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_qa_loader_reads_a_good_file(tmp_path):
    path = write(tmp_path, "qa.jsonl", ['{"question": "Who?", "answers": ["A", "B"]}', "",
                                        '{"question": "Où?", "answers": ["Paris", " "], "x": 1}'])
    assert qs.load_qa_jsonl(path) == [{"question": "Who?", "answers": ["A", "B"]},
                                      {"question": "Où?", "answers": ["Paris"]}]


@pytest.mark.parametrize("line, problem", [
    ('{"question": "Q", "answers": ["A"]', "bad JSON"),
    ('["Q", ["A"]]', "expected a JSON object"),
    ('{"answers": ["A"]}', "missing key 'question'"),
    ('{"question": "Q"}', "missing key 'answers'"),
    ('{"question": 3, "answers": ["A"]}', "'question' must be a str"),
    ('{"question": "Q", "answers": "A"}', "'answers' must be a list"),
    ('{"question": "Q", "answers": [1]}', "'answers' must be a list of strings"),
    ('{"question": "Q", "answers": []}', "empty answers"),
    ('{"question": "Q", "answers": ["", " "]}', "empty answers"),
    ('{"question": " ", "answers": ["A"]}', "empty question"),
])
def test_qa_loader_errors_name_file_line_and_problem(tmp_path, line, problem):
    path = write(tmp_path, "my_questions.jsonl", ['{"question": "Q", "answers": ["A"]}', "", line])
    with pytest.raises(ValueError) as error:
        qs.load_qa_jsonl(path)
    assert "my_questions.jsonl" in str(error.value) and "line 3" in str(error.value)
    assert problem in str(error.value)


# ---------------------------------------------------------------- benchmark and command line


def test_bench_reports_index_counts_speed_and_recall(wiki, questions, capsys):
    qs.recall_bench(seed=0)
    lines = capsys.readouterr().out.splitlines()
    docs, retriever = wiki
    assert len(lines) == 7
    assert lines[0].startswith(f"{len(docs)} documents loaded in ")
    assert f"({len(retriever.vocab)} terms, {len(retriever.doc_ids)} postings)" in lines[0]
    assert lines[1] == qs.counts(docs, *qs.split_by_article(questions, seed=0), seed=0)
    assert re.fullmatch(r"1000 searches \(k=3\): [\d.]+ s", lines[2])
    human = len(qs.load_titled_qa_jsonl(qs.HUMAN_QUESTIONS))
    for name, block in (("raw test question", lines[3:5]), (f"human question ({human})", lines[5:7])):
        for k, line in zip((1, 3), block):
            found, shown = map(float, re.fullmatch(
                rf"{re.escape(name)} as the query, k={k}: article in the top {k} ([\d.]+)%, "
                r"an answer alias in the shown result ([\d.]+)%", line).groups())
            assert 50 < found <= shown <= 100


def test_human_questions_load_and_are_answered_by_their_article(wiki):
    text_of = {d["title"]: d["text"].lower() for d in wiki[0]}
    titled = qs.load_titled_qa_jsonl(qs.HUMAN_QUESTIONS)
    assert len(titled) >= 40
    assert [{"question": q["question"], "answers": q["answers"]} for q in titled] == \
        qs.load_qa_jsonl(qs.HUMAN_QUESTIONS)
    for q in titled:
        assert any(a.lower() in text_of[q["title"]] for a in q["answers"]), q


def test_cli_show_prints_samples_with_answers(questions):
    out = subprocess.run([sys.executable, str(ROOT / "questions.py"), "--show", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    train, test = qs.split_by_article(questions, seed=0)
    assert len(lines) == 10
    assert lines[0] == f"train: 2 of {len(train)} questions"
    assert lines[5] == f"test: 2 of {len(test)} questions"
    for side, block in ((train, lines[1:5]), (test, lines[6:10])):
        by_question = {q["question"]: q["answers"] for q in side}
        for question, answers in zip(block[::2], block[1::2]):
            assert question.startswith("  ") and question.strip() in by_question
            assert answers == "    answers: " + " | ".join(by_question[question.strip()])


def test_cli_show_needs_a_positive_count(capsys):
    with pytest.raises(SystemExit):
        qs.main(["--show", "0"])
    assert "--show needs N >= 1" in capsys.readouterr().err


def test_retrieval_misses_keeps_only_questions_whose_article_is_not_found():
    docs = [{"title": "Gamma", "text": "Gamma is a city of trade and an old cathedral."},
            {"title": "Delta", "text": "Delta is a river mouth with wide wetlands."}]
    retriever = retrieval.BM25Retriever(docs)
    found = {"question": "a city of trade with a cathedral", "answers": ["Gamma"], "title": "Gamma"}
    second = {"question": "a city at a river mouth", "answers": ["Gamma"], "title": "Gamma"}
    missed = {"question": "wide wetlands", "answers": ["Gamma"], "title": "Gamma"}  # no Gamma word
    assert qs.retrieval_misses(retriever, [found, second, missed], k=1) == [second, missed]
    assert qs.retrieval_misses(retriever, [found, second, missed], k=2) == [missed]


def test_cli_write_hard_writes_loadable_files_of_missed_questions(wiki, questions, tmp_path):
    folder = tmp_path / "hard"
    assert qs.main(["--write-hard", str(folder)]) == 0
    train, test = (qs.load_titled_qa_jsonl(str(folder / f"{side}.jsonl")) for side in ("train", "test"))
    assert train and test and len(train) + len(test) < len(questions) / 3
    assert {q["title"] for q in train}.isdisjoint(q["title"] for q in test)
    for q in train[:50] + test[:50]:
        assert wiki[1].search(q["question"], 1)[0]["title"] != q["title"]
    assert qs.load_qa_jsonl(str(folder / "test.jsonl"))[0] == {k: test[0][k] for k in ("question", "answers")}


def test_cli_write_hard_refuses_a_file_path(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(SystemExit, match="is not a folder"):
        qs.main(["--write-hard", str(path)])


# ---------------------------------------------------------------- train and test overlap
def test_the_same_file_for_train_and_test_gives_a_note(tmp_path):
    path = write(tmp_path, "qa.jsonl", ['{"question": "Who?", "answers": ["A"]}',
                                        '{"question": "Où?", "answers": ["B"]}'])
    train, test = qs.train_test_questions(str(path), str(path))  # accepted: training on the test set is allowed
    assert qs.overlap_note(train, test) == ("note: 2 of the 2 test questions are also training questions: the "
                                            "evaluation scores trained questions, not held-out ones")
    copy = write(tmp_path, "test.jsonl", ['{"question": "  who? ", "answers": ["A"]}',
                                          '{"question": "Why?", "answers": ["C"]}'])
    assert qs.overlap_note(train, qs.load_qa_jsonl(copy)).startswith("note: 1 of the 2 test questions")
    assert qs.overlap_note(train, [{"question": "Why?", "answers": ["C"]}]) == ""
    assert qs.overlap_note(train, [{"question": "Who?", "answers": ["Z"]}]) == ""  # another answer


def test_the_generated_split_has_no_overlap():
    """Some generated clues repeat for other articles ("___ is the capital and largest city
    of…"), with other answers: not training questions."""
    train, test = qs.train_test_questions()
    assert qs.overlap_note(train, test) == ""
