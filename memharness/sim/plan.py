"""What a run replays: the strategies (with parameter overrides), the sweep and sample
times, and how users are sharded.

The sweep ticks are a function of the whole scenario, never of a shard: for every step of
every user, the strategy's grid point at or before it (so a sweep ran within one
interval before each step, as a sweeper every `sweep_interval_s` would), plus a coarser
idle grid across the scenario's span (so archival and PII deadlines fall due in gaps).
Every shard runs the same ticks, which is why 1 and N workers give the same results.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from memharness.scenarios.model import ProbeStep, User
from reference.policy.loading import load_strategy
from reference.policy.strategy import Strategy

#: Sweeps in idle stretches, and footprint samples, on these grids (virtual seconds).
#: Six hours: an embedded sweep costs ~5 ms, and a scenario can span months; PII
#: residency and archival are known to within this.
IDLE_SWEEP_S = 21600.0
SAMPLE_EVERY_S = 86400.0
#: Users a worker replays at once (memharness/sim/simulator.py: cohorts).
COHORT_USERS = 5_000

_SPEC_RE = re.compile(r"^(?P<name>[^:\[\]]+?)(?::(?P<params>.*))?$")


_FAULT_RE = re.compile(r"^(?P<target>[a-z]+):(?P<action>[a-z]+)@(?P<share>\d+(?:\.\d+)?)%$")
#: What `--fault` can do to what: worker 0's process, or a server of worker 0's.
FAULT_ACTIONS = {
    "worker": ("kill",),
    "pg": ("kill", "stop", "restart"),
    "redis": ("kill", "stop", "restart"),
}
_FAULT_USAGE = (
    "expected TARGET:ACTION@P% with 0 < P < 100: worker:kill, or pg|redis:kill|stop|restart "
    "(e.g. worker:kill@30%, pg:kill@30%)"
)


@dataclass(frozen=True)
class Fault:
    """`--fault TARGET:ACTION@P%`: at `share` (0-1) of worker 0's first replay, kill its
    process (`worker`), or kill, stop (SIGSTOP, then SIGCONT once every client timeout
    has run out) or restart its embedded PostgreSQL (`pg`) or Redis (`redis`)."""

    target: str
    action: str
    share: float

    def __str__(self) -> str:
        return f"{self.target}:{self.action}@{self.share * 100:g}%"


def parse_fault(text: str) -> Fault:
    """The `Fault` of a `--fault` argument; a `SpecError` naming the option otherwise."""
    match = _FAULT_RE.match(text.strip())
    if match is None or not 0 < float(match["share"]) < 100:
        raise SpecError(f"--fault {text!r}: {_FAULT_USAGE}")
    target, action = match["target"], match["action"]
    if target == "chroma":
        raise SpecError(
            f"--fault {text!r}: a run's workers use Chroma embedded in their own process, "
            "which cannot die apart from it: use worker:kill (tests/test_server_faults.py "
            "faults a Chroma server)"
        )
    if action not in FAULT_ACTIONS.get(target, ()):
        raise SpecError(f"--fault {text!r}: {_FAULT_USAGE}")
    return Fault(target=target, action=action, share=float(match["share"]) / 100.0)


class SpecError(ValueError):
    """A `--strategy` or `--grid` argument that does not name a strategy, sets a bad
    parameter, or repeats a strategy."""


@dataclass(frozen=True)
class StrategySpec:
    """A strategy with parameter overrides; `label` names it in tables and file names."""

    name: str
    params: tuple[tuple[str, Any], ...]
    strategy: Strategy
    #: The memory system it runs on (`memharness.systems.SYSTEMS`); the label names any
    #: other than the reference: `langgraph-memory/keep_all`.
    system: str = "reference"

    @property
    def label(self) -> str:
        head = "" if self.system == "reference" else f"{self.system}/"
        if not self.params:
            return head + self.name
        inner = ",".join(f"{key}={_show(value)}" for key, value in self.params)
        return f"{head}{self.name}[{inner}]"

    def on(self, system: str) -> StrategySpec:
        """The same strategy on another system."""
        return dataclasses.replace(self, system=system)

    @classmethod
    def parse(cls, text: str) -> StrategySpec:
        """`NAME`, `PATH.yaml` or either followed by `:dotted.key=value,...`; values are
        YAML scalars (`ttl.default_s=86400`, `decay=null`)."""
        match = _SPEC_RE.match(text.strip())
        if match is None or not match["name"].strip():
            raise SpecError(f"--strategy {text!r}: expected NAME or NAME:key=value,...")
        base = _load_base(match["name"].strip(), f"--strategy {text!r}")
        params: list[tuple[str, Any]] = []
        for part in filter(None, (p.strip() for p in (match["params"] or "").split(","))):
            key, sep, raw = part.partition("=")
            if not sep or not key.strip():
                raise SpecError(f"--strategy {text!r}: {part!r} is not key=value")
            try:
                params.append((key.strip(), yaml.safe_load(raw)))
            except yaml.YAMLError:
                raise SpecError(f"--strategy {text!r}: {raw!r} is not a YAML value") from None
        try:
            strategy = base.with_params(dict(params)) if params else base
        except Exception as exc:  # a validation error names the field
            raise SpecError(f"--strategy {text!r}: {exc}") from None
        return cls(name=base.name, params=tuple(params), strategy=strategy)


def _load_base(name: str, where: str) -> Strategy:
    try:
        return load_strategy(name)
    except Exception as exc:  # StrategyError: names the file, line and field
        raise SpecError(f"{where}: {exc}") from None


def parse_grid(text: str) -> list[StrategySpec]:
    """The points of a parameter sweep, one `StrategySpec` each, in product order.

    `NAME:key=v1,v2,...`, with more keys after `;`: `NAME:a.b=1,2;c.d=x,y` gives the four
    points (1,x), (1,y), (2,x), (2,y), the first key varying slowest. NAME is a built-in
    or a strategy file, as for `--strategy`; keys are dotted parameter paths; values are
    YAML scalars (`3600`, `0.5`, `null`, `delete`), so a value holds no `,` or `;`. A
    point's label is the `--strategy` label of the same overrides
    (`fixed_ttl[ttl.default_s=3600]`). Errors name the argument and the key or point.
    """
    where = f"--grid {text!r}"
    name, sep, body = text.strip().partition(":")
    if not sep or not name.strip() or "[" in name or "]" in name or not body.strip():
        raise SpecError(f"{where}: expected NAME:key=v1,v2,... (more keys after ';')")
    base = _load_base(name.strip(), where)
    axes: list[list[tuple[str, Any]]] = []
    seen: set[str] = set()
    for part in (p.strip() for p in body.split(";")):
        if not part:
            continue  # a trailing ';'
        key, eq, raw = (x.strip() for x in part.partition("="))
        if not eq or not key:
            raise SpecError(f"{where}: {part!r} is not key=v1,v2,...")
        if key in seen:
            raise SpecError(f"{where}: key {key!r} given twice")
        seen.add(key)
        values = [v.strip() for v in raw.split(",")]
        if not all(values):
            raise SpecError(f"{where}: {key}: empty value in {raw!r}")
        axis: list[tuple[str, Any]] = []
        for value in values:
            try:
                axis.append((key, yaml.safe_load(value)))
            except yaml.YAMLError:
                raise SpecError(f"{where}: {key}: {value!r} is not a YAML value") from None
        axes.append(axis)
    if not axes:
        raise SpecError(f"{where}: no key=v1,v2,... after {name.strip()!r}")
    specs: list[StrategySpec] = []
    for point in itertools.product(*axes):
        params = tuple(point)
        spec_where = f"{where}: point {','.join(f'{k}={_show(v)}' for k, v in params)}"
        try:
            strategy = base.with_params(dict(params))
        except Exception as exc:  # a validation error names the field
            raise SpecError(f"{spec_where}: {exc}") from None
        specs.append(StrategySpec(name=base.name, params=params, strategy=strategy))
    return specs


def plan_specs(
    strategies: Sequence[str], grids: Sequence[str], default: Sequence[str] = ()
) -> list[StrategySpec]:
    """The specs a run replays: each `--strategy`, then each `--grid`'s points; `default`
    (names) when neither is given. A label twice is an error naming both arguments."""
    parsed: list[tuple[str, StrategySpec]] = [
        (f"--strategy {s!r}", StrategySpec.parse(s))
        for s in (strategies if strategies or grids else default)
    ]
    parsed += [(f"--grid {g!r}", spec) for g in grids for spec in parse_grid(g)]
    origin: dict[str, str] = {}
    for where, spec in parsed:
        if spec.label in origin:
            again = "" if origin[spec.label] == where else f" (also from {origin[spec.label]})"
            raise SpecError(f"{where}: {spec.label} is given twice{again}")
        origin[spec.label] = where
    return [spec for _, spec in parsed]


@dataclass(frozen=True)
class ScenarioInput:
    """A scenario to replay: its users (in order), where it came from, and its hash."""

    name: str
    hash: str
    source: str
    seed: int | None
    users: list[User]


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "null" if value is None else str(value)


def grid_floor(at: float, every: float) -> float:
    return math.floor(at / every) * every


def sweep_ticks(
    step_times: Iterable[float], interval_s: float, idle_s: float = IDLE_SWEEP_S
) -> list[float]:
    """The sweep times of a scenario under a strategy's interval (see module docstring)."""
    times = sorted(set(step_times))
    if not times:
        return []
    ticks = {grid_floor(t, interval_s) for t in times}
    first, last = grid_floor(times[0], idle_s), times[-1]
    n = int((last - first) // idle_s)
    ticks.update(first + i * idle_s for i in range(1, n + 1))
    return sorted(ticks)


def sample_times(step_times: Iterable[float], every_s: float = SAMPLE_EVERY_S) -> list[float]:
    """Footprint sample times: a grid over the span, and the last step's time."""
    times = sorted(set(step_times))
    if not times:
        return []
    first, last = grid_floor(times[0], every_s), times[-1]
    n = int((last - first) // every_s)
    grid = {first + i * every_s for i in range(1, n + 1)}
    grid.add(last)
    return sorted(grid)


def probe_times(users: Iterable[User]) -> list[float]:
    """The moments of a scenario's probes: footprint samples taken for the peak only
    (`metrics.footprint`), before the probe reads, so that a memory that fills and
    empties between two daily samples is seen as it was when it was asked."""
    return sorted({s.at for u in users for s in u.timeline if isinstance(s, ProbeStep)})


def shard_of(index: int, workers: int) -> int:
    """The worker a user (by its index in the scenario) goes to: round robin."""
    return index % workers


def scenario_hash(name: str, users: Iterable[User]) -> str:
    """A short hash of the scenario's content (its users, in order), whatever the file."""
    digest = hashlib.sha256(name.encode())
    for user in users:
        digest.update(user.model_dump_json().encode())
    return digest.hexdigest()[:12]
