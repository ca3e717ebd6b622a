"""The target of a capacity plan: a YAML file validated by pydantic.

Errors name the file, the line and the field (`target.yaml:7: slo_ms.turn: ...`), through
`reference.yamldoc` like strategies and scenarios. See capacity/example-target.yaml.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reference.yamldoc import YamlDocError, compose_mapping, read_yaml_file, validation_problems

__all__ = [
    "LAYERS",
    "NODE_LAYERS",
    "NodeShape",
    "Slo",
    "Target",
    "TargetError",
    "load_target",
    "parse_target",
]

#: The layers a plan sizes: the three stores, the embedder, and the turn (the app tier).
LAYERS = ("session", "stm", "ltm", "embedder", "turn")
#: Layers a node shape can be given for: those, and the maintenance process (sized when
#: the load run measured it).
NODE_LAYERS = (*LAYERS, "maintenance")


class TargetError(YamlDocError):
    """A target file that does not load or validate."""


class _Strict(BaseModel):
    # inf and nan would pass `gt=0` and turn the plan into inf and nan.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class NodeShape(_Strict):
    """One machine type: what an instance of a layer runs on."""

    cores: float = Field(gt=0)
    ram_gb: float = Field(gt=0)
    disk_gb: float = Field(gt=0)
    price_per_hour: float | None = Field(default=None, ge=0)


class Slo(_Strict):
    """Latency objectives in milliseconds at `percentile` (DESIGN.md's SLAs by default)."""

    percentile: float = Field(default=95, gt=50, lt=100)
    session: float = Field(default=5, gt=0)
    stm: float = Field(default=50, gt=0)
    ltm: float = Field(default=200, gt=0)
    turn: float = Field(default=300, gt=0)


class Target(_Strict):
    """Who uses the memory, how much, and what the plan must hold."""

    users: int = Field(gt=0)
    turns_per_user_per_day: float = Field(gt=0)
    #: The busiest hour's rate over the day's mean rate.
    peak_factor: float = Field(default=3.0, ge=1)
    #: How long memories must be kept (days): the horizon of long-term growth.
    retention_days: float = Field(default=90, gt=0)
    strategy: str = Field(default="hybrid", min_length=1, max_length=200)
    #: The currency of the node prices, shown with every cost.
    currency: str = Field(default="USD", min_length=1, max_length=12, pattern=r"^[^\s<>&]+$")
    slo_ms: Slo = Slo()
    #: Plan every CPU to at most this utilisation at peak (headroom for bursts, failover).
    utilisation_ceiling: float = Field(default=0.6, gt=0, lt=1)
    #: Plan memory to at most this share of a node's RAM.
    memory_ceiling: float = Field(default=0.75, gt=0, le=1)
    #: A node shape per layer (session, stm, ltm, embedder, turn, maintenance) or `default`.
    nodes: dict[str, NodeShape] = Field(default_factory=dict)

    @field_validator("nodes")
    @classmethod
    def _known_layers(cls, nodes: dict[str, NodeShape]) -> dict[str, NodeShape]:
        unknown = sorted(set(nodes) - {*NODE_LAYERS, "default"})
        if unknown:
            raise ValueError(
                f"unknown node layer(s) {', '.join(unknown)}: use {', '.join(NODE_LAYERS)} "
                "or default"
            )
        return nodes

    def node(self, layer: str) -> tuple[NodeShape, bool]:
        """The node shape of `layer` and whether the target gave it (else assumed)."""
        if layer in self.nodes:
            return self.nodes[layer], True
        if "default" in self.nodes:
            return self.nodes["default"], True
        return DEFAULT_NODE, False

    @property
    def mean_turns_per_s(self) -> float:
        return self.users * self.turns_per_user_per_day / 86_400.0

    @property
    def peak_turns_per_s(self) -> float:
        return self.mean_turns_per_s * self.peak_factor

    def for_strategy(self, strategy: str) -> Target:
        """The same target under `strategy`."""
        return self.model_copy(update={"strategy": strategy})

    def scaled(self, factor: float) -> Target:
        """The same target with `factor` times the users."""
        return self.model_copy(update={"users": max(1, round(self.users * factor))})


#: The node assumed when a target names none: a common 4-core, 16 GB general-purpose VM.
DEFAULT_NODE = NodeShape(cores=4, ram_gb=16, disk_gb=200, price_per_hour=None)


def parse_target(text: str, *, source: str | None = None) -> Target:
    """A target from YAML text; errors name `source`, the line and the field."""
    data, node = compose_mapping(
        text, source=source, what="a mapping of target fields", error=TargetError
    )
    try:
        return Target.model_validate(data)
    except ValidationError as exc:
        raise TargetError(
            validation_problems(exc, source=source, node=node, model=Target)
        ) from None


def load_target(path: str | Path) -> Target:
    """A target from a YAML file."""
    return parse_target(read_yaml_file(path, error=TargetError), source=str(path))
