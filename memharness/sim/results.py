"""Result files of a run: `reports/<run-id>/results.json` and one file per strategy.

A strategy's file is named by what made it (scenario name and hash, seed, strategy label
and its configuration's fingerprint), so a result can be traced to its inputs. Every
write goes to a temporary file that is renamed into place: an interrupted or failed run
leaves each file either whole or absent, and earlier runs' directories are never
touched (a run id is new or the run refuses to start).
"""

from __future__ import annotations

import json
import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from memharness.scenarios.stats import StatsTally
from memharness.sim.plan import ScenarioInput
from memharness.sim.runner import StrategyOutcome

_VERSIONED = ("memharness", "ray", "chromadb", "numpy", "psycopg", "redis", "pgvector", "torch")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def result_file_name(scenario: ScenarioInput, outcome: StrategyOutcome) -> str:
    seed = "none" if scenario.seed is None else str(scenario.seed)
    label = re.sub(r"[^A-Za-z0-9_.=-]+", "_", outcome.spec.label).strip("_")
    fingerprint = outcome.spec.strategy.fingerprint()
    return f"{_slug(scenario.name)}-{scenario.hash}-s{seed}-{label}-{fingerprint}.json"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "scenario"


def write_json(path: Path, document: Any) -> None:
    """Write `document` to `path` atomically (temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    os.replace(tmp, path)


class ResultWriter:
    """Collects a run's outcomes and keeps `results.json` current after each one."""

    def __init__(self, run_dir: Path, header: dict[str, Any]) -> None:
        if run_dir.exists():
            raise FileExistsError(f"{run_dir} exists: a run never overwrites another's results")
        run_dir.mkdir(parents=True)
        self.run_dir = run_dir
        self.document: dict[str, Any] = {
            **header,
            "versions": versions(),
            "status": "running",
            "scenarios": [],
        }
        self.flush()

    def start_scenario(self, scenario: ScenarioInput) -> None:
        tally = StatsTally()
        for user in scenario.users:
            tally.add(user)
        stats = tally.result(adversarial=0)
        self.document["scenarios"].append(
            {
                "name": scenario.name,
                "hash": scenario.hash,
                "seed": scenario.seed,
                "source": scenario.source,
                "users": stats.users,
                "turns": stats.turns + stats.forgets,  # both are turns of the memory
                "probes": stats.probes,
                "strategies": [],
            }
        )
        self.flush()

    def add(self, scenario: ScenarioInput, outcome: StrategyOutcome) -> dict[str, Any]:
        """Write the strategy's own file and add it to results.json; returns the entry."""
        spec = outcome.spec
        figures = outcome.figures or {}
        entry = {
            "label": spec.label,
            "name": spec.name,
            "params": dict(spec.params),
            "fingerprint": spec.strategy.fingerprint(),
            "config": spec.strategy.model_dump(mode="json"),
            "file": result_file_name(scenario, outcome),
            "status": outcome.status,
            "error": outcome.error,
            "metrics": figures.get("metrics"),
            "leaks": figures.get("leaks", []),
            "footprint": figures.get("footprint"),
            "latency_ms": figures.get("latency_ms"),
        }
        current = self.document["scenarios"][-1]
        own = {
            "run_id": self.document["run_id"],
            "scenario": {k: v for k, v in current.items() if k != "strategies"},
            "backend": self.document["backend"],
            "embedder": self.document["embedder"],
            "k": self.document["k"],
            **entry,
        }
        write_json(self.run_dir / entry["file"], own)
        current["strategies"].append(entry)
        self.flush()
        return entry

    def finish(self, status: str) -> None:
        self.document["status"] = status
        self.flush()

    def flush(self) -> None:
        write_json(self.run_dir / "results.json", self.document)
