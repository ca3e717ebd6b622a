"""Scenarios: the YAML format, its loader, generators, the LoCoMo importer and stats."""

from memharness.scenarios.generate import DOMAINS, Mixture, generate_scenario, iter_users
from memharness.scenarios.loader import (
    ScenarioError,
    load_scenario,
    parse_scenario,
    validate_scenario,
    write_scenario,
)
from memharness.scenarios.locomo import LocomoError, convert_locomo, import_locomo
from memharness.scenarios.model import (
    Adversarial,
    EventStep,
    FactSpec,
    ForgetStep,
    ProbeStep,
    SayStep,
    Scenario,
    User,
)
from memharness.scenarios.stats import ScenarioStats, scenario_stats

__all__ = [
    "DOMAINS",
    "Adversarial",
    "EventStep",
    "FactSpec",
    "ForgetStep",
    "LocomoError",
    "Mixture",
    "ProbeStep",
    "SayStep",
    "Scenario",
    "ScenarioError",
    "ScenarioStats",
    "User",
    "convert_locomo",
    "generate_scenario",
    "import_locomo",
    "iter_users",
    "load_scenario",
    "parse_scenario",
    "scenario_stats",
    "validate_scenario",
    "write_scenario",
]
