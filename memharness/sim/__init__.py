"""The simulator: replay scenarios on Ray actors and measure each strategy."""

from memharness.sim.plan import SpecError, StrategySpec
from memharness.sim.runner import RunOptions, ScenarioInput, Simulator, StrategyOutcome

__all__ = [
    "RunOptions",
    "ScenarioInput",
    "Simulator",
    "SpecError",
    "StrategyOutcome",
    "StrategySpec",
]
