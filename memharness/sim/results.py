"""Result files of a run: `reports/<run-id>/results.json` and one file per strategy.

A strategy's file is named by what made it (scenario name and hash, seed, strategy label
and its configuration's fingerprint), so a result can be traced to its inputs. Every
write goes to a temporary file that is renamed into place: an interrupted or failed run
leaves each file either whole or absent, and earlier runs' directories are never
touched (a run id is new or the run refuses to start) unless a run is resumed.

A strategy's own file also holds its per-probe records (`probes`: the probes that were
not clean, `memharness/sim/probes.py`), which `memharness explain` prints; results.json
holds each scenario's retrieval `ceiling` (`memharness/sim/ceiling.py`), the same under
every strategy, taken from the first strategy that completes.

A resumed run (`ResultWriter.resume`) reopens its directory: it refuses when the settings
that shape the figures differ (`RESUME_FIELDS`), keeps every earlier entry, takes each
result whose file is complete as done (loaded from that file, not replayed), and replaces
an entry (by label, within its scenario) only when a new outcome for it is in.
"""

from __future__ import annotations

import json
import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from memharness.report import ResultsError, load_results
from memharness.scenarios.stats import StatsTally
from memharness.sim.plan import ScenarioInput, StrategySpec
from memharness.sim.runner import StrategyOutcome
from reference.policy.alerts import raised

_VERSIONED = ("memharness", "ray", "chromadb", "numpy", "psycopg", "redis", "pgvector", "torch")
#: Header settings a resumed run must share with the run it continues: each changes figures.
RESUME_FIELDS = ("backend", "embedder", "k", "seed", "idle_sweep_s", "sample_every_s")
#: Those a `memharness run` option sets (the others are constants of the version).
_OPTIONS = ("backend", "embedder", "k", "seed", "idle_sweep_s")
#: What a strategy's own file holds besides its entry in results.json: the per-probe
#: records (`memharness/sim/probes.py`) stay there, so results.json stays small.
_OWN_ONLY = ("run_id", "scenario", "backend", "embedder", "k", "probes")


class ResumeError(ValueError):
    """A run directory that cannot be resumed with these settings."""


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def result_file_name(scenario: ScenarioInput, outcome: StrategyOutcome) -> str:
    return spec_file_name(scenario, outcome.spec)


def spec_file_name(scenario: ScenarioInput, spec: StrategySpec) -> str:
    """`<scenario>-<hash>-s<seed>-<label>-<fingerprint>.json`: what made the result."""
    seed = "none" if scenario.seed is None else str(scenario.seed)
    label = re.sub(r"[^A-Za-z0-9_.=-]+", "_", spec.label).strip("_")
    fingerprint = spec.strategy.fingerprint()
    return f"{_slug(scenario.name)}-{scenario.hash}-s{seed}-{label}-{fingerprint}.json"


def _identity(scenario: dict[str, Any]) -> tuple[Any, Any, Any]:
    return scenario.get("name"), scenario.get("hash"), scenario.get("seed")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "scenario"


def write_json(path: Path, document: Any, *, one_per_line: str | None = None) -> None:
    """Write `document` to `path` atomically (temporary file, then rename), indented; the
    list under the key `one_per_line` (last) gets one item per line: a strategy's probe
    records take 40% less room so, and each is one line to grep."""
    items = document.get(one_per_line) if one_per_line else None
    if not isinstance(items, list):
        text = _dumps(document, indent=2)
    else:
        rest = _dumps({k: v for k, v in document.items() if k != one_per_line}, indent=2)
        lines = ",\n".join(f"    {_dumps(item)}" for item in items)
        body = f"[\n{lines}\n  ]" if items else "[]"
        head = "{" if rest == "{}" else f"{rest[:-2]},"  # an indented dump ends in "\n}"
        text = f"{head}\n  {_dumps(one_per_line)}: {body}\n}}"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)


def _dumps(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False)


class ResultWriter:
    """Collects a run's outcomes and keeps `results.json` current after each one."""

    def __init__(self, run_dir: Path, header: dict[str, Any]) -> None:
        if run_dir.exists():
            raise FileExistsError(
                f"{run_dir} exists: a run never overwrites another's results "
                f"(--resume {run_dir} continues that run)"
            )
        run_dir.mkdir(parents=True)
        self.run_dir = run_dir
        self.document: dict[str, Any] = {
            **header,
            "versions": versions(),
            "status": "running",
            "scenarios": [],
        }
        self.current: dict[str, Any] | None = None
        self._claimed: set[int] = set()
        self.flush()

    @classmethod
    def resume(cls, run_dir: Path, header: dict[str, Any]) -> ResultWriter:
        """Reopen `run_dir` to continue its run; `header` holds this command's settings.

        Raises `ResumeError` when the directory holds no readable results.json or when a
        field of `RESUME_FIELDS` differs (naming it). Nothing is written before the checks
        pass; afterwards the earlier entries stay until a new outcome replaces one.
        """
        try:
            document = load_results(run_dir)
        except ResultsError as exc:
            raise ResumeError(f"cannot resume: {exc}") from None
        for field in RESUME_FIELDS:
            if field not in document:
                raise ResumeError(f"cannot resume {run_dir}: its results.json has no {field!r}")
            if document[field] != header[field]:
                option = f"--{field.replace('_', '-')}"
                hint = (
                    f"pass {option} {document[field]} to continue it"
                    if field in _OPTIONS
                    else "it was made by a version with another setting"
                )
                raise ResumeError(
                    f"cannot resume {run_dir}: {field} differs (the run has "
                    f"{document[field]!r}, this command {header[field]!r}); {hint}"
                )
        writer = cls.__new__(cls)
        writer.run_dir = run_dir
        writer.current = None
        writer._claimed = set()
        resumed = {
            "at": header.get("created_at"),
            "workers": header.get("workers"),
            "versions": versions(),
            "status_before": document.get("status"),
        }
        resumes = [*document.get("resumes", []), resumed]
        writer.document = {**document, "status": "running", "resumes": resumes}
        if "objective" in header:  # the recommendation follows this command's objective
            writer.document["objective"] = header["objective"]
        writer.flush()
        return writer

    def start_scenario(self, scenario: ScenarioInput) -> dict[str, Any]:
        """Open the scenario's section (the earlier one of a resumed run, else a new one)
        and return it; `add` and `reuse` go to it."""
        tally = StatsTally()
        for user in scenario.users:
            tally.add(user)
        stats = tally.result(adversarial=0)
        facts = {
            "name": scenario.name,
            "hash": scenario.hash,
            "seed": scenario.seed,
            "source": scenario.source,
            "users": stats.users,
            "turns": stats.turns,
            "probes": stats.probes,
        }
        scenarios: list[dict[str, Any]] = self.document["scenarios"]
        same = (scenario.name, scenario.hash, scenario.seed)
        for i, earlier in enumerate(scenarios):
            if i not in self._claimed and _identity(earlier) == same:
                earlier.update(facts)
                earlier.setdefault("strategies", [])
                break
        else:
            scenarios.append({**facts, "strategies": []})
            i = len(scenarios) - 1
        self._claimed.add(i)
        self.current = scenarios[i]
        self.flush()
        return self.current

    def reuse(self, scenario: ScenarioInput, spec: StrategySpec) -> dict[str, Any] | None:
        """The entry of `spec` when its file in this run is complete (status ok, figures,
        made by the same scenario, strategy configuration, backend, embedder and k): put
        into results.json as the file has it, and returned. None when it must run."""
        entry = self.complete_entry(scenario, spec)
        if entry is not None:
            self._put(entry)
            self.flush()
        return entry

    def complete_entry(self, scenario: ScenarioInput, spec: StrategySpec) -> dict[str, Any] | None:
        """The entry in `spec`'s file when that file is complete (see `reuse`), else None;
        changes nothing."""
        path = self.run_dir / spec_file_name(scenario, spec)
        try:
            own = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(own, dict) or not self._complete(own, scenario, spec):
            return None
        return {k: v for k, v in own.items() if k not in _OWN_ONLY}

    def _complete(self, own: dict[str, Any], scenario: ScenarioInput, spec: StrategySpec) -> bool:
        made_by = own.get("scenario") or {}
        return (
            own.get("status") == "ok"
            and own.get("metrics") is not None
            and own.get("label") == spec.label
            and own.get("fingerprint") == spec.strategy.fingerprint()
            and made_by.get("hash") == scenario.hash
            and made_by.get("name") == scenario.name
            and all(own.get(k) == self.document.get(k) for k in ("backend", "embedder", "k"))
        )

    def add(self, scenario: ScenarioInput, outcome: StrategyOutcome) -> dict[str, Any]:
        """Write the strategy's own file and add it to results.json; returns the entry."""
        spec = outcome.spec
        figures = outcome.figures or {}
        entry = {
            "label": spec.label,
            "name": spec.name,
            "system": spec.system,
            "capabilities": figures.get("capabilities"),
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
            "monitoring": figures.get("monitoring"),
            "alerts": raised(spec.strategy.alerts, figures.get("monitoring")),
        }
        current = self._section()
        ceiling = figures.get("ceiling")
        if ceiling is not None and "ceiling" not in current:
            current["ceiling"] = ceiling
        own = {
            "run_id": self.document["run_id"],
            "scenario": {k: v for k, v in current.items() if k != "strategies"},
            "backend": self.document["backend"],
            "embedder": self.document["embedder"],
            "k": self.document["k"],
            **entry,
            "probes": figures.get("probes", []),
        }
        write_json(self.run_dir / entry["file"], own, one_per_line="probes")
        self._put(entry)
        self.flush()
        return entry

    def _section(self) -> dict[str, Any]:
        if self.current is None:
            raise RuntimeError("start_scenario first")
        return self.current

    def _put(self, entry: dict[str, Any]) -> None:
        """Replace the entry of the same label in the current scenario, or append."""
        strategies: list[dict[str, Any]] = self._section()["strategies"]
        for i, earlier in enumerate(strategies):
            if earlier.get("label") == entry["label"]:
                strategies[i] = entry
                return
        strategies.append(entry)

    def finish(self, status: str) -> None:
        self.document["status"] = status
        self.flush()

    def flush(self) -> None:
        write_json(self.run_dir / "results.json", self.document)
