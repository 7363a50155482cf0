#!/usr/bin/env python3
"""What a run did, beyond its digest: compares two sets of run records by the things a behaviour change could move.

A change that reorders events (a refactor of the controller, say) moves trace digests; this says whether anything a
user reads moved with them. For every scenario and conformance case (`fleetsim run FILE --format json`, one file a
record) and every run of every campaign report (`report.json`), it compares:

  digest     the trace digest
  verdict    the verdict, and the violated oracles
  nodes      per-node outcomes: each workflow's outcome and each rollout's per-node outcome
  lanes      each lane's verdict
  reached    the sometimes-properties reached (by name)
  landings   the fault log: each fault's kind, phase and effect

usage:
  scripts/outcome-table.py record DIR > TABLE.tsv     one line per run: its key and each aspect, hashed
  scripts/outcome-table.py compare BEFORE.tsv AFTER.tsv
                                                      a Markdown table of what moved, by source; exit 1 when any
                                                      aspect but the digest moved, naming the runs

DIR holds `runs/*.json` (scenario and conformance records) and `*/report.json` (campaign reports), as
`fleetsim run --format json` and `fleetsim campaign --out` write them.
"""
import glob
import hashlib
import json
import os
import sys

ASPECTS = ["digest", "verdict", "nodes", "lanes", "reached", "landings"]


def aspects(record):
    verdict = [record["verdict"]["outcome"], sorted({v["oracle"] for v in record.get("violations", [])})]
    nodes = sorted(
        [["workflow", w["workflow"], w["outcome"]] for w in record.get("workflows", [])]
        + [["rollout", r["rollout"], r["outcome"]] for r in record.get("rollouts", [])]
        + [["node", r["rollout"], n["node"], n["outcome"]] for r in record.get("rollouts", []) for n in r["nodes"]]
    )
    lanes = sorted([[l["rollout"], l["lane"], l.get("verdict"), l.get("end_ms") is not None] for l in record.get("lanes", [])])
    reached = sorted({r["oracle"] for r in record.get("reached", [])})
    landings = [[f["kind"], f.get("phase"), f.get("effect")] for f in record.get("fault_log", [])]
    return {
        "digest": record["trace_digest"],
        "verdict": verdict,
        "nodes": nodes,
        "lanes": lanes,
        "reached": reached,
        "landings": landings,
    }


def short(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def record(directory):
    rows = []
    for path in sorted(glob.glob(os.path.join(directory, "runs", "*.json"))):
        try:
            run = json.load(open(path))
        except ValueError:
            continue
        rows.append((run.get("source") or os.path.basename(path), "-", aspects(run)))
    for path in sorted(glob.glob(os.path.join(directory, "*", "report.json"))):
        report = json.load(open(path))
        for run in report["runs"]:
            rows.append((report["campaign"], str(run["run_index"]), aspects(run)))
    for source, index, found in rows:
        print("\t".join([source, index] + [short(found[a]) for a in ASPECTS]))


def load(path):
    table = {}
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        table[(parts[0], parts[1])] = dict(zip(ASPECTS, parts[2:]))
    return table


def compare(before_path, after_path):
    before, after = load(before_path), load(after_path)
    missing = sorted(set(before) ^ set(after))
    by_source = {}
    moved = []
    for key in sorted(set(before) & set(after)):
        source = key[0] if key[1] != "-" else ("scenarios and conformance cases")
        row = by_source.setdefault(source, {"runs": 0, **{a: 0 for a in ASPECTS}})
        row["runs"] += 1
        for aspect in ASPECTS:
            if before[key][aspect] != after[key][aspect]:
                row[aspect] += 1
                if aspect != "digest":
                    moved.append((key, aspect))
    print("| source | runs | digest moved | verdict moved | per-node outcomes moved | lanes moved "
          "| reached moved | landings moved |")
    print("|---|---|---|---|---|---|---|---|")
    for source, row in sorted(by_source.items()):
        print("| " + " | ".join([source, str(row["runs"])] + [str(row[a]) for a in ASPECTS]) + " |")
    for key in missing:
        print(f"only in one table: {key[0]} run {key[1]}", file=sys.stderr)
    for (source, index), aspect in moved:
        print(f"moved: {source} run {index}: {aspect}", file=sys.stderr)
    return 1 if moved or missing else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
