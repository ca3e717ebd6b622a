"""How fast the machine runs during a bench run, against the speed the SLAs are judged at.

The absolute SLA gate compares an operation's p95 with a fixed SLA, and on this project's
2-core machine the same code runs up to ~2.3x slower at some moments than at others:
clean code failed the STM SLA in five CI runs of one day and passed in the next with
p95s of half those figures, and two busy processes beside a run reproduce it (the STM
operations' p50 x2.0-2.4). A gate that fails clean code on a slow moment is flaky, and
the SLA is a promise about the reference hardware, not about whatever share of two cores
a run happens to get.

So every measured operation on the real backends is bracketed by a **probe**: a fixed
piece of the STM layer's own work, identical at every call (embed a fixed text with the
bench's model, no cache; upsert it under a fixed id into a scratch Chroma collection of
200 records; read it back). Its median beside an operation, over the **reference**
(`baseline/machine.json`: the probe's median on this machine when idle, with the
versions of the libraries it runs), is the slowdown the operation was measured under;
the gate judges the p95 at the reference's speed (`memharness.verdict.samples.check_sla`,
`slowdown`).

- Only a slower machine is scaled: a faster one is judged as measured (the SLA holds on
  hardware at least as fast as the reference).
- The probe is the libraries' work, not this project's: a change to how the reference
  uses Chroma or the model moves the operations and not the probe. A new version of a
  library the probe runs changes the key, and a run without a matching reference is
  judged as measured (and says so) until `python -m bench.machine --record` is run.
- A fixed delay (the calibration's injected busy wait, a network hop) does not grow
  with a slow machine, so on a slowed machine the gate sees it scaled down: its power
  against such a delay is lower there, measured in docs/latency.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from reference.stm.chroma_store import HNSW_WRITES
from reference.text_interfaces import Embedder

REFERENCE_PATH = Path(__file__).parent / "baseline" / "machine.json"
#: Probes taken right before and right after each measured operation.
PROBES_PER_SIDE = 10
PROBE_TEXT = "Please remember that my daughter is allergic to peanuts and we fly on Friday"
_PROBE_RECORDS = 200
_PROBE_ID = "machine-probe"


class MachineProbe:
    """The fixed workload (module docstring) on the bench's model and Chroma client."""

    def __init__(self, embedder: Embedder, client: Any, collection: str) -> None:
        self.embedder = embedder  # the model itself: a cached vector would measure nothing
        self.client = client
        self.name = collection
        self.collection = client.get_or_create_collection(
            name=collection, configuration={"hnsw": HNSW_WRITES}, embedding_function=None
        )
        vectors = np.random.default_rng(7).standard_normal((_PROBE_RECORDS, embedder.dim))
        self.collection.upsert(
            ids=[f"r{i}" for i in range(_PROBE_RECORDS)],
            embeddings=vectors.astype(np.float32),
            metadatas=[{"n": i} for i in range(_PROBE_RECORDS)],
            documents=[f"record {i}" for i in range(_PROBE_RECORDS)],
        )

    def once(self) -> float:
        """One probe's wall time, in milliseconds."""
        started = time.perf_counter()
        vector = self.embedder.embed([PROBE_TEXT])[0]
        self.collection.upsert(
            ids=[_PROBE_ID], embeddings=[vector], metadatas=[{"n": -1}], documents=[PROBE_TEXT]
        )
        self.collection.get(ids=[_PROBE_ID], include=["metadatas"])
        return (time.perf_counter() - started) * 1000.0

    def sample(self, count: int = PROBES_PER_SIDE) -> list[float]:
        return [self.once() for _ in range(count)]

    def close(self) -> None:
        self.client.delete_collection(self.name)


def probe_key(*, embedder: str, torch_threads: int | None, chroma: str) -> dict[str, Any]:
    """What the probe's speed depends on besides the machine: a reference recorded under
    another key says nothing about this run."""
    libraries = ["chromadb", "numpy"]
    if embedder == "minilm":
        libraries += ["torch", "sentence-transformers", "transformers"]
    return {
        "embedder": embedder,
        "torch_threads": torch_threads if embedder == "minilm" else None,
        "chroma": chroma,
        "versions": {name: metadata.version(name) for name in libraries},
    }


@dataclass(frozen=True, slots=True)
class Reference:
    """The probe's median on the reference machine, under `key`."""

    key: dict[str, Any]
    probe_p50_ms: float
    recorded_at: str
    runs: list[str]


def load_reference(path: Path = REFERENCE_PATH) -> Reference | None:
    """The recorded reference, or None when there is none (judged as measured)."""
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        found = Reference(
            key=raw["key"],
            probe_p50_ms=float(raw["probe_p50_ms"]),
            recorded_at=str(raw["recorded_at"]),
            runs=list(raw["runs"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a machine reference ({exc})") from None
    if not found.probe_p50_ms > 0:
        raise ValueError(f"{path}: probe_p50_ms must be positive, got {found.probe_p50_ms}")
    return found


def slowdown(
    probe_ms: Sequence[float], reference: Reference | None, key: dict[str, Any] | None
) -> tuple[float, str]:
    """(factor, why): how much slower than the reference the probes beside an operation
    ran, never below 1; 1 with the reason when there is nothing to compare."""
    if not probe_ms:
        return 1.0, "no probes"
    median = statistics.median(probe_ms)
    if reference is None:
        return 1.0, f"probe p50 {median:.2f} ms; no machine reference: judged as measured"
    if key != reference.key:
        return 1.0, (
            f"probe p50 {median:.2f} ms; the machine reference was recorded under another "
            "key (libraries, embedder, threads or Chroma): judged as measured"
        )
    factor = max(1.0, median / reference.probe_p50_ms)
    return factor, f"probe p50 {median:.2f} ms vs {reference.probe_p50_ms:.2f} ms at reference"


def record(runs: Sequence[Path], path: Path = REFERENCE_PATH) -> Reference:
    """The reference from bench runs on the idle machine: the median of every probe they
    took, under their common key (runs under different keys are refused)."""
    if not runs:
        raise ValueError("give at least one bench.json")
    keys, probes = [], []
    for run in runs:
        document = json.loads(run.read_text(encoding="utf-8"))
        key = document.get("machine_key")
        taken = [p for op in document["ops"] for p in op.get("probe_ms") or []]
        if key is None or not taken:
            raise ValueError(f"{run}: no machine probes (a bench run of this version?)")
        keys.append(key)
        probes += taken
    if any(key != keys[0] for key in keys):
        raise ValueError("the runs were taken under different keys; record from one setup")
    reference = Reference(
        key=keys[0],
        probe_p50_ms=round(statistics.median(probes), 3),
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        runs=[str(run) for run in runs],
    )
    path.write_text(
        json.dumps(
            {
                "probe_p50_ms": reference.probe_p50_ms,
                "probes": len(probes),
                "key": reference.key,
                "recorded_at": reference.recorded_at,
                "runs": reference.runs,
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    return reference


def main() -> None:
    parser = argparse.ArgumentParser(description="Record the machine reference of the SLA gate.")
    parser.add_argument(
        "--record",
        nargs="+",
        type=Path,
        required=True,
        metavar="BENCH_JSON",
        help="bench.json files of clean runs on the idle machine",
    )
    args = parser.parse_args()
    reference = record(args.record)
    print(f"{REFERENCE_PATH}: probe p50 {reference.probe_p50_ms} ms from {len(args.record)} runs")


if __name__ == "__main__":
    main()
