"""Service demand from CPU accounting, and the throughput it bounds.

The utilisation law U = X·D (Menascé, operational laws) gives, with D the CPU seconds per
turn of every process of the system under test, X_max = cores / D: no fit, no point past
the knee. D is read at light load (steps whose utilisation by a first estimate of D is at
most `LIGHT_UTILISATION` and which kept up with their offered rate), one value per step,
so repeated light steps give an interval (Student's t over the steps). A process that
serves on one core (the load process: Python's GIL; Redis: one command thread) is a
resource of its own: X ≤ 1 / D_k (the asymptotic bound X ≤ min(1/D_max, ...)), so
X_max = min(cores / D, 1 / D_k), the binding term named.

Steps the plan cannot use are set apart here with the reason: no completed turn, or the
generator dropped more than `DROP_LIMIT` of its intended turns or sent more than
`LATE_LIMIT` of them late (`memharness.load_contract`: a step like that measures the generator,
not the server). The generator's own process (`generator`, `memharness load --apart`) is
never part of D.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from memharness.load_contract import SINGLE_CORE, auto_rates, generator_problem

__all__ = [
    "KEPT_UP",
    "LATENCY_UTILISATION",
    "LIGHT_UTILISATION",
    "SAFE_UTILISATION",
    "SUT_ROLES",
    "Demand",
    "bootstrap_median_ci",
    "check_rates",
    "service_demand",
    "suggest_rates",
    "t_interval",
    "valid_steps",
]

#: Every process of the system under test, as `steps.json` names them (procstats.py);
#: `generator` (the load generator's own process) is not one of them.
SUT_ROLES = ("load", "service", "maintenance", "redis", "postgres", "chroma")
#: The demand is read on steps at most this busy (by a first estimate of D).
LIGHT_UTILISATION = 0.5
#: The light-load latency (the model's service time, no queueing) is read on steps at
#: most this share of X_max: above it, turns in one process share its CPU and lengthen.
LATENCY_UTILISATION = 0.25
#: The queueing model predicts up to this share of X_max's lower bound; above: saturated.
SAFE_UTILISATION = 0.8
#: A step kept up when it achieved at least this share of its offered rate.
KEPT_UP = 0.9
#: Fewest light steps for an interval of D.
MIN_REPEATS = 3


def t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Student's t interval of the mean of `values` (at least 2)."""
    from scipy import stats  # type: ignore[import-untyped]

    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2:
        raise ValueError("an interval needs at least 2 values")
    mean = float(values.mean())
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(values.std(ddof=1)) / math.sqrt(n)
    return mean - half, mean + half


def bootstrap_median_ci(
    values: np.ndarray, *, draws: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median (seeded: the same values give the same
    interval)."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        raise ValueError("an interval needs at least 1 value")
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values, size=(draws, len(values)), replace=True), axis=1)
    tail = (1 - level) / 2 * 100
    return float(np.percentile(medians, tail)), float(np.percentile(medians, 100 - tail))


def valid_steps(steps: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, str]]:
    """The steps a plan may use, and why each other step is set apart."""
    excluded: dict[int, str] = {}
    previous = None
    for _, row in steps.sort_values("step").iterrows():
        step = int(row["step"])
        behind = previous is not None and (
            previous["achieved"] < KEPT_UP * previous["offered"]
            and row["offered"] < previous["offered"]
        )
        previous = row
        if behind:
            excluded[step] = (
                f"it started behind the backlog of the saturated step before it (step {step - 1})"
            )
        elif not row["completed"] > 0:
            excluded[step] = "no turn completed in the step (see its errors in steps.json)"
        else:
            generator = {
                "late_share": row.get("generator_late_share"),
                "own_lag_ms": {
                    "p99": row.get("generator_lag_p99_ms"),
                    "max": row.get("generator_lag_max_ms"),
                },
            }
            problem = generator_problem(generator, row.get("dropped_share"))
            if problem is not None:
                excluded[step] = problem
    return steps[~steps["step"].isin(list(excluded))], excluded


@dataclass(frozen=True)
class Demand:
    """CPU seconds per turn of the system under test, and the throughput it bounds."""

    d_s: float
    d_ci: tuple[float, float] | None
    per_role_s: dict[str, float]
    roles: list[str]
    steps: list[int]
    per_step_s: list[float]
    cores: float
    cores_source: str
    x_max: float
    x_max_ci: tuple[float, float] | None
    bound_by: str
    #: The role whose single core binds (None: the cores bind).
    bound_role: str | None
    #: The highest achieved rate of a valid step that kept up with its offered rate.
    x_sustained: float | None
    notes: list[str]

    @property
    def x_low(self) -> float:
        """X_max's lower bound (its point when no interval could be had)."""
        return self.x_max_ci[0] if self.x_max_ci else self.x_max

    @property
    def safe_rate(self) -> float:
        """Up to this rate the queueing model gives a number; above it: saturated."""
        return SAFE_UTILISATION * self.x_low

    def servers(self) -> tuple[int, float]:
        """The binding resource as a queue: its servers and the service time of each."""
        if self.bound_role is not None:
            return 1, self.per_role_s[self.bound_role]
        return max(1, round(self.cores)), self.d_s

    def predict_quantile(self, q: float, lam: float, latency_s: np.ndarray) -> float | None:
        """The q-quantile of response time (s) at `lam` turns/s: M/G/c (Erlang C with
        Allen–Cunneen's correction) on the binding resource, plus the measured light-load
        latency; None above `safe_rate` (saturated: p95 unbounded, no number)."""
        from memharness.capacity.queueing import response_quantile

        if lam > self.safe_rate:
            return None
        c, service = self.servers()
        return response_quantile(q, c=c, lam=lam, occupancy_s=service, latency_s=latency_s)

    def headline(self) -> str:
        """The plan's first line: X_max with its interval, cross-checked."""
        ci = (
            f" (95% CI {self.x_max_ci[0]:.3g}–{self.x_max_ci[1]:.3g})"
            if self.x_max_ci
            else f" (no interval: fewer than {MIN_REPEATS} light steps)"
        )
        d_ci = f" [{self.d_ci[0] * 1000:.3g}–{self.d_ci[1] * 1000:.3g}]" if self.d_ci else ""
        sustained = (
            f"; highest rate sustained {self.x_sustained:.3g}/s"
            if self.x_sustained is not None
            else "; no step kept up with its offered rate"
        )
        return (
            f"X_max = {self.x_max:.3g} turns/s{ci}, bound by {self.bound_by}; "
            f"D = {self.d_s * 1000:.3g}{d_ci} ms CPU per turn on {self.cores:g} cores"
            f"{sustained}; p95 predicted up to {self.safe_rate:.3g}/s "
            f"({SAFE_UTILISATION:g} × X_max's lower bound), saturated above"
        )

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["safe_rate"] = self.safe_rate
        out["headline"] = self.headline()
        return out


def _per_step(steps: pd.DataFrame, roles: list[str]) -> pd.DataFrame:
    out = pd.DataFrame({"step": steps["step"].astype(int)})
    for role in roles:
        out[role] = steps[f"cpu.{role}"].astype(float) / steps["completed"].astype(float)
    out["total"] = out[roles].sum(axis=1)
    return out


def service_demand(steps: pd.DataFrame, cores: float | None, cores_source: str = "") -> Demand:
    """D from the light, valid steps of a step-load table (`inputs.read_load`), X_max from it.

    Raises ValueError, saying what to run, when no step can give a demand.
    """
    if cores is None:
        cores, cores_source = float(os.cpu_count() or 1), "this machine (the run recorded none)"
    usable = steps[steps["completed"] > 0]
    roles = [r for r in SUT_ROLES if f"cpu.{r}" in usable and usable[f"cpu.{r}"].notna().all()]
    if len(usable) and roles and not (usable["achieved"] >= KEPT_UP * usable["offered"]).any():
        per = _per_step(usable, roles)
        single = [1.0 / float(per[r].median()) for r in roles if r in SINGLE_CORE]
        first_x = min([cores / float(per["total"].median()), *single])
        raise ValueError(
            f"every step is past saturation (none achieved {KEPT_UP:.0%} of its offered "
            f"rate; the lowest offered {float(usable['offered'].min()):g}/s): add rates "
            "below it, e.g. --rates " + ",".join(f"{r:g}" for r in suggest_rates(first_x))
        )
    valid, excluded = valid_steps(steps)
    if valid.empty:
        reasons = "; ".join(f"step {k}: {why}" for k, why in sorted(excluded.items()))
        raise ValueError(
            f"no step of the load run can be used ({reasons}). Re-run `memharness load "
            "--rates auto`; if turns fail, their errors are in steps.json"
        )
    if not roles:
        raise ValueError(
            "the load run sampled no process's CPU (steps.json has no 'processes'): re-run "
            "`memharness load --rates auto` on this machine (remote servers cannot be sampled)"
        )
    per = _per_step(valid, roles)
    first = float(per["total"].median())
    kept = valid["achieved"].to_numpy() >= KEPT_UP * valid["offered"].to_numpy()
    busy = valid["achieved"].to_numpy() * first / cores
    light = per[kept & (busy <= LIGHT_UTILISATION)]
    notes = [f"step {k} set apart: {why}" for k, why in sorted(excluded.items())]
    if not kept.any():
        raise ValueError(
            "no usable step kept up with its offered rate: "
            + "; ".join(notes or ["re-run `memharness load --rates auto --repeats 3`"])
        )
    if len(light) < MIN_REPEATS:
        light = per[kept].head(MIN_REPEATS) if kept.sum() >= MIN_REPEATS else per[kept]
        notes.append(
            f"fewer than {MIN_REPEATS} steps at light load (utilisation ≤ "
            f"{LIGHT_UTILISATION:g}): D read on steps {list(light['step'])}"
        )
    d = float(light["total"].mean())
    d_ci = t_interval(light["total"].to_numpy()) if len(light) >= MIN_REPEATS else None
    if d_ci is None:
        notes.append(
            f"D has no interval: it needs {MIN_REPEATS} light steps (repeat them: "
            "`memharness load --rates auto --repeats 3`)"
        )
    terms: dict[str | None, tuple[float, tuple[float, float] | None]] = {
        None: (cores / d, _inverse(d_ci, cores))
    }
    for role in roles:
        if role in SINGLE_CORE and float(light[role].mean()) > 0:
            ci = t_interval(light[role].to_numpy()) if len(light) >= MIN_REPEATS else None
            terms[role] = (1.0 / float(light[role].mean()), _inverse(ci, 1.0))
    bound_role = min(terms, key=lambda k: terms[k][0])
    bound_by = (
        f"{cores:g} cores / D" if bound_role is None else f"1 / D of {SINGLE_CORE[bound_role]}"
    )
    x_max = terms[bound_role][0]
    x_ci = None
    if all(ci is not None for _, ci in terms.values()):
        lows = [ci[0] for _, ci in terms.values() if ci is not None]
        highs = [ci[1] for _, ci in terms.values() if ci is not None]
        x_ci = (min(lows), min(highs))
    sustained = valid[kept]["achieved"]
    return Demand(
        d_s=d,
        d_ci=d_ci,
        per_role_s={r: float(light[r].mean()) for r in roles},
        roles=roles,
        steps=[int(s) for s in light["step"]],
        per_step_s=[float(v) for v in light["total"]],
        cores=float(cores),
        cores_source=cores_source or "the load run (steps.json: cores)",
        x_max=x_max,
        x_max_ci=x_ci,
        bound_by=bound_by,
        bound_role=bound_role,
        x_sustained=float(sustained.max()) if len(sustained) else None,
        notes=notes,
    )


def _inverse(ci: tuple[float, float] | None, numerator: float) -> tuple[float, float] | None:
    """numerator / D over D's interval (a lower bound of D at or below 0: no upper bound)."""
    if ci is None:
        return None
    low, high = ci
    return numerator / high, (numerator / low if low > 0 else math.inf)


#: Fewest valid steps, and distinct rates among them, a plan stands on.
MIN_STEPS, MIN_RATES = 5, 3


def check_rates(steps: pd.DataFrame, demand: Demand) -> None:
    """Refuse a run whose rates cannot support a plan, naming the rates to add (from the
    run's own X_max) and the command."""
    valid, _ = valid_steps(steps)
    rates = sorted({float(r) for r in valid["offered"]})
    if len(valid) >= MIN_STEPS and len(rates) >= MIN_RATES:
        return
    have = ", ".join(f"{r:g}" for r in rates)
    add = [r for r in suggest_rates(demand.x_max) if all(abs(r - h) > 0.05 * r for h in rates)]
    raise ValueError(
        f"the load run has {len(valid)} usable step(s) at {len(rates)} rate(s) ({have} turns/s); "
        f"a plan needs at least {MIN_STEPS} steps at {MIN_RATES} or more rates, below and around "
        f"X_max (≈ {demand.x_max:.3g}/s from this run's CPU per turn). Add rates "
        f"{','.join(f'{r:g}' for r in add)}: `memharness load --rates "
        f"{','.join(f'{r:g}' for r in sorted(set(rates) | set(add)))} --repeats 3` "
        "(or `--rates auto --repeats 3`)"
    )


def suggest_rates(x_max: float) -> list[float]:
    """Rates spread below and around `x_max`: those `--rates auto` offers."""
    if not (math.isfinite(x_max) and x_max > 0):
        raise ValueError(f"X_max must be a positive number (got {x_max})")
    return list(auto_rates(x_max))
