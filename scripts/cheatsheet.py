"""Print the cheat sheet: docs/cheatsheet.md as a two-page handout, formulas and symbols on page 1,
the worked example on page 2.

    .venv/bin/python scripts/cheatsheet.py [OUT.pdf] [--paper a4|letter]

writes OUT.pdf (default slides/cheatsheet.pdf, beside scripts/slides.sh's deck; A4 unless --paper
letter) and OUT.html beside it, and says how many pages it printed. The page marks are HTML comments in docs/cheatsheet.md, which GitHub does
not show: page 1 is everything above `<!-- page -->`, page 2 everything from there to
`<!-- screen only -->`; what follows (where each formula is in the code) is not printed.

Needs mistune, which requirements-notebook.txt installs with nbconvert (run with mistune 3.4.0;
mistune 2's `create_markdown` takes the same arguments), and Debian's chromium, which prints the
HTML to PDF headless. tests/test_cheatsheet.py checks the result: exactly 2 pages, on A4 and on
Letter, page 1's headings the formulas', symbols' and departures', page 2's the worked example's.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHEET = os.path.join(ROOT, "docs", "cheatsheet.md")
PAGE, SCREEN_ONLY = "<!-- page -->", "<!-- screen only -->"  # each alone on its line in the sheet
PAPERS = {"a4": "A4", "letter": "letter"}  # --paper: CSS @page sizes

# Print styles: 8.5 pt text and 8 pt code on page 1 (9 and 8.5 on page 2, which has room), thin-ruled
# tables; each page a <section>, the second starting a new sheet of paper. Chromium prints
# backgrounds only when told (print-color-adjust).
CSS = """
@page { size: PAPER portrait; margin: 9mm 10mm; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body { margin: 0; font: 8.5pt/1.22 "DejaVu Sans Condensed", "DejaVu Sans", sans-serif; color: #111; }
section + section { break-before: page; }
h1 { font-size: 12.5pt; margin: 0 0 3pt; }
h2 { font-size: 10pt; margin: 7pt 0 2pt; padding-bottom: 1pt; border-bottom: 0.8pt solid #456; color: #234; }
p, ul { margin: 2.5pt 0; }
ul { padding-left: 12pt; }
table { border-collapse: collapse; margin: 2pt 0 3pt; }
.page1 table { width: 100%; }  /* page 2's tables are as wide as their numbers */
.page2 { font-size: 9pt; }
.page2 code { font-size: 8.5pt; }
th, td { border: 0.5pt solid #aab; padding: 1pt 3pt; text-align: left; vertical-align: top; }
td[style*=right] { font-variant-numeric: tabular-nums; }
th { background: #e4e9f0; }
tr:nth-child(even) td { background: #f5f7fa; }
code { font: 8pt "DejaVu Sans Mono", monospace; }
td:last-child code { white-space: nowrap; }  /* a flag unbroken */
a { color: inherit; text-decoration: none; }
"""


def printed_pages(text):
    """The sheet's two printed pages, as markdown: what precedes PAGE, and what lies between PAGE
    and SCREEN_ONLY. Refuses a sheet whose marks are missing, repeated or out of order."""
    lines = text.splitlines()
    if [lines.count(PAGE), lines.count(SCREEN_ONLY)] != [1, 1] or lines.index(PAGE) > lines.index(SCREEN_ONLY):
        raise SystemExit(f"{SHEET}: expected one line {PAGE}, then one line {SCREEN_ONLY}")
    page, screen = lines.index(PAGE), lines.index(SCREEN_ONLY)
    return ["\n".join(lines[:page]), "\n".join(lines[page + 1:screen])]


def to_html(pages, paper="a4", first=1):
    """One HTML document, a <section class="pageN"> per page of markdown, N counted from `first`."""
    try:
        import mistune
    except ImportError:
        raise SystemExit("scripts/cheatsheet.py needs mistune: .venv/bin/pip install -r requirements-notebook.txt "
                         "-c requirements.txt") from None
    if not hasattr(mistune, "create_markdown"):  # mistune 0.8
        raise SystemExit(f"scripts/cheatsheet.py needs mistune 2 or 3, not {mistune.__version__}: .venv/bin/pip install "
                         "-r requirements-notebook.txt -c requirements.txt")
    markdown = mistune.create_markdown(escape=True, plugins=["table"])  # mistune 2 and 3 alike
    sections = []
    for n, page in enumerate(pages, first):
        body = markdown(re.sub(r"<!--.*?-->", "", page, flags=re.S))  # the marks and notes to editors
        sections.append(f'<section class="page{n}">\n' + body.replace("\\|", "|") + "</section>")  # a cell's \| is |
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Cheat sheet: MT-GRPO and AT-GRPO"
            f"</title>\n<style>{CSS.replace('PAPER', PAPERS[paper])}</style></head>\n<body>\n"
            + "\n".join(sections) + "\n</body></html>\n")


def print_pdf(html_path, pdf_path):
    """Headless Chromium prints the HTML file to PDF, with a profile of its own (another Chromium
    running does not lock it), no date or URL in the margins, and the headings as bookmarks."""
    if shutil.which("chromium") is None:
        raise SystemExit("scripts/cheatsheet.py needs chromium: apt-get install -y chromium (Debian)")
    with tempfile.TemporaryDirectory(prefix="cheatsheet-chromium-") as profile:
        run = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                              "--no-first-run", "--no-pdf-header-footer", "--generate-pdf-document-outline",
                              f"--user-data-dir={profile}",
                              f"--print-to-pdf={os.path.abspath(pdf_path)}", "file://" + os.path.abspath(html_path)],
                             capture_output=True, text=True, timeout=180)
    if run.returncode != 0 or not os.path.exists(pdf_path):
        raise SystemExit(f"chromium did not print {pdf_path}: {run.stderr.strip()[-500:]}")


def page_count(pdf_path):
    """Pages of a PDF: its /Type /Page objects (the page tree's /Type /Pages nodes not counted)."""
    with open(pdf_path, "rb") as f:
        return len(re.findall(rb"/Type\s*/Page(?![A-Za-z])", f.read()))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default="slides/cheatsheet.pdf", help="the PDF to write (default slides/cheatsheet.pdf)")
    p.add_argument("--paper", choices=PAPERS, default="a4", help="paper size, portrait (default a4)")
    args = p.parse_args(argv)
    with open(SHEET, encoding="utf-8") as f:
        html = to_html(printed_pages(f.read()), args.paper)
    html_path = os.path.splitext(args.out)[0] + ".html"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(html_path, "w", encoding="utf-8") as f:
        f.write(html)
    print_pdf(html_path, args.out)
    n = page_count(args.out)
    print(f"{args.out}: {n} pages ({args.paper}); {html_path}")
    if n != 2:
        raise SystemExit(f"{args.out} has {n} pages, not 2: shorten the page of docs/cheatsheet.md that overflows")


if __name__ == "__main__":
    sys.exit(main())
