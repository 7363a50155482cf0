#!/usr/bin/env bash
# The mutation-testing slice CI runs (docs/testing.md): one rotating shard of the mutants of the files whose whole
# set has been run and every survivor accounted for, tested in place with the engine's unit tests. Fails on a missed
# or timed-out mutant. Installs the pinned cargo-mutants when it is missing.
#
# usage: scripts/mutants-slice.sh [SHARD]      SHARD in 0..SHARDS-1; default: the commit's hash modulo SHARDS (the same
#                                             in a shallow clone as in a full one)
set -euo pipefail
cd "$(dirname "$0")/.."

# The files accounted for in docs/testing.md (a regex over cargo-mutants' mutant names): every file that
# .cargo/mutants.toml names, each with its row there and every survivor accounted for.
ACCOUNTED='^engine/src/'
SHARDS=12
VERSION=27.1.0

shard=${1:-$(( 16#$(git rev-parse --short=8 HEAD) % SHARDS ))}
if ! [[ "$shard" =~ ^[0-9]+$ ]] || (( shard >= SHARDS )); then
    echo "mutants-slice: SHARD must be 0 to $((SHARDS - 1)), not '$shard'" >&2
    exit 2
fi
if ! cargo mutants --version 2>/dev/null | grep -q "$VERSION"; then
    cargo install cargo-mutants --locked --version "$VERSION" --quiet
fi
echo "mutants-slice: shard $shard/$SHARDS of the mutants matching $ACCOUNTED"
# In place, so the workspace's own build is reused; incremental, so each mutant rebuilds only what it touched.
CARGO_INCREMENTAL=1 cargo mutants --in-place --re "$ACCOUNTED" --shard "$shard/$SHARDS" --output target/mutants-slice
