"""The formulas of a capacity plan: USL, Erlang C, Allen–Cunneen, square-root staffing.

Pure functions of numbers (no files): each is checked against known values in
tests/test_capacity.py. Sources are cited where each formula is used; CAPACITY.md (in
the workplace's shared folder) lists them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "SQRT_STAFFING_Q",
    "UslFit",
    "allen_cunneen_wait",
    "erlang_c",
    "fit_usl",
    "response_quantile",
    "sqrt_staffing",
    "usl_rejections",
    "usl_throughput",
]

#: The USL's practice (usl4j and the R package refuse fewer levels; CAPACITY.md).
MIN_USL_LEVELS = 6
#: A fit whose λ/σ interval is wider than this (half-width over λ/σ) is rejected.
USL_CEILING_LIMIT = 0.15
#: Predictions stop at this multiple of the largest measured concurrency (Schwartz).
USL_EXTRAPOLATION = 2.0

#: Square-root staffing's quality factor for a ~5% chance of queueing (Halfin–Whitt:
#: P(wait) -> 1 / (1 + Q·Φ(Q)/φ(Q)) = 0.048 at Q = 1.761), as Netflix's
#: service-capacity-modeling uses it (models/common.py).
SQRT_STAFFING_Q = 1.761


def usl_throughput(n: Any, lam: float, sigma: float, kappa: float) -> Any:
    """Gunther's Universal Scalability Law: X(N) = λN / (1 + σ(N−1) + κN(N−1)).

    (N. J. Gunther, Guerrilla Capacity Planning, ch. 4; codahale/usl model.go.)
    """
    n = np.asarray(n, dtype=float)
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


@dataclass(frozen=True, slots=True)
class UslFit:
    """A USL fit with bootstrap intervals, its peak and its ceiling."""

    lam: float
    sigma: float
    kappa: float
    lam_ci: tuple[float, float]
    sigma_ci: tuple[float, float]
    kappa_ci: tuple[float, float]
    #: N* = ⌊√((1−σ)/κ)⌋ (inf when κ = 0) and X(N*): the most the system delivers.
    n_star: float
    x_max: float
    x_max_ci: tuple[float, float]
    #: λ/σ: the throughput contention alone would cap at (inf when σ = 0).
    ceiling: float
    points: int
    rmse_rel: float
    #: The bootstrap's 95% interval of λ/σ, and the largest concurrency measured.
    ceiling_ci: tuple[float, float] = (math.inf, math.inf)
    n_measured_max: float = math.inf
    n_min: float = 0.0

    def predict(self, n: Any) -> Any:
        """X(N), refused past `USL_EXTRAPOLATION` × the largest measured concurrency."""
        top = float(np.max(np.asarray(n, dtype=float)))
        if top > USL_EXTRAPOLATION * self.n_measured_max:
            raise ValueError(
                f"USL: N = {top:g} is past {USL_EXTRAPOLATION:g}x the largest measured "
                f"concurrency ({self.n_measured_max:g}): no prediction there"
            )
        return usl_throughput(n, self.lam, self.sigma, self.kappa)

    def as_dict(self) -> dict[str, Any]:
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in asdict(self).items()
        }


def _peak(lam: float, sigma: float, kappa: float) -> tuple[float, float]:
    if kappa > 1e-9:  # below this, κ is numerical noise of the bounded fit: no retrograde peak
        n_star = max(1.0, math.floor(math.sqrt(max(1.0 - sigma, 0.0) / kappa)))
        return n_star, float(usl_throughput(n_star, lam, sigma, kappa))
    if sigma > 0:
        return math.inf, lam / sigma
    return math.inf, math.inf


def _fit(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    # Relative residuals: the light points (small X) count as much as the heavy ones.
    def residuals(p: np.ndarray) -> np.ndarray:
        return np.asarray((usl_throughput(n, *p) - x) / x)

    def jacobian(p: np.ndarray) -> np.ndarray:
        lam, sigma, kappa = p
        d = 1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)
        return np.column_stack(
            [n / d / x, -lam * n * (n - 1.0) / d**2 / x, -lam * n * n * (n - 1.0) / d**2 / x]
        )

    lam0 = float(np.max(x / n))
    # σ, κ ≥ 0 by bounds: an unconstrained fit returns negative coefficients on noisy data
    # (CAPACITY.md on the R package usl and codahale/usl).
    result = least_squares(
        residuals,
        x0=[lam0, 0.05, 0.001],
        jac=jacobian,
        bounds=([1e-12, 0.0, 0.0], [np.inf, 1.0, 1.0]),
    )
    return np.asarray(result.x)


def fit_usl(
    concurrency: Sequence[float] | np.ndarray,
    throughput: Sequence[float] | np.ndarray,
    *,
    bootstrap: int = 200,
    seed: int = 0,
) -> UslFit:
    """Fit X(N) to measured points by bounded least squares; percentile intervals from a
    residual bootstrap (relative residuals resampled onto the fitted curve)."""
    n = np.asarray(concurrency, dtype=float)
    x = np.asarray(throughput, dtype=float)
    keep = (n > 0) & (x > 0)
    n, x = n[keep], x[keep]
    if len(n) < 3:
        raise ValueError(f"a USL fit needs at least 3 points with N, X > 0 (got {len(n)})")
    lam, sigma, kappa = _fit(n, x)
    fitted = usl_throughput(n, lam, sigma, kappa)
    rel = (x - fitted) / fitted
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(bootstrap):
        resampled = fitted * (1.0 + rng.choice(rel, size=len(rel), replace=True))
        resampled = np.maximum(resampled, 1e-9)
        p = _fit(n, resampled)
        draws.append((*p, _peak(*p)[1], p[0] / p[1] if p[1] > 0 else math.inf))
    boot = np.asarray(draws) if draws else np.asarray([[lam, sigma, kappa, math.nan, math.nan]])

    def ci(column: int) -> tuple[float, float]:
        values = boot[:, column]
        values = values[np.isfinite(values)]
        if len(values) == 0:
            return (math.inf, math.inf)
        return (float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5)))

    n_star, x_max = _peak(lam, sigma, kappa)
    return UslFit(
        lam=float(lam),
        sigma=float(sigma),
        kappa=float(kappa),
        lam_ci=ci(0),
        sigma_ci=ci(1),
        kappa_ci=ci(2),
        n_star=n_star,
        x_max=x_max,
        x_max_ci=ci(3),
        ceiling=float(lam / sigma) if sigma > 0 else math.inf,
        points=len(n),
        rmse_rel=float(np.sqrt(np.mean(rel**2))),
        ceiling_ci=ci(4) if np.isfinite(boot[:, 4]).all() else (math.inf, math.inf),
        n_measured_max=float(n.max()),
        n_min=float(n.min()),
    )


def usl_rejections(fit: UslFit, levels: int, *, bound_tol: float = 1e-4) -> list[str]:
    """Why a USL fit is no model of the system (empty: accepted as a cross-check): fewer
    than `MIN_USL_LEVELS` levels, no level at N = 1, a coefficient at its bound, or λ/σ
    known to no better than ±`USL_CEILING_LIMIT` (every point past the knee: λ and σ grow
    together, the fit is undefined; CAPACITY.md)."""
    reasons = []
    if levels < MIN_USL_LEVELS:
        reasons.append(f"{levels} load levels; the USL needs at least {MIN_USL_LEVELS}")
    n_min = fit.n_min
    if n_min > 1.5:
        reasons.append(f"no level at N = 1 (the lowest concurrency measured is {n_min:.2g})")
    for name, value in (("σ", fit.sigma), ("κ", fit.kappa)):
        if value <= bound_tol or value >= 1.0 - bound_tol:
            reasons.append(f"{name} = {value:.2g} sits at its bound (0 ≤ {name} ≤ 1)")
    low, high = fit.ceiling_ci
    if not (math.isfinite(fit.ceiling) and math.isfinite(low) and math.isfinite(high)):
        reasons.append("λ/σ has no finite interval")
    elif (high - low) / 2.0 > USL_CEILING_LIMIT * fit.ceiling:
        half = (high - low) / 2.0 / fit.ceiling
        reasons.append(
            f"λ/σ = {fit.ceiling:.3g} is known to ±{half:.0%} only (limit ±{USL_CEILING_LIMIT:.0%})"
        )
    return reasons


def erlang_c(c: int, a: float) -> float:
    """Erlang C: the probability that an arrival waits, c servers, a = λ/μ Erlangs (< c).

    Computed through the Erlang B recursion B(k) = a·B(k−1) / (k + a·B(k−1)), then
    C = c·B / (c − a·(1 − B)), which stays finite for large c (Kleinrock, Queueing
    Systems vol. 1, §3.6; the closed form with a^c/c! overflows).
    """
    if c < 1:
        raise ValueError("c must be >= 1")
    if a <= 0:
        return 0.0
    if a >= c:
        return 1.0
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1.0 - b))


def allen_cunneen_wait(c: int, lam: float, mean_s: float, ca2: float, cs2: float) -> float:
    """Mean wait in a G/G/c queue: Erlang C's M/M/c wait scaled by (c_a² + c_s²)/2.

    W_q ≈ C(c, a) / (cμ − λ) · (c_a² + c_s²)/2 (Allen, Probability, Statistics and
    Queueing Theory, 2nd ed., §6.5; CAPACITY.md). inf when the queue is unstable.
    """
    mu = 1.0 / mean_s
    if lam >= c * mu:
        return math.inf
    return erlang_c(c, lam / mu) / (c * mu - lam) * (ca2 + cs2) / 2.0


def response_quantile(
    q: float,
    *,
    c: int,
    lam: float,
    occupancy_s: float,
    latency_s: np.ndarray,
    ca2: float = 1.0,
    pooled: bool = True,
    draws: int = 20_000,
    seed: int = 0,
) -> float:
    """The q-quantile of response time (queueing wait + measured latency), in seconds.

    Each of `c` servers is busy `occupancy_s` per request on average (its service demand;
    for a server that is its CPU per call, which can be less than what the caller
    measures). The wait: with probability C(c, a) an arrival waits, and a wait is
    exponential with rate (cμ − λ) (Erlang C: P(W > t) = C·e^{−(cμ−λ)t}), its mean
    stretched by Allen–Cunneen's (c_a² + c_s²)/2, with c_s² from `latency_s`. The latency
    of the call itself is drawn from the measured samples `latency_s`. The two are
    combined by a seeded Monte Carlo (deterministic). `pooled=False` is c separate
    single-server queues at λ/c each (Redis shards). inf when the queue is unstable.
    """
    latency_s = np.asarray(latency_s, dtype=float)
    mean = float(latency_s.mean())
    cs2 = float(latency_s.var() / mean**2) if mean > 0 else 0.0
    servers, rate = (c, lam) if pooled else (1, lam / c)
    mu = 1.0 / occupancy_s
    if rate >= servers * mu:
        return math.inf
    p_wait = erlang_c(servers, rate / mu)
    theta = (servers * mu - rate) / ((ca2 + cs2) / 2.0)
    rng = np.random.default_rng(seed)
    waits = np.where(rng.random(draws) < p_wait, rng.exponential(1.0 / theta, draws), 0.0)
    total = waits + rng.choice(latency_s, size=draws, replace=True)
    return float(np.quantile(total, q))


def sqrt_staffing(a: float, q: float = SQRT_STAFFING_Q) -> float:
    """Servers for `a` Erlangs of offered work: a + Q·√a (Halfin–Whitt square-root
    staffing, as in Netflix service-capacity-modeling's models/common.py)."""
    return a + q * math.sqrt(max(a, 0.0))
