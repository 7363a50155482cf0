#!/usr/bin/env bash
# The golden digests: every scenario's and conformance case's trace digest (fast transport, each file's own seed) in
# tests/golden/digests.tsv, and each shipped campaign's digest at its full run count in tests/golden/campaigns.tsv.
# A change that must not change behaviour leaves both files byte-identical; one that does change behaviour rewrites
# them on purpose and says why in its commit message.
#
#   scripts/golden-digests.sh               rewrite digests.tsv from the release binary
#   scripts/golden-digests.sh --check       compare, exit 1 naming every file whose digest moved
#   scripts/golden-digests.sh [--check] --campaigns REPORT.json...
#                                           the same for campaigns.tsv, from the report.json of each shipped
#                                           campaign run at its full run count (.ci/run passes its own)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${FLEETSIM:-./target/release/fleetsim}
check=false
reports=()
while [ $# -gt 0 ]; do
    case "$1" in
        --check) check=true ;;
        --campaigns) shift; reports=("$@"); break ;;
        *) echo "usage: $0 [--check] [--campaigns REPORT.json...]" >&2; exit 2 ;;
    esac
    shift
done

field() { grep -o "\"$1\": *\"\\?[0-9a-f]*" | head -1 | sed 's/.*: *"\{0,1\}//'; }

if [ ${#reports[@]} -gt 0 ]; then
    golden=tests/golden/campaigns.tsv
    fresh=$(mktemp)
    python3 - "${reports[@]}" > "$fresh" <<'PY'
import json, sys
rows = []
for path in sys.argv[1:]:
    report = json.load(open(path))
    rows.append((report["campaign"], report["summary"]["runs"], report["summary"]["campaign_digest"]))
for campaign, runs, digest in sorted(rows):
    print(f"{campaign}\t{runs}\t{digest}")
PY
else
    [ -x "$bin" ] || { echo "$bin: not built (cargo build --release -p sim)" >&2; exit 2; }
    golden=tests/golden/digests.tsv
    fresh=$(mktemp)
    for file in scenarios/*.toml conformance/*/*.toml; do
        record=$("$bin" run "$file" --format json || true)
        printf '%s\t%s\t%s\n' "$file" "$(field seed <<< "$record")" "$(field trace_digest <<< "$record")" >> "$fresh"
    done
fi

if $check; then
    if ! diff -u "$golden" "$fresh"; then
        echo "golden digests moved ($golden): a behaviour-preserving change must leave them as they are;" \
             "a behaviour change reruns $0 and says why in its commit" >&2
        rm -f "$fresh"
        exit 1
    fi
    echo "golden digests: $(wc -l < "$golden") unchanged ($golden)"
    rm -f "$fresh"
else
    mv "$fresh" "$golden"
    echo "wrote $golden ($(wc -l < "$golden") lines)"
fi
