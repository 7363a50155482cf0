#!/usr/bin/env bash
# The performance table of docs/performance.md (issue 19's rows), measured: one run of each shape at several sizes
# (onboarding as the onboarding-50 campaign with every machine let through at once; the rollout as ci-50 without its
# route swap), the growth exponent of wall time with size, the six shipped campaigns' 100 runs on 2 jobs, 10,000
# agents heartbeating for two virtual hours (one run), and — from criterion (`cargo bench -p sim --bench run`) — a heartbeat exchange against the
# bare discrete-event floor on tokio's paused clock at 50, 1,000 and 5,000 agents. Writes target/bench/table.md and
# prints it.
#
#   scripts/bench-table.sh                 # sizes 50 200 1000, 3 samples each (the median is kept)
#   SIZES="50 200" SAMPLES=1 CRITERION=0 scripts/bench-table.sh   # quicker: no criterion (about 8 minutes)
#
# Timings are wall seconds and peak RSS of the whole process (GNU time). Run it on a quiet machine and say the load
# with the figures; never assert them in a test.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${SIZES:-50 200 1000}
samples=${SAMPLES:-3}
fleetsim=${FLEETSIM:-./target/release/fleetsim}
out=target/bench
mkdir -p "$out"
[ -n "${FLEETSIM:-}" ] || cargo build --release --locked -p sim >&2
command -v /usr/bin/time >/dev/null || { echo "needs GNU time (/usr/bin/time)" >&2; exit 2; }

# One shape at one size: a one-run campaign file.
shape() {
    local kind=$1 n=$2 file="$out/$1-$2.toml"
    case $kind in
        onboarding) sed -e "s/^nodes = 50$/nodes = $n/" -e "s/^concurrency = 10$/concurrency = $n/" \
                        -e 's/^runs = 100$/runs = 1/' campaigns/onboarding-50.toml >"$file" ;;
        # Without the route swap: the one run of seed 1 draws it, and a rollout stops on a route change (minutes
        # in, whatever the size), which would time the stop, not the rollout.
        rollout) sed -e "/^\[fleet\]/,/^\[/ s/^nodes = 50$/nodes = $n/" \
                     -e "s/^availability_floor = 42$/availability_floor = $((n * 42 / 50))/" \
                     -e '/^route_swap = /d' -e 's/^runs = 100$/runs = 1/' campaigns/ci-50.toml >"$file" ;;
    esac
    echo "$file"
}

# The median wall seconds and peak MiB of `samples` runs of a command: "SECONDS MIB".
measure() {
    local times=()
    for _ in $(seq 1 "$samples"); do
        /usr/bin/time -f "%e %M" -o "$out/time" "$@" >/dev/null 2>&1 || [ $? -eq 1 ]
        times+=("$(tail -1 "$out/time")")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v n="${#times[@]}" 'NR == int((n + 1) / 2) { printf "%s %.1f\n", $1, $2 / 1024 }'
}

{
    echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), by scripts/bench-table.sh"
    echo
    echo "| shape | nodes | wall s (median of $samples) | peak MiB |"
    echo "|---|---|---|---|"
    for kind in onboarding rollout; do
        first_n=; first_t=; last_n=; last_t=
        for n in $sizes; do
            file=$(shape "$kind" "$n")
            read -r seconds mib < <(measure "$fleetsim" campaign "$file" --jobs 1 --out "$out/$kind-$n")
            echo "| $kind | $n | $seconds | $mib |"
            [ -n "$first_n" ] || { first_n=$n; first_t=$seconds; }
            last_n=$n; last_t=$seconds
        done
        if [ "$first_n" != "$last_n" ]; then
            awk -v a="$first_n" -v ta="$first_t" -v b="$last_n" -v tb="$last_t" -v k="$kind" \
                'BEGIN { if (ta > 0) printf "| %s growth %d → %d | | N^%.2f | |\n", k, a, b, log(tb / ta) / log(b / a) }'
        fi
    done
    echo
    echo "| campaign (100 runs, 2 jobs) | wall s (median of $samples) | peak MiB |"
    echo "|---|---|---|"
    for campaign in ci-50 heartbeats-50 onboarding-50 lifecycle-50 instances-50 fleet-50; do
        read -r seconds mib < <(measure "$fleetsim" campaign "campaigns/$campaign.toml" --jobs 2 --out "$out/$campaign")
        echo "| $campaign | $seconds | $mib |"
    done
    echo
    # The benchmark scenario with 10,000 agents (node names are zero-padded to the fleet's width).
    sed -e 's/^nodes = 50$/nodes = 10000/' -e 's/^a = "node-07"$/a = "node-00007"/' \
        scenarios/fifty-agents-heartbeat-for-two-hours-through-faults.toml >"$out/heartbeats-10000.toml"
    read -r seconds mib < <(measure "$fleetsim" run "$out/heartbeats-10000.toml")
    echo "| one run | wall s (median of $samples) | peak MiB |"
    echo "|---|---|---|"
    echo "| 10,000 agents heartbeating for 2 virtual hours | $seconds | $mib |"
    if [ "${CRITERION:-1}" = 1 ]; then
        cargo bench --locked -p sim --bench run >&2
        echo
        echo "| agents, 2 virtual hours (criterion medians) | run | bare discrete-event floor | ratio |"
        echo "|---|---|---|---|"
        for agents in 50 1000 5000; do
            python3 - "$agents" <<'PY'
import json, sys
agents = sys.argv[1]
def median(group):
    path = f"target/criterion/{group}/{agents}_agents_2h/new/estimates.json"
    return json.load(open(path))["median"]["point_estimate"] / 1e6
run, floor = median("fast_transport"), median("heartbeat_floor")
print(f"| {agents} | {run:.1f} ms | {floor:.1f} ms | {run / floor:.2f}x |")
PY
        done
    fi
} | tee "$out/table.md"
