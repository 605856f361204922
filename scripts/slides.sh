#!/usr/bin/env bash
# The class's deck (lecture/slides.md) as a reveal.js page that opens offline (docs/class.md):
#   bash scripts/slides.sh [OUT]                 # writes OUT/slides.html (OUT: slides/ by default)
#   SCREENSHOTS=1 bash scripts/slides.sh [OUT]   # then checks every slide in headless Chromium, as CI does
# scripts/slides.py writes the page (mistune, from requirements-notebook.txt). reveal.js (with its notes and
# math plugins) and KaTeX are installed from the npm registry into OUT/node_modules once, at pinned versions, and
# the page loads them from there, so it needs no network when it is shown. With SCREENSHOTS=1 each slide is
# measured (content beyond the slide, notes, formulas, fonts, network) and saved as OUT/slide-N.png; a blank or
# overflowing slide fails, naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-slides}
reveal=5.2.1 katex=0.16.22
py=${PYTHON:-.venv/bin/python}; [ -x "$py" ] || py=python3
"$py" -c "import mistune" 2>/dev/null ||
    { echo "slides need mistune: .venv/bin/pip install -r requirements-notebook.txt -c requirements.txt"; exit 2; }
mkdir -p "$out"
if ! grep -qs "\"version\": \"$reveal\"" "$out/node_modules/reveal.js/package.json" ||
   ! grep -qs "\"version\": \"$katex\"" "$out/node_modules/katex/package.json"; then
    command -v npm >/dev/null || { echo "slides need npm (Node.js) to fetch reveal.js and KaTeX once"; exit 2; }
    # npm trusts the system's certificates too (a proxy that re-signs TLS adds its root there)
    if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
        export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
    fi
    echo "fetching reveal.js@$reveal and katex@$katex from the npm registry, once, into $out/node_modules"
    # one retry after 2 s, 20 s a request: without a network npm stops in seconds (its defaults wait minutes)
    npm install --no-audit --no-fund --no-package-lock --loglevel=error --prefix "$out" \
        --fetch-retries=1 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=2000 --fetch-timeout=20000 \
        "reveal.js@$reveal" "katex@$katex" >/dev/null ||  # only its summary goes: its errors (stderr) show
        { echo "npm could not install reveal.js@$reveal and katex@$katex into $out/node_modules (above: why)" >&2; exit 1; }
fi
"$py" scripts/slides.py build "$out"
# nothing from the network: no src, href or CSS url() that starts with http:// or https:// (or //)
! grep -Eq '(src|href)="(https?:)?//|url\((https?:)?//' "$out/slides.html" ||
    { echo "the deck still loads something from the network" >&2; exit 1; }
if [ "${SCREENSHOTS:-}" = 1 ]; then
    command -v chromium >/dev/null || { echo "chromium not found: apt-get install -y chromium" >&2; exit 1; }
    "$py" scripts/slides.py check "$out/slides.html" --screenshots
fi
