"""Trivia questions for the search episode (env_search.SearchEnv): generated from a corpus, split
by article, or loaded from TriviaQA-style JSONL. A question is {"question", "answers"}, answers
being the accepted aliases; generated ones also carry the "title" of their article:

    {"question": 'Which Wikipedia article is this about: "___ is a 1968 epic science fiction
                  film produced and…"?',
     "answers": ["2001: A Space Odyssey"], "title": "2001: A Space Odyssey"}

Read top to bottom: generated questions (aliases, sentences, clues, leaks), the train/test split,
the JSONL loader, the train/test sets of a run and the note when they overlap, the questions the
search tool misses, and a command line (`python questions.py --help`): counts, samples, a
retrieval benchmark, and `--write-hard FOLDER`, the harder question files.
"""
import argparse
import hashlib
import json
import os
import random
import re
import sys
import time

from machinery.records import read_jsonl
from retrieval import BM25Retriever, format_result, load_corpus_jsonl, load_wiki_corpus, tokenize, truncate_words
from machinery.cli import one_line

HUMAN_QUESTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                               "human_questions.jsonl")
QUESTION_TEMPLATE = 'Which Wikipedia article is this about: "{clue}"?'
BLANK = "___"


# ---------------------------------------------------------------- generated questions
def title_aliases(title):
    """Accepted answers for an article: its title, the title without a trailing "(...)", and
    that without a leading article: "Mercury (planet)" -> ["Mercury (planet)", "Mercury"]."""
    base = re.sub(r"\s*\([^()]*\)$", "", title).strip()
    short = re.sub(r"^(the|a|an)\s+", "", base, flags=re.IGNORECASE)
    return list(dict.fromkeys(a for a in (title, base, short) if a))


def split_sentences(text):
    """Split after . ! ? when the character before the mark is lowercase, a digit or a closing
    bracket/quote, so initials ("Arthur C. Clarke", "U.S.") do not end a sentence."""
    return [s for s in re.split(r"(?<=[a-z0-9)\"'%][.!?])\s+", text) if s.strip()]


def make_clue(sentence, aliases, max_words):
    """The sentence with every alias (whole words, any case, plural -s/-es, longest first)
    replaced by BLANK, cut to max_words words."""
    for alias in sorted(aliases, key=len, reverse=True):
        sentence = re.sub(rf"(?<!\w){re.escape(alias)}(e?s)?(?!\w)", BLANK, sentence,
                          flags=re.IGNORECASE)
    return truncate_words(sentence, max_words)


def leaks(clue, aliases):
    """True when every (non-stopword) token of some alias still occurs inside a token of the
    clue ("seagulls" leaks "Gull", "violoncello" leaks "Cello")."""
    clue_tokens = tokenize(clue)
    return any(tokenize(a) and all(any(t in c for c in clue_tokens) for t in tokenize(a))
               for a in aliases)


def make_questions(docs, seed=0, clue_words=(8, 12), first_sentences=3):
    """One trivia question per usable article: {"question", "answers", "title"}, in doc order.

    The clue is one of the article's first sentences that name it (mostly definitions: "___ is
    a 1968 epic science fiction film produced and…"), name blanked, cut to a random length in
    clue_words: short enough that the raw question is a good but imperfect query (see bench).
    Clues that are too short or still leak the answer are dropped. Random choices are seeded by
    (seed, title), so a question does not depend on the corpus order. ValueError if no article
    gives a question."""
    questions = []
    for doc in docs:
        aliases = title_aliases(doc["title"])
        rng = random.Random(f"{seed}:{doc['title']}")
        sentences = split_sentences(doc["text"])[:first_sentences]
        clues = [make_clue(s, aliases, rng.randint(*clue_words)) for s in sentences]
        clues = [c for c in clues if BLANK in c and len(c.split()) >= clue_words[0]
                 and not leaks(c, aliases)]
        if clues:
            questions.append({"question": QUESTION_TEMPLATE.format(clue=rng.choice(clues)),
                              "answers": aliases, "title": doc["title"]})
    if not questions:
        raise ValueError(f"none of the {len(docs)} articles gives a question (one of its first "
                         f"{first_sentences} sentences must name its title and have at least "
                         f"{clue_words[0]} words); use a bigger corpus, or give "
                         "--train-questions and --test-questions")
    return questions


# ---------------------------------------------------------------- train/test split
def split_by_article(questions, test_fraction=0.1, seed=0):
    """(train, test) by article: test when sha256(f"{seed}:{title}") read as a fraction is below
    test_fraction. Deterministic, seed-dependent, an article is never on both sides."""
    def in_test(q):
        digest = hashlib.sha256(f"{seed}:{q['title']}".encode()).digest()
        return int.from_bytes(digest[:8], "big") < test_fraction * 2 ** 64
    return [q for q in questions if not in_test(q)], [q for q in questions if in_test(q)]


# ---------------------------------------------------------------- JSONL questions
def _qa_problem(record):
    """What is wrong with the answers or the question of a typed QA record, or None."""
    if not all(isinstance(a, str) for a in record["answers"]):
        return "'answers' must be a list of strings"
    if not any(a.strip() for a in record["answers"]):
        return "empty answers"
    return None if record["question"].strip() else "empty question"


def load_qa_jsonl(path):
    """Questions from a JSONL file of {"question": str, "answers": [aliases]}, e.g. TriviaQA
    with answers = normalized_aliases. Returns [{"question", "answers"}] (blank aliases dropped).
    A bad line raises ValueError naming the file, the line and the problem."""
    records = read_jsonl(path, {"question": str, "answers": list}, _qa_problem)
    return [{"question": r["question"], "answers": [a for a in r["answers"] if a.strip()]}
            for r in records]


def load_titled_qa_jsonl(path):
    """load_qa_jsonl for records that also name the "title" of the article that answers them."""
    return [{"question": r["question"], "answers": [a for a in r["answers"] if a.strip()],
             "title": r["title"]}
            for r in read_jsonl(path, {"question": str, "answers": list, "title": str}, _qa_problem)]


def train_test_questions(train_path="", test_path="", corpus_path=""):
    """(train, test) questions: the user's two JSONL files, or the questions generated from the
    corpus (a JSONL of {title, text}, or the bundled Wikipedia), split by article. ValueError
    if a side would be empty."""
    if train_path or test_path:
        if not (train_path and test_path):
            raise ValueError("give both --train-questions and --test-questions (JSONL of question, answers)")
        return load_qa_jsonl(train_path), load_qa_jsonl(test_path)
    docs = load_corpus_jsonl(corpus_path) if corpus_path else load_wiki_corpus()
    source = corpus_path or "the offline Wikipedia"
    try:
        train, test = split_by_article(make_questions(docs))
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    if not (train and test):
        raise ValueError(f"{source} gives {len(train) + len(test)} questions ({len(train)} train, "
                         f"{len(test)} test: about 10% of the articles go to test); use a bigger "
                         "corpus, or give --train-questions and --test-questions")
    return train, test


def overlap_note(train, test):
    """A one-line note when test questions are also training questions (the same file given
    for both, a copy, or files that overlap): the evaluation then scores questions the model
    trained on, not held-out ones. "" when no test question is a training question. A note, not
    a refusal: training on the test set on purpose (can the model learn these at all?) is a
    fair experiment, as long as nobody reads its evaluation as held-out."""
    seen = {question_key(q) for q in train}
    shared = sum(question_key(q) in seen for q in test)
    if not shared:
        return ""
    return (f"note: {shared} of the {len(test)} test questions are also training questions: the "
            "evaluation scores trained questions, not held-out ones")


def question_key(q):
    """A question with its answers, case and spacing aside: a generated clue can repeat for
    another article ("___ is the capital and largest city of…"), with another answer."""
    question = " ".join(q["question"].casefold().split())
    return question, frozenset(" ".join(a.casefold().split()) for a in q["answers"])


# ================================================================ support: skip on first reading
# the command line: counts, samples, retrieval recall
def counts(docs, train, test, seed):
    """One line: how many train and test questions the articles gave."""
    return (f"questions (seed {seed}): {len(train)} train, {len(test)} test, "
            f"from {len(train) + len(test)} of {len(docs)} articles")


def print_samples(train, test, n, seed):
    """Print n random train and n random test questions, each with its answers."""
    rng = random.Random(seed)
    for name, questions in (("train", train), ("test", test)):
        print(f"{name}: {min(n, len(questions))} of {len(questions)} questions")
        for q in rng.sample(questions, min(n, len(questions))):
            print(f"  {q['question']}\n    answers: {' | '.join(q['answers'])}")


def recall(retriever, questions, ks=(1, 3)):
    """{k: (share whose article is in the top k, share with an answer alias in the shown result)}
    with each raw question as the query."""
    top = [retriever.search(q["question"], max(ks)) for q in questions]
    return {k: (sum(q["title"] in [h["title"] for h in hits[:k]] for q, hits in zip(questions, top))
                / len(questions),
                sum(any(a.lower() in format_result(hits[:k]).lower() for a in q["answers"])
                    for q, hits in zip(questions, top)) / len(questions))
            for k in ks}


def retrieval_misses(retriever, questions, k=1):
    """The questions whose article is not in the top k results of the raw question as the query:
    on them the search tool rarely pays (the "harder questions" of docs/results-search.md)."""
    return [q for q in questions
            if q["title"] not in [h["title"] for h in retriever.search(q["question"], k)]]


def write_hard(folder, docs, sides):
    """Write FOLDER/train.jsonl and FOLDER/test.jsonl: retrieval_misses of the (train, test) sides
    in docs' index, for train.py --train-questions / --test-questions. Returns the two counts."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise SystemExit(f"--write-hard {folder}: exists and is not a folder; give a folder path")
    retriever = BM25Retriever(docs)
    hard = [retrieval_misses(retriever, side) for side in sides]
    os.makedirs(folder, exist_ok=True)
    for name, side in zip(("train", "test"), hard):
        with open(os.path.join(folder, name + ".jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(q) + "\n" for q in side)
    return tuple(len(side) for side in hard)


def recall_bench(seed=0, human_path=HUMAN_QUESTIONS):
    """Index build time, 1,000 searches, and how often the raw question finds its answer: the
    generated test clues, and the human-written questions of human_path."""
    start = time.perf_counter()
    docs = load_wiki_corpus()
    loaded = time.perf_counter()
    retriever = BM25Retriever(docs)
    print(f"{len(docs)} documents loaded in {loaded - start:.2f} s; BM25 index "
          f"({len(retriever.vocab)} terms, {len(retriever.doc_ids)} postings) built in "
          f"{time.perf_counter() - loaded:.2f} s")
    train, test = split_by_article(make_questions(docs, seed=seed), seed=seed)
    print(counts(docs, train, test, seed))
    start = time.perf_counter()
    for q in (test + train)[:1000]:
        retriever.search(q["question"], 3)
    print(f"1000 searches (k=3): {time.perf_counter() - start:.2f} s")
    human = load_titled_qa_jsonl(human_path)
    for name, questions in (("raw test question", test),
                            (f"human question ({len(human)})", human)):
        for k, (found, shown) in recall(retriever, questions).items():
            print(f"{name} as the query, k={k}: article in the top {k} {100 * found:.1f}%, "
                  f"an answer alias in the shown result {100 * shown:.1f}%")


@one_line
def main(argv=None):
    parser = argparse.ArgumentParser(
        description="The trivia questions generated from the offline Wikipedia, split by "
                    "article into train and test (the questions train.py uses by default).")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--stats", action="store_true",
                        help="print the train and test counts (the default)")
    action.add_argument("--show", type=int, metavar="N",
                        help="print N random train and N random test questions with answers")
    action.add_argument("--bench", action="store_true",
                        help="time the BM25 index and searches, and measure how often the raw "
                             "test question, used as the query, finds its article (generated "
                             "test clues and data/human_questions.jsonl)")
    action.add_argument("--write-hard", metavar="FOLDER",
                        help="write FOLDER/train.jsonl and FOLDER/test.jsonl: the questions whose "
                             "article is not the top BM25 hit of the raw question (the search "
                             "tool rarely helps on them), for --train-questions/--test-questions")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the clues, the split and the samples (default 0)")
    args = parser.parse_args(argv)
    if args.show is not None and args.show < 1:
        parser.error("--show needs N >= 1")
    if args.bench:
        recall_bench(args.seed)
        return 0
    docs = load_wiki_corpus()
    train, test = split_by_article(make_questions(docs, seed=args.seed), seed=args.seed)
    if args.write_hard:
        n_train, n_test = write_hard(args.write_hard, docs, (train, test))
        print(f"{args.write_hard}: {n_train} train and {n_test} test questions whose article is "
              "not the top hit of the raw question")
        return 0
    if args.show is not None:
        print_samples(train, test, args.show, args.seed)
    else:
        print(counts(docs, train, test, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
