"""lecture/slides.md → OUT/slides.html, the class's reveal.js deck, which opens offline (scripts/slides.sh).

    python scripts/slides.py build OUT                          # OUT/slides.html from lecture/slides.md
    python scripts/slides.py check OUT/slides.html [--screenshots]

The source follows reveal.js's markdown conventions: slides separated by a line `---`, speaker notes
after a line `Note:`. Each slide's markdown becomes HTML here (mistune, whose math plugin keeps the
LaTeX away from the markdown rules), KaTeX typesets the LaTeX in the browser (reveal.js's math
plugin, KaTeX from OUT/node_modules), and an image of a local .svg file is inlined, so the deck is
one HTML file beside node_modules. The notes become <aside class="notes">, which the speaker view
(key `s`) shows.

`check` opens the deck in headless Chromium with `?check` in its URL: the deck (CHECK_JS) then visits
every slide, opens the speaker view, and writes what it found into <pre id="check">, which Chromium's
--dump-dom hands back: content that leaves the slide, a slide without notes, a speaker view without
the first slide's notes, a formula KaTeX did not typeset, a font that did not load, anything fetched
from the network. With --screenshots it also saves each slide as slide-N.png beside the deck (one
Chromium run a slide, at its URL #/N), and fails on a slide of one flat colour (a deck whose
scripts did not load is a white page). Each problem is one line that names the slide.
"""
import glob
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "lecture", "slides.md")
WIDTH, HEIGHT = 1280, 720  # a slide's size in reveal.js, and Chromium's window for the checks
BUDGET_MS = 10000  # Chromium's virtual time for a page to load, typeset and check itself


def split(text):
    """[(markdown, notes)] of each slide: slides are separated by a line `---`, notes follow `Note:`."""
    slides = []
    for chunk in re.split(r"^---[ \t]*$", text, flags=re.M):
        body, *notes = re.split(r"^Note:", chunk, maxsplit=1, flags=re.M)
        slides.append((body.strip(), notes[0].strip() if notes else ""))
    return slides


def inline_svg(match, folder):
    """An <img> of a local .svg file → the SVG itself, scaled by CSS (svg.figure), so that the deck
    carries its pictures: a copy of OUT still shows them."""
    src, alt = html.unescape(match.group(1)), match.group(2)
    svg = open(os.path.join(folder, src), encoding="utf-8").read()
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    # the root's own width and height go: its viewBox keeps the aspect ratio at any height
    return re.sub(r"<svg\b([^>]*?)\swidth=\"[^\"]*\"\s+height=\"[^\"]*\"",
                  rf'<svg class="figure" role="img" aria-label="{alt}"\1', svg, count=1)


def section(body, notes, folder, markdown):
    """One slide's <section>: its HTML, then its notes as reveal.js's <aside class="notes">."""
    svg_image = r'<img src="([^"]+\.svg)" alt="([^"]*)"\s*/?>'
    content = re.sub(svg_image, lambda m: inline_svg(m, folder), markdown(body))
    return f'<section>\n{content}<aside class="notes">\n{markdown(notes)}</aside>\n</section>'


def build(out, source=SOURCE):
    """Write OUT/slides.html from `source`; return its path and the number of slides."""
    import mistune  # nbconvert's markdown parser (requirements-notebook.txt)
    markdown = mistune.create_markdown(escape=False, plugins=["math", "table"])
    slides = split(open(source, encoding="utf-8").read())
    folder = os.path.dirname(os.path.abspath(source))
    title = re.search(r"^# (.+)$", slides[0][0], re.M)
    sections = "\n".join(section(body, notes, folder, markdown) for body, notes in slides)
    parts = {"TITLE": html.escape(title.group(1) if title else "slides"), "SECTIONS": sections,
             "CHECK_JS": CHECK_JS}
    page = re.sub("|".join(parts), lambda m: parts[m.group()], PAGE)
    path = os.path.join(out, "slides.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path, len(slides)


def chromium(url, *args):
    """Headless Chromium on `url`, a fresh profile each time, nothing fetched in the background."""
    with tempfile.TemporaryDirectory(prefix="slides-chromium-") as profile:
        command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   "--disable-background-networking", "--no-first-run", f"--user-data-dir={profile}",
                   "--disable-popup-blocking",  # the check opens the speaker view, a pop-up, without a key press
                   f"--window-size={WIDTH},{HEIGHT}", f"--virtual-time-budget={BUDGET_MS}", *args, url]
        return subprocess.run(command, capture_output=True, text=True, timeout=180)


def measure(deck):
    """(number of slides, problems): what the deck found about itself when opened with `?check`."""
    dom = chromium("file://" + os.path.abspath(deck) + "?check", "--dump-dom").stdout
    found = re.search(r'<pre id="check">(.*?)</pre>', dom, re.S)
    if not found:
        return 0, [f"{deck}: the deck's check did not run (did reveal.js load from node_modules?)"]
    report = json.loads(html.unescape(found.group(1)))
    problems = [f"the deck fetched {url} from the network" for url in report["network"]]
    problems += [f"a font did not load: {font}" for font in report["failed_fonts"]]
    view = {key: " ".join(text.split()) for key, text in report["speaker_view"].items()}
    if not view["notes"] or view["shown"] != view["notes"]:
        problems.append(f"the speaker view (key s) shows {view['shown'][:60]!r} for slide 1, not its notes")
    for s in report["slides"]:
        where = f"slide {s['slide']} ({s['title']!r})"
        if s["overflow"] > 1:
            problems.append(f"{where}: its content overflows the slide by {s['overflow']} px")
        if not s["notes"]:
            problems.append(f"{where} has no speaker notes")
        if s["untypeset"]:
            problems.append(f"{where}: {s['untypeset']} formula(s) KaTeX did not typeset")
    return len(report["slides"]), problems


def screenshots(deck, count):
    """slide-N.png beside the deck for each slide; the problems: slides of one flat colour."""
    from PIL import Image  # matplotlib's dependency (requirements-notebook.txt)
    for old in glob.glob(os.path.join(os.path.dirname(deck), "slide-*.png")):
        os.remove(old)  # a previous build's, perhaps of more slides
    problems = []
    for n in range(1, count + 1):
        png = os.path.join(os.path.dirname(deck), f"slide-{n}.png")
        chromium("file://" + os.path.abspath(deck) + f"#/{n - 1}", f"--screenshot={png}")
        if not os.path.exists(png):
            problems.append(f"slide {n}: Chromium wrote no screenshot")
            continue
        lo, hi = Image.open(png).convert("L").getextrema()
        if hi - lo < 64:
            problems.append(f"slide {n} is blank ({png}): the deck did not render")
    return problems


def main(argv):
    if argv[:1] == ["build"] and len(argv) == 2:
        path, count = build(argv[1])
        print(f"{path}: {count} slides")
        return 0
    if argv[:1] != ["check"] or len(argv) not in (2, 3) or argv[2:] not in ([], ["--screenshots"]):
        sys.exit(__doc__.split("\n\n")[1])
    start = time.monotonic()
    count, problems = measure(argv[1])
    print(f"{count} slides checked in headless Chromium in {time.monotonic() - start:.1f} s")
    if not problems and "--screenshots" in argv:
        start = time.monotonic()
        problems = screenshots(argv[1], count)
        print(f"{count} screenshots (slide-1.png ... slide-{count}.png beside the deck) "
              f"in {time.monotonic() - start:.1f} s")
    for problem in problems:
        print(f"slides: {problem}", file=sys.stderr)
    return 1 if problems else 0


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>TITLE</title>
<link rel="stylesheet" href="node_modules/reveal.js/dist/reveal.css">
<link rel="stylesheet" href="node_modules/reveal.js/dist/theme/white.css">
<style>
:root { --r-heading-text-transform: none; --r-main-font-size: 34px;
        --r-heading1-size: 2.1em; --r-heading2-size: 1.45em; --r-heading3-size: 1.1em; }
.reveal table { font-size: 0.85em; }
.reveal .katex-display { margin: 0.4em 0; }
.reveal svg.figure { display: block; margin: 0 auto; height: 670px; width: auto; max-width: 100%; }
#check { display: none; }
</style>
</head>
<body>
<div class="reveal"><div class="slides">
SECTIONS
</div></div>
<script src="node_modules/reveal.js/dist/reveal.js"></script>
<script src="node_modules/reveal.js/plugin/notes/notes.js"></script>
<script src="node_modules/reveal.js/plugin/math/math.js"></script>
<script>
CHECK_JS
// ?check: measure the deck (not in the speaker view's previews, which load it with ?receiver)
const checking = /[?&]check\\b/.test(location.search) && !/receiver/.test(location.search);
Reveal.initialize({
  width: 1280, height: 720, hash: true, slideNumber: "c/t",
  transition: checking ? "none" : "slide",  // the check measures each slide where it rests
  // KaTeX from beside the deck, never a CDN; formulas only where mistune marked them, not at any $
  katex: { local: "node_modules/katex", delimiters: [{left: "$$", right: "$$", display: true},
                                                     {left: "\\\\(", right: "\\\\)", display: false}] },
  plugins: [RevealNotes, RevealMath.KaTeX],
}).then(() => { if (checking) check(0); });
</script>
</body>
</html>
"""

# The deck measures itself when opened with ?check; scripts/slides.py check reads <pre id="check">.
CHECK_JS = """function check(tries) {
  const untypeset = s => [...s.querySelectorAll(".math")].filter(m => !m.querySelector(".katex, .katex-error"));
  // KaTeX loads after reveal.js is ready: wait for it (at most 100 x 100 ms of Chromium's virtual time)
  if (untypeset(document).length && tries < 100) return setTimeout(() => check(tries + 1), 100);
  const {width, height} = Reveal.getConfig();
  const slides = Reveal.getSlides().map((s, i) => {
    Reveal.slide(i);
    Reveal.layout();
    const box = document.querySelector(".reveal .slides").getBoundingClientRect();  // the slide, scaled
    let out = 0;  // how far (screen pixels) any visible element reaches beyond the slide
    for (const e of [s, ...s.querySelectorAll("*")]) {
      if (e.parentElement.closest(".katex, svg")) continue;  // a formula or a picture counts whole
      const r = e.getBoundingClientRect();
      if (!r.width && !r.height) continue;  // not shown (the notes)
      out = Math.max(out, box.top - r.top, r.bottom - box.bottom, box.left - r.left, r.right - box.right);
    }
    const overflow = Math.max(out / Reveal.getScale(), s.scrollHeight - height, s.scrollWidth - width);
    const heading = (s.querySelector("h1, h2") || document.createElement("h2")).cloneNode(true);
    heading.querySelectorAll(".katex-mathml").forEach(m => m.remove());  // a formula's text once, not thrice
    return {slide: i + 1, title: heading.textContent, overflow: Math.round(overflow),
            notes: (Reveal.getSlideNotes(s) || "").trim().length, untypeset: untypeset(s).length};
  });
  Reveal.slide(0);
  try { Reveal.getPlugin("notes").open(); } catch (e) {}  // the speaker view, as the key s opens it
  speaker({slides}, 0);
}
function speaker(report, tries) {
  // the speaker view is a window this page wrote (about:blank): its notes of slide 1 are ours to read
  const view = window.open("", "reveal.js - Notes");
  const shown = view && view.document.querySelector(".speaker-controls-notes .value");
  if (!(shown && shown.textContent.trim()) && tries < 50) return setTimeout(() => speaker(report, tries + 1), 100);
  const notes = document.createElement("div");
  notes.innerHTML = Reveal.getSlideNotes(Reveal.getSlides()[0]) || "";
  report.speaker_view = {shown: shown ? shown.textContent.trim() : "", notes: notes.textContent.trim()};
  const urls = performance.getEntriesByType("resource").map(e => e.name);
  report.network = urls.filter(u => !/^(file|data|blob):/.test(u));
  report.failed_fonts = [...document.fonts].filter(f => f.status === "error").map(f => f.family);
  const pre = document.createElement("pre");
  pre.id = "check";
  pre.textContent = JSON.stringify(report);
  document.body.appendChild(pre);
}"""

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
