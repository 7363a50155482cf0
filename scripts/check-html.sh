#!/usr/bin/env bash
# Loads fleetsim's HTML report in a real headless browser and takes a screenshot. `.ci/run` installs Debian's
# chromium and runs it on the CI campaigns' reports.
#
#   scripts/check-html.sh                      # renders a 4-run ci-50 campaign, then checks its page
#   scripts/check-html.sh REPORT.json          # renders that report's page, then checks it
#   scripts/check-html.sh PAGE.html            # checks an already rendered page
#
# Needs chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium), or BROWSER=/path.
# Exit codes: 0 the page loaded and a screenshot was written, 1 the browser failed, 2 bad input or no browser.
set -euo pipefail
cd "$(dirname "$0")/.."

browser="${BROWSER:-}"
if [ -z "$browser" ]; then
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$name" >/dev/null 2>&1; then
            browser="$(command -v "$name")"
            break
        fi
    done
fi
if [ -z "$browser" ]; then
    echo "error: no chromium, chromium-browser or google-chrome on PATH: install one (apt-get install chromium) or set BROWSER" >&2
    exit 2
fi

work="target/check-html"
mkdir -p "$work"
input="${1:-}"
case "$input" in
    "")
        cargo run --quiet --release -p sim -- campaign campaigns/ci-50.toml --runs 4 --out "$work/campaign" >/dev/null || true
        input="$work/campaign/report.json"
        ;;
esac
case "$input" in
    *.html) page="$input" ;;
    *)
        page="$work/report.html"
        cargo run --quiet --release -p sim -- report "$input" --format html -o "$page"
        ;;
esac
if [ ! -f "$page" ]; then
    echo "error: $page: no such file" >&2
    exit 2
fi
if grep -Eq 'https?://|<script|<link|src=|href=' "$page"; then
    echo "error: $page: references something outside itself" >&2
    exit 1
fi

screenshot="$work/$(basename "$page" .html).png"
rm -f "$screenshot"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
# The background-networking flags keep Chromium from reaching out (a closed network refuses it, many times over).
if ! "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --window-size=1280,2400 \
    --user-data-dir="$profile" --screenshot="$screenshot" "file://$(realpath "$page")" 2>"$work/browser.log"; then
    echo "error: $browser failed to load $page (log: $work/browser.log)" >&2
    exit 1
fi
if [ ! -s "$screenshot" ] || [ "$(head -c 4 "$screenshot" | od -An -c | tr -d ' ')" != "211PNG" ]; then
    echo "error: $browser wrote no screenshot of $page (log: $work/browser.log)" >&2
    exit 1
fi
echo "ok  $page loaded in $(basename "$browser"); screenshot $screenshot ($(wc -c <"$screenshot") bytes)"
