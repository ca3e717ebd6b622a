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
from memharness.scenarios.stats import ScenarioStats, file_stats, scenario_stats
from memharness.scenarios.stream import ScenarioInfo, stream_scenario

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
    "ScenarioInfo",
    "ScenarioStats",
    "User",
    "convert_locomo",
    "file_stats",
    "generate_scenario",
    "import_locomo",
    "iter_users",
    "load_scenario",
    "parse_scenario",
    "scenario_stats",
    "stream_scenario",
    "validate_scenario",
    "write_scenario",
]
