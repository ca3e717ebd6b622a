"""Every quality figure of a run, without its timings: to prove two commits replay alike.

Reads a run directory of `memharness run` (its per-strategy files) and writes one
canonical JSON document: per scenario and strategy, every figure the file holds (recall,
stale, over-forgetting, leakage, PII residency and detector, footprint series and peaks,
monitoring, the recorded probes and leaks) with the wall-clock measurements left out
(turns/s, wall and inside seconds, peak RSS, latency percentiles, cleanup durations, the
run id). Two dumps compare exactly (`--compare`): figures are not rounded.

One thing is normalised: the order of a recorded probe's hits within a layer. Where two
candidates tie (the same dense distance, the same lexical score), the stores break the tie
by fact id, and fact ids are random: two runs of the same commit can list the same hits
in another order (seen on keep_all). The dump keeps each layer's hits (text, facts) sorted
and their scores sorted beside them, so a hit that comes or goes, or a score that
changes, still shows.

usage:
  .venv/bin/python -m bench.replay_dump reports/RUN_ID -o before.json
  .venv/bin/python -m bench.replay_dump reports/RUN_ID --compare before.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: Wall-clock measurements: they differ between any two runs of the same commit.
TIMINGS = {
    ("run_id",),
    ("file",),
    ("latency_ms",),
    ("metrics", "wall_s"),
    ("metrics", "inside_s"),
    ("metrics", "turns_per_s"),
    ("metrics", "peak_rss_mb_by_shard"),
    ("monitoring", "cleanup", "total_s"),
    ("monitoring", "cleanup", "mean_s"),
    ("monitoring", "cleanup", "max_s"),
    ("scenario", "source"),
}


def figures(run_dir: Path) -> dict[str, Any]:
    """{scenario/strategy label: its figures without timings}, from `run_dir`."""
    out: dict[str, Any] = {}
    for path in sorted(run_dir.glob("*.json")):
        if path.name == "results.json":
            continue
        doc = json.loads(path.read_text())
        for key in TIMINGS:
            _drop(doc, key)
        for probe in doc.get("probes") or []:
            probe["hits"] = {layer: _unordered(hits) for layer, hits in probe["hits"].items()}
        out[f"{doc['scenario']['name']}/{doc['label']}"] = doc
    if not out:
        raise SystemExit(f"{run_dir}: no strategy files")
    return out


def _unordered(hits: list[dict[str, Any]]) -> dict[str, Any]:
    """A layer's hits without their order among ties (module docstring)."""
    found = sorted((hit["text"], sorted(hit["facts"])) for hit in hits)
    return {"hits": found, "scores": sorted(hit["score"] for hit in hits)}


def _drop(doc: dict[str, Any], key: tuple[str, ...]) -> None:
    for part in key[:-1]:
        doc = doc.get(part) or {}
    doc.pop(key[-1], None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("-o", "--out", type=Path, help="write the dump here")
    parser.add_argument("--compare", type=Path, help="a dump to compare with (exit 1 if not equal)")
    args = parser.parse_args()
    dump = json.dumps(figures(args.run_dir), indent=1, sort_keys=True)
    if args.out is not None:
        args.out.write_text(dump)
    if args.compare is None:
        if args.out is None:
            print(dump)
        return
    before = json.loads(args.compare.read_text())
    now = json.loads(dump)
    for key in sorted(set(before) ^ set(now)):
        print(f"only in {'the compared dump' if key in before else 'this run'}: {key}")
    both = sorted(set(before) & set(now))
    differ = [k for k in both if before[k] != now[k]]
    for key in differ:
        parts = sorted(
            p for p in before[key].keys() | now[key].keys() if before[key].get(p) != now[key].get(p)
        )
        print(f"differs: {key}: {', '.join(parts)}")
    print(f"{len(both) - len(differ)} of {len(both)} strategy dumps in both identical")
    sys.exit(1 if differ or set(before) ^ set(now) else 0)


if __name__ == "__main__":
    main()
