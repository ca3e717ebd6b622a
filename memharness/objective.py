"""The objective a run's recommendation follows: constraints, then aims.

An objective is a YAML file (`default_objective.yaml` is the default, from the
requirements: freshness, privacy deadlines, erasure)::

    constraints:            # a strategy that misses any one is not recommended
      - stale <= 5%
      - leakage = 0
    aims:                   # in order: the first decides, the next breaks a tie on it
      - highest recall
      - fewest bytes

A constraint is `METRIC OP VALUE` (OP one of `<=`, `>=`, `=`, `<`, `>`), VALUE in the
metric's unit: a share with `%`, a time with `s`, `min`, `h` or `d`, bytes with `B`,
`KiB`, `MiB` or `GiB`, a count as a whole number. An aim is `highest METRIC` (or
`most`) or `lowest METRIC` (or `fewest`, `least`). The metrics are each strategy's
figures across the run's scenarios (`run_verdict.py`): `METRICS` lists them.

`decide` applies it: the strategies that meet every constraint, ranked by the aims (two
values within an aim's tolerance are equal: 0.1 point of a share, 1% of bytes); the pick
is the first, a tie when others are equal to it on every aim; the runner-up is the next;
a strategy that missed a constraint but would rank above the pick is named with the
limit that would admit it (what it would take to change the pick).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from memharness.tables import format_value

if TYPE_CHECKING:
    from memharness.strategy_verdict import StrategyVerdict

__all__ = [
    "METRICS",
    "Aim",
    "Constraint",
    "Decision",
    "Objective",
    "ObjectiveError",
    "decide",
    "default_objective",
    "load_objective",
    "parse_objective",
]

Kind = Literal["share", "count", "seconds", "bytes"]


@dataclass(frozen=True)
class Metric:
    """A figure of `StrategyVerdict` an objective can name."""

    attribute: str
    kind: Kind
    label: str  # how the decision's lines name it


#: The metrics an objective can name -> the `StrategyVerdict` figure.
METRICS: dict[str, Metric] = {
    "recall": Metric("recall", "share", "mean recall"),
    "stale": Metric("stale", "share", "mean stale"),
    "leakage": Metric("leakage", "count", "leakage"),
    "pii_raw_at_end": Metric("pii_raw_at_end", "count", "PII values in plaintext at the end"),
    "pii_plaintext": Metric("pii_plaintext_s", "seconds", "longest PII time in plaintext"),
    "bytes": Metric("peak_bytes", "bytes", "peak bytes"),
}
_UNIT_OF_KIND = {"share": "%", "count": "count", "seconds": "s", "bytes": "bytes"}
_SCALE = {
    "share": {"%": 0.01},
    "seconds": {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0},
    "bytes": {"b": 1.0, "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3},
    "count": {"": 1.0},
}
_HIGHER = {"highest", "most"}
_LOWER = {"lowest", "fewest", "least"}
_OPS = ("<=", ">=", "=", "<", ">")
_CONSTRAINT = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|=|<|>)\s*([0-9.]+)\s*([a-zA-Z%]*)\s*$")


class ObjectiveError(ValueError):
    """An objective that cannot be read: the message names the file, the entry and why."""


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    limit: float  # in the metric's base unit: a share 0..1, seconds, bytes, a count
    text: str  # as written

    def met_by(self, value: float | None) -> bool:
        """Whether `value` meets it; an unknown value (None) never does."""
        if value is None:
            return False
        return {
            "<=": value <= self.limit + 1e-12,
            ">=": value >= self.limit - 1e-12,
            "=": abs(value - self.limit) <= 1e-12,
            "<": value < self.limit,
            ">": value > self.limit,
        }[self.op]


@dataclass(frozen=True)
class Aim:
    metric: str
    higher: bool
    text: str

    def tolerance(self, a: float, b: float) -> float:
        """Two values closer than this are equal: 0.1 point of a share, 1% of bytes."""
        kind = METRICS[self.metric].kind
        if kind == "share":
            return 0.001
        if kind == "bytes":
            return 0.01 * max(abs(a), abs(b))
        return 0.0


@dataclass(frozen=True)
class Objective:
    constraints: tuple[Constraint, ...]
    aims: tuple[Aim, ...]
    source: str  # the file it came from, or "default"

    def as_dict(self) -> dict[str, Any]:
        """As `results.json` records it (`parse_objective` reads it back)."""
        return {
            "source": self.source,
            "constraints": [c.text for c in self.constraints],
            "aims": [a.text for a in self.aims],
        }

    def text(self) -> str:
        """One line: `stale <= 5%, leakage = 0; then highest recall; then fewest bytes`."""
        parts = [", ".join(c.text for c in self.constraints)] if self.constraints else []
        parts += [f"then {a.text}" if parts or i else a.text for i, a in enumerate(self.aims)]
        return "; ".join(parts)


def _parse_constraint(text: str, where: str) -> Constraint:
    match = _CONSTRAINT.match(text)
    if not match:
        raise ObjectiveError(
            f"{where}: {text!r} is not METRIC OP VALUE (OP one of {', '.join(_OPS)}), "
            "e.g. 'stale <= 5%'"
        )
    name, op, number, unit = match.groups()
    metric = METRICS.get(name)
    if metric is None:
        raise ObjectiveError(f"{where}: unknown metric {name!r} (known: {', '.join(METRICS)})")
    scales = _SCALE[metric.kind]
    scale = scales.get(unit.lower())
    if scale is None:
        units = ", ".join(repr(u) for u in scales if u) or "none (a whole number)"
        raise ObjectiveError(f"{where}: {text!r}: {name} takes the unit {units}")
    return Constraint(name, op, float(number) * scale, " ".join([name, op, number + unit]))


def _parse_aim(text: str, where: str) -> Aim:
    words = str(text).split()
    if len(words) != 2 or words[0] not in _HIGHER | _LOWER or words[1] not in METRICS:
        raise ObjectiveError(
            f"{where}: {text!r} is not 'highest METRIC' or 'lowest METRIC' (also most, "
            f"fewest, least; metrics: {', '.join(METRICS)})"
        )
    return Aim(words[1], words[0] in _HIGHER, " ".join(words))


def parse_objective(data: Any, source: str) -> Objective:
    """An objective from its YAML mapping; `ObjectiveError` naming `source` and the entry."""
    if not isinstance(data, dict):
        raise ObjectiveError(f"{source}: an objective is a mapping with constraints and aims")
    unknown = sorted(set(data) - {"constraints", "aims", "source"})
    if unknown:
        raise ObjectiveError(f"{source}: unknown key {unknown[0]!r} (keys: constraints, aims)")
    for key in ("constraints", "aims"):
        if not isinstance(data.get(key) or [], list):
            raise ObjectiveError(f"{source}: {key} is a list")
    constraints = tuple(
        _parse_constraint(str(text), f"{source}: constraints[{i}]")
        for i, text in enumerate(data.get("constraints") or [])
    )
    aims = tuple(
        _parse_aim(str(text), f"{source}: aims[{i}]")
        for i, text in enumerate(data.get("aims") or [])
    )
    if not aims:
        raise ObjectiveError(f"{source}: aims: at least one, e.g. 'highest recall'")
    return Objective(constraints, aims, source)


def load_objective(path: Path) -> Objective:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ObjectiveError(f"{path}: {exc}") from None
    return parse_objective(data, str(path))


def default_objective() -> Objective:
    text = resources.files("memharness").joinpath("default_objective.yaml").read_text("utf-8")
    return parse_objective(yaml.safe_load(text), "default")


def with_constraints(objective: Objective, texts: Sequence[str]) -> Objective:
    """`objective` with each of `texts` (`--require`) in place of the constraints on its
    metric, or added."""
    extra = [_parse_constraint(t, "--require") for t in texts]
    named = {c.metric for c in extra}
    if not extra:
        return objective
    kept = tuple(c for c in objective.constraints if c.metric not in named)
    return Objective(kept + tuple(extra), objective.aims, f"{objective.source} with --require")


def value_of(verdict: StrategyVerdict, metric: str) -> float | None:
    value = getattr(verdict, METRICS[metric].attribute)
    return None if value is None else float(value)


def show(metric: str, value: float | None) -> str:
    """`value` of `metric` as the tables show it; an unbounded time reads `to the end`."""
    if value is not None and math.isinf(value):
        return "to the end"
    return format_value(value, _UNIT_OF_KIND[METRICS[metric].kind])  # type: ignore[arg-type]


@dataclass
class Decision:
    objective: Objective
    ranked: list[StrategyVerdict]  # meeting every constraint, best first
    failed: dict[str, list[Constraint]]  # label -> the constraints it missed
    tied: list[StrategyVerdict] = field(default_factory=list)  # the pick and its equals

    @property
    def pick(self) -> StrategyVerdict | None:
        return self.ranked[0] if self.ranked else None

    @property
    def runner_up(self) -> StrategyVerdict | None:
        rest = self.ranked[len(self.tied) :]
        return rest[0] if rest else None


def _compare(objective: Objective, a: StrategyVerdict, b: StrategyVerdict) -> int:
    """-1 when `a` ranks before `b` by the aims, 1 after, 0 equal on every aim."""
    for aim in objective.aims:
        va, vb = value_of(a, aim.metric), value_of(b, aim.metric)
        if va is None or vb is None:
            if va is None and vb is None:
                continue
            return 1 if va is None else -1
        if abs(va - vb) <= aim.tolerance(va, vb):
            continue
        better = va > vb if aim.higher else va < vb
        return -1 if better else 1
    return 0


def decide(objective: Objective, verdicts: Sequence[StrategyVerdict]) -> Decision:
    """The complete, deployable strategies (an oracle is not) under `objective`."""
    ranked: list[StrategyVerdict] = []
    failed: dict[str, list[Constraint]] = {}
    for v in verdicts:
        if v.upper_bound or not v.complete:
            continue
        missed = [c for c in objective.constraints if not c.met_by(value_of(v, c.metric))]
        if missed:
            failed[v.label] = missed
        else:
            ranked.append(v)
    compare = functools.partial(_compare, objective)
    ranked.sort(key=functools.cmp_to_key(compare))  # stable: equals keep the run's order
    tied = [v for v in ranked if ranked and compare(v, ranked[0]) == 0]
    return Decision(objective, ranked, failed, tied if len(tied) > 1 else ranked[:1])


def _deciding(objective: Objective, a: StrategyVerdict, b: StrategyVerdict) -> str:
    """How `a` beats `b`: the first aim they differ on, and by how much."""
    for aim in objective.aims:
        va, vb = value_of(a, aim.metric), value_of(b, aim.metric)
        if va is None or vb is None or abs(va - vb) <= aim.tolerance(va, vb):
            continue
        gap = abs(va - vb)
        kind = METRICS[aim.metric].kind
        amount = f"{gap * 100:.1f} points" if kind == "share" else show(aim.metric, gap)
        more = "more" if aim.higher else ("fewer" if kind in ("bytes", "count") else "less")
        return f"{b.label} would need {amount} {more} {aim.metric} ({show(aim.metric, vb)})"
    return f"{b.label} is equal on every aim"


def _failures(v: StrategyVerdict, missed: list[Constraint]) -> str:
    return ", ".join(f"{c.metric} {show(c.metric, value_of(v, c.metric))}" for c in missed)


def decision_lines(decision: Decision, verdicts: Sequence[StrategyVerdict]) -> list[str]:
    """The recommendation as lines to print: the objective, the pick (or a tie, or why
    none), the runner-up and what would change the pick."""
    objective = decision.objective
    source = objective.source
    if source.startswith("default"):
        source = "the " + source
    lines = [f"Objective ({source}): {objective.text()}."]
    by_label = {v.label: v for v in verdicts}
    pick = decision.pick
    if pick is None and not decision.failed:
        lines.append("No recommendation: no strategy completed every scenario.")
        return lines
    if pick is None:
        lines.append("No recommendation: no strategy meets the objective's constraints.")
        lines += [
            f"{label} misses {_failures(by_label[label], missed)}"
            for label, missed in decision.failed.items()
        ]
        return lines
    figures = ", ".join(
        f"{aim.metric} {show(aim.metric, value_of(pick, aim.metric))}" for aim in objective.aims
    )
    if len(decision.tied) > 1:
        names = " and ".join(v.label for v in decision.tied)
        lines.append(
            f"Recommended: a tie between {names}, equal on every aim ({figures}); "
            "the tables above show what else sets them apart."
        )
    else:
        lines.append(f"Recommended: {pick.label} ({figures}).")
    runner = decision.runner_up
    if runner is not None:
        lines.append(f"Runner-up: {runner.label}; {_deciding(objective, pick, runner)}.")
    compare = functools.partial(_compare, objective)
    excluded = [by_label[label] for label in decision.failed if compare(by_label[label], pick) < 0]
    others = [label for label in decision.failed if by_label[label] not in excluded]
    if others:
        lines.append(
            "Missing a constraint: "
            + "; ".join(
                f"{label} ({_failures(by_label[label], decision.failed[label])})"
                for label in others
            )
            + "."
        )
    for v in excluded:
        missed = decision.failed[v.label]
        limits = ", ".join(
            f"{c.metric} {'>=' if '>' in c.op else '<='} {show(c.metric, value_of(v, c.metric))}"
            for c in missed
        )
        lines.append(
            f"{v.label} ranks above on the aims but misses {_failures(v, missed)}; "
            f"a limit of {limits} would admit it."
        )
    if runner is None and not excluded:
        lines.append("No other strategy meets the constraints.")
    return lines
