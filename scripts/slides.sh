#!/usr/bin/env bash
# The lesson notebook as a reveal.js deck that opens offline (docs/class.md):
#   bash scripts/slides.sh [OUT]      # writes OUT/lesson.slides.html (OUT: slides/ by default)
# `jupyter nbconvert --to slides` reads the slide metadata of notebooks/lesson.ipynb (one idea a slide;
# the setup cells are skipped). The deck links reveal.js 4.0.2 (the version nbconvert 7's template is
# written for), MathJax 2.7.9, require.js and jQuery from OUT/node_modules, installed there once from the npm registry, so
# it needs no network when it is shown. Needs requirements-notebook.txt (nbconvert) and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-slides}
py=${PYTHON:-.venv/bin/python}; [ -x "$py" ] || py=python3
"$py" -c "import nbconvert" 2>/dev/null || { echo "slides need nbconvert: .venv/bin/pip install -r requirements-notebook.txt -c requirements.txt"; exit 2; }
command -v npm >/dev/null || { echo "slides need npm (Node.js) to fetch reveal.js and MathJax once"; exit 2; }
mkdir -p "$out"
# npm trusts the system's certificates too (a proxy that re-signs TLS adds its root there)
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi
if [ ! -f "$out/node_modules/requirejs/require.js" ]; then
    npm install --silent --no-audit --no-fund --no-package-lock --prefix "$out" reveal.js@4.0.2 mathjax@2.7.9 \
        requirejs@2.3.7 jquery@2.2.4 >/dev/null
fi
"$py" -m jupyter nbconvert --to slides notebooks/lesson.ipynb --output-dir "$out" --log-level WARN \
    --SlidesExporter.reveal_url_prefix=node_modules/reveal.js --SlidesExporter.reveal_scroll=True \
    "--SlidesExporter.mathjax_url=node_modules/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
# the template's two scripts from a CDN, taken from node_modules too
sed -i -e 's#https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js#node_modules/requirejs/require.js#' \
    -e 's#https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.3/jquery.min.js#node_modules/jquery/dist/jquery.min.js#' \
    "$out/lesson.slides.html"
! grep -q 'src="http' "$out/lesson.slides.html" || { echo "the deck still loads a script from the network" >&2; exit 1; }
echo "$out/lesson.slides.html"
if [ "${SCREENSHOTS:-}" = 1 ]; then  # CI: the first and the last slide, in headless Chromium
    command -v chromium >/dev/null || { echo "chromium not found: apt-get install -y chromium" >&2; exit 1; }
    last=$("$py" -c "import json; c = json.load(open('notebooks/lesson.ipynb'))['cells']; print(sum(x['metadata'].get('slideshow', {}).get('slide_type') == 'slide' for x in c) - 1)")
    for which in "first 0" "last $last"; do
        set -- $which
        chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=15000 --window-size=1280,800 \
            --screenshot="$out/slides-$1.png" "file://$(realpath "$out/lesson.slides.html")#/$2" 2>/dev/null
        echo "$out/slides-$1.png"
    done
    "$py" - "$out"/slides-first.png "$out"/slides-last.png <<'PY'
import sys
from PIL import Image  # matplotlib's dependency (requirements-notebook.txt)
for path in sys.argv[1:]:  # a deck whose scripts did not load is a white page
    lo, hi = Image.open(path).convert("L").getextrema()
    if hi - lo < 64:
        sys.exit(f"{path} is blank: the deck did not render")
PY
fi
