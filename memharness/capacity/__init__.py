"""Capacity plans from measured runs: `memharness capacity` and `memharness compare`."""

from memharness.capacity.queueing import (
    UslFit,
    allen_cunneen_wait,
    erlang_c,
    fit_usl,
    response_quantile,
    sqrt_staffing,
    usl_throughput,
)
from memharness.capacity.target import Target, TargetError, load_target, parse_target

__all__ = [
    "Target",
    "TargetError",
    "UslFit",
    "allen_cunneen_wait",
    "erlang_c",
    "fit_usl",
    "load_target",
    "parse_target",
    "response_quantile",
    "sqrt_staffing",
    "usl_throughput",
]
