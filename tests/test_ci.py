"""CI runs what the README tells a newcomer to run, as written, in the environment install.sh makes,
before any optional extra is installed (.ci/run); then the extras, and the tests marked with them.
These tests read the README and .ci/run, and fail when one is edited without the other."""
import os
import re

from conftest import EXTRAS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_commands():
    """The newcomer's commands of the README's "Two commands" section: its code blocks that start by
    installing (the GPU command beside them assumes a CUDA machine, not the fresh clone CI has)."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split("\n## Two commands\n", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S) if block.startswith("bash install.sh")]


def ci_lines(text):
    """.ci/run's commands: one a line, comments and blank lines left out, continued lines joined."""
    lines = [line.split(" #")[0].strip() for line in text.replace("\\\n", " ").splitlines()]
    return [" ".join(line.split()) for line in lines if line and not line.startswith("#")]


def first_extra_install(lines):
    """The index of the first line that installs an optional extra (a requirements-*.txt, or a Debian
    package), or len(lines)."""
    return next((i for i, line in enumerate(lines)
                 if re.search(r"pip install .*requirements-\w+\.txt|apt-get install", line)), len(lines))


def problems(readme, ci):
    """What keeps .ci/run from running the README's two commands verbatim before any extra, and the
    marked tests after it; [] when it does."""
    lines, found = ci_lines(ci), []
    if len(readme) != 2:
        return [f"the README's 'Two commands' section holds {len(readme)} code blocks, not 2"]
    extras_at = first_extra_install(lines)
    for command in readme:
        if command not in lines:
            found.append(f".ci/run does not run the README's command as written: {command}")
        elif lines.index(command) > extras_at:
            found.append(f".ci/run runs the README's command after an extra is installed: {command}")
    marked = [m.group(1) for line in lines[extras_at:] if (m := re.search(r'pytest .*-m "([^"]*)"', line))]
    selected = set(marked[0].split(" or ")) if marked else set()
    if selected != set(EXTRAS):
        found.append(f".ci/run's second pass selects {sorted(selected)}, not every extra's marker {sorted(EXTRAS)}")
    return found


def test_ci_runs_the_readmes_two_commands_verbatim_before_any_extra():
    readme = readme_commands()
    assert readme[1].endswith("-m pytest -q") and "train.py" in readme[0]
    assert problems(readme, open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()) == []


def test_the_agreement_check_fails_when_one_side_changes():
    """Each edit of one side alone is caught: a README command changed, a CI line changed, an extra
    installed first, an extra's marker missing from the second pass."""
    readme = ["bash install.sh && .venv/bin/python train.py --steps 3", "bash install.sh && .venv/bin/python -m pytest -q"]
    second = '.venv/bin/python -m pytest -q -m "' + " or ".join(EXTRAS) + '"'
    good = "\n".join(["set -e", "# the README's", *readme, "pip install -q -r requirements-plot.txt \\\n  -c requirements.txt",
                      second, "jupyter execute notebooks/lesson.ipynb"])
    assert problems(readme, good) == []
    assert "as written" in problems([readme[0], readme[1] + " -x"], good)[0]
    assert "as written" in problems(readme, good.replace("--steps 3", "--steps 2"))[0]
    extras_first = good.replace("set -e", "pip install -r requirements-trackers.txt")
    assert [p for p in problems(readme, extras_first) if "after an extra" in p] != []
    assert "second pass" in problems(readme, good.replace(" or chromium", ""))[0]
    assert "2" in problems(readme[:1], good)[0]


def test_no_test_skips_on_an_extra_unless_marked_with_it():
    """A test that skips itself when an extra is missing (importorskip, a skipif on chromium) but is not
    marked would never run in CI: the first pass lacks the extra, the second selects by marker. A
    module that needs an extra to import at all is marked whole (pytestmark) and may importorskip."""
    import glob
    unmarked = []
    for path in glob.glob(os.path.join(ROOT, "tests", "*.py")) + glob.glob(os.path.join(ROOT, "speedlab", "tests", "*.py")):
        if os.path.basename(path) in ("conftest.py", "test_ci.py"):
            continue
        text = open(path, encoding="utf-8").read()
        whole = re.search(r"^pytestmark = pytest\.mark\.(\w+)", text, re.M)
        if "importorskip(" in text and not (whole and whole.group(1) in EXTRAS) or 'which("chromium")' in text:
            unmarked.append(os.path.relpath(path, ROOT))
    assert unmarked == []
