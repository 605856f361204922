"""The class's deck, lecture/slides.md (built by scripts/slides.sh, written by scripts/slides.py).

Read as text, fast, no extra needed: every slide has at most 60 visible words and speaker notes of
40–150 words; the deck holds what the class needs, in order (the problem, group normalisation,
MT-GRPO's idea, the worked example, the mask, the loss, AT-GRPO's problem and idea, the schematic,
the results, what holds everywhere, what to read next); every number on a slide is one the pages its
notes cite already state. Marked `chromium`: the deck built and opened in headless Chromium, whose
check (scripts/slides.py measure) finds no content beyond a slide, every slide's notes, the first
slide's notes in the speaker view, every formula typeset, nothing from the network; and names a
slide made far too long.

Visible words (visible_words): a slide's markdown with its notes removed (everything after its
`Note:` line), then HTML comments, images (a picture is not words) and a table's rule row removed,
a link kept as its text, LaTeX commands (`\\mathrm`, `\\frac`, `\\,`) removed, and the characters of
markdown and LaTeX syntax (# * | $ { } > and the backtick) and list markers (-, 1.) replaced by spaces. A
word is then what whitespace separates that holds a letter or a digit: `norm(R^T)` is one word, `=`
none, `0.833` one.
"""
import os
import re
import subprocess

import pytest

from scripts import slides

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_WORDS = 60
NOTES_WORDS = (40, 150)
# A number as the slides and the docs write it: 0.833, 1e-4, 128 (not the digit of a name: v1, H100, A_1)
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-\d+)?")
# What the deck must show, in this order: a pattern of the markdown of the slide that shows it
CONTENT = [("the problem: one advantage for every token", r"one advantage"),
           ("the problem: a good search blamed", r"good search.*blamed"),
           ("group normalisation", r"\\mathrm\{std\}_G\\, r \+ \\text\{1e-4\}"),
           ("the two rewards' scales", r"turn reward \$R\^T\$ \(max 0\.7\).*outcome reward \$R\^O\$ \(max 1\.9\)"),
           ("MT-GRPO's idea", r"A_1 = \\mathrm\{norm\}\(R\^T\) \+ \\mathrm\{norm\}\(R\^O\), "
                              r"\\qquad A_2 = \\mathrm\{norm\}\(R\^O\)"),
           ("the K-turn form, labelled", r"this project's extension, not the paper's"),
           ("the worked example, episode 4", r"GRPO-OR \| \+0\.833 \| \+0\.833.*MT-GRPO\*\* \| \*\*\+0\.152"),
           ("the mask", r"tool result.*\*\*no\*\*"),
           ("the clipped term, eq. 3", r"eq\. 3.*\\mathrm\{clip\}"),
           ("the k3 KL, eq. 4", r"eq\. 4's k3"),
           ("the two averages", r"\\frac\{1\}\{\|T\|\}.*--loss-type seq"),
           ("AT-GRPO's problem", r"one shared prompt"),
           ("AT-GRPO's idea", r"\(environment, agent, turn\).*own copy.*best"),
           ("the schematic", r"\]\(\.\./docs/tree-schematic\.svg\)"),
           ("the search results", r"0\.062 \| 0\.240 \| 0\.357 \| \*\*0\.401"),
           ("the credit results", r"0\.44 \| 0\.76 \| \*\*0\.77.*0\.53 \| 0\.27 \| \*\*0\.53"),
           ("Plan-Path", r"AT-GRPO on Plan-Path"),
           ("what holds everywhere", r"equal rewards gives advantage 0.*no loss.*\\mu = 1"),
           ("what to read next", r"What to read next")]


def deck(path=os.path.join(ROOT, "lecture", "slides.md")):
    return slides.split(open(path, encoding="utf-8").read())


def visible_words(markdown):
    """The words a slide shows (the module's docstring says how they are counted)."""
    text = re.sub(r"<!--.*?-->", " ", markdown, flags=re.S)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"^\|?[\s|:-]+\|?$", " ", text, flags=re.M)
    text = re.sub(r"\\[A-Za-z]+|\\.", " ", text)
    text = re.sub(r"^\s*(?:[-*+]|\d+\.)\s", " ", text, flags=re.M)
    text = re.sub(r"[#*|$>{}`]", " ", text)
    return [word for word in text.split() if re.search(r"\w", word)]


def problems(slide_list):
    """Each slide over the word limit, without notes, or with notes outside NOTES_WORDS."""
    found = []
    for n, (body, notes) in enumerate(slide_list, 1):
        if len(visible_words(body)) > MAX_WORDS:
            found.append(f"slide {n}: {len(visible_words(body))} visible words (at most {MAX_WORDS})")
        if not notes:
            found.append(f"slide {n} has no speaker notes")
        elif not NOTES_WORDS[0] <= len(notes.split()) <= NOTES_WORDS[1]:
            found.append(f"slide {n}: notes of {len(notes.split())} words (not {NOTES_WORDS[0]}–{NOTES_WORDS[1]})")
    return found


def test_every_slide_is_short_and_has_notes():
    slide_list = deck()
    assert len(slide_list) >= 20 and problems(slide_list) == []


def test_the_word_limit_fails_a_long_slide_and_ignores_syntax_and_notes():
    words = " ".join(f"word{i}" for i in range(MAX_WORDS))
    notes = "Note:\n" + " ".join(["said"] * 60)
    assert problems(slides.split(f"## {words}\n{notes}")) == []
    assert problems(slides.split(f"## {words} one\n{notes}")) == [
        f"slide 1: {MAX_WORDS + 1} visible words (at most {MAX_WORDS})"]
    markup = (f"# **{words[:200]}**\n\n| a | b |\n|---|---|\n\n$$\\frac{{1}}{{G}}$$\n\n"
              "![a long alt text here](x.svg)\n<!-- a comment -->")
    assert len(visible_words(markup)) == len(visible_words(words[:200])) + 2 + 2  # a, b; 1, G
    assert problems(slides.split("## one\n---\n## two\nNote:\nshort")) == [
        "slide 1 has no speaker notes", "slide 2: notes of 1 words (not 40–150)"]


def test_the_deck_shows_what_the_class_needs_in_order():
    bodies = [re.sub(r"\s+", " ", body) for body, _ in deck()]
    where = []
    for name, pattern in CONTENT:
        hits = [n for n, body in enumerate(bodies, 1) if re.search(pattern, body)]
        assert hits, f"no slide shows {name}"
        where.append(hits[0])
    assert where == sorted(where), list(zip([name for name, _ in CONTENT], where))
    assert os.path.exists(os.path.join(ROOT, "docs", "tree-schematic.svg"))


def cited_pages(notes):
    return sorted(set(re.findall(r"\b(README\.md|docs/[\w./-]+\.md)", notes)))


def test_every_number_on_a_slide_is_stated_on_a_page_its_notes_cite():
    for n, (body, notes) in enumerate(deck(), 1):
        numbers = set(NUMBER.findall(re.sub(r"<!--.*?-->", " ", body, flags=re.S)))
        pages = cited_pages(notes)
        assert pages or not numbers, f"slide {n} shows numbers {sorted(numbers)} and its notes cite no page"
        stated = set()
        for page in pages:
            assert os.path.exists(os.path.join(ROOT, page)), f"slide {n} cites {page}, which does not exist"
            stated |= set(NUMBER.findall(open(os.path.join(ROOT, page), encoding="utf-8").read()))
        assert numbers <= stated, f"slide {n}: {sorted(numbers - stated)} not stated in {pages}"


def test_the_number_check_reads_numbers_as_written():
    assert NUMBER.findall("+0.833, 1e-4, v1, H100, A_1, 3 seeds × 20, Qwen3-1.7B, 0.401**") == [
        "0.833", "1e-4", "3", "20", "1.7", "0.401"]


def built(out):
    """scripts/slides.sh into `out`, reusing slides/node_modules where it holds the versions the script pins."""
    script = open(os.path.join(ROOT, "scripts", "slides.sh"), encoding="utf-8").read()
    pins = dict(re.findall(r"\b(reveal|katex)=(\S+)", script))
    modules = os.path.join(ROOT, "slides", "node_modules")
    def installed(name, pin):
        path = os.path.join(modules, name, "package.json")
        return os.path.exists(path) and f'"version": "{pin}"' in open(path, encoding="utf-8").read()
    if installed("reveal.js", pins["reveal"]) and installed("katex", pins["katex"]):
        os.symlink(modules, os.path.join(out, "node_modules"))
    run = subprocess.run(["bash", os.path.join(ROOT, "scripts", "slides.sh"), str(out)],
                         capture_output=True, text=True, timeout=300)
    if run.returncode == 2:  # no npm, or no mistune: the script says which
        pytest.skip(run.stdout.strip())
    assert run.returncode == 0, run.stdout + run.stderr
    return os.path.join(out, "slides.html")


def test_without_the_registry_the_script_says_so_and_stops_in_seconds(tmp_path):
    """On 7b45f4d, with no network, nothing was printed for 282 s, then exit 1 with no message. A
    registry that refuses the connection stands for none: the script says what it fetches, and npm's
    error shows, within seconds."""
    import time
    env = {**os.environ, "npm_config_registry": "http://127.0.0.1:9/"}
    t0 = time.time()
    run = subprocess.run(["bash", os.path.join(ROOT, "scripts", "slides.sh"), str(tmp_path / "deck")], env=env,
                         capture_output=True, text=True, timeout=300)
    if run.returncode == 2:  # no npm, or no mistune: the script says which
        pytest.skip(run.stdout.strip())
    assert run.returncode == 1 and time.time() - t0 < 20, (time.time() - t0, run.stdout, run.stderr)
    assert "fetching reveal.js@" in run.stdout and "npm could not install" in run.stderr
    assert "ECONNREFUSED" in run.stderr  # npm's own error, not hidden


@pytest.mark.chromium
def test_the_deck_in_chromium_fits_has_notes_and_stays_offline(tmp_path):
    deck_html = built(tmp_path)
    count, found = slides.measure(deck_html)
    assert (count, found) == (len(deck()), [])
    assert slides.screenshots(deck_html, 1) == []  # the title slide is not blank
    # a slide with far too much text: the check names it
    long = tmp_path / "long.md"
    long.write_text("# One\nNote:\nsaid\n---\n## Two\n\n" + "Far too many words on one slide. " * 120
                    + "\nNote:\nsaid\n")
    count, found = slides.measure(slides.build(str(tmp_path), str(long))[0])
    assert count == 2 and len(found) == 1
    assert re.fullmatch(r"slide 2 \('Two'\): its content overflows the slide by \d+ px", found[0])
