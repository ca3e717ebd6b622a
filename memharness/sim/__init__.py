"""The simulator: replay scenarios on Ray actors and measure each strategy.

`plan` (what a run replays), `runner` (Ray actors; importing it loads Ray), `shard` (one
replay), `truth`, `metrics`, `results`. Only `plan` is re-exported, so a command that
does not simulate never loads Ray.
"""

from memharness.sim.plan import ScenarioInput, SpecError, StrategySpec

__all__ = ["ScenarioInput", "SpecError", "StrategySpec"]
