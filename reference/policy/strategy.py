"""Strategies: named, validated configurations of the forgetting engine, kept in YAML.

A `Strategy` is data only: which rule blocks (`reference.policy.rules`) are on and with
which parameters. The pure decisions it implies live in the other modules of
`reference.policy`; the engine that applies them to the stores is separate.

Validation errors name the field (`StrategyError`); reading YAML files, with their line
numbers, and the registry of built-in and user strategies live in
`reference.policy.loading`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from reference.policy.alerts import AlertRule
from reference.policy.rules import (
    ArchivalRule,
    Block,
    ConsolidationRule,
    DecayRule,
    EventRule,
    ForgetCommandsRule,
    ImportanceRule,
    PiiRule,
    RetrievalRule,
    Seconds,
    SlidingRule,
    TtlRule,
    field_error,
)
from reference.user_words import NAME_PATTERN
from reference.yamldoc import YamlDocError, validation_problems

Promotion = Literal["rules", "consolidate"]


class StrategyError(YamlDocError):
    """A strategy that does not load or validate; `problems` lists each failure."""


class Strategy(Block):
    """A named configuration of the forgetting engine. Immutable; `with_params` derives."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1, max_length=200)
    ttl: TtlRule | None = None
    sliding: SlidingRule | None = None
    importance: ImportanceRule | None = None
    decay: DecayRule | None = None
    events: tuple[EventRule, ...] = ()
    forget_commands: ForgetCommandsRule = ForgetCommandsRule()
    pii: PiiRule | None = None
    archival: ArchivalRule | None = None
    sweep_interval_s: Seconds = 300.0
    sweep_batch_size: int = Field(1000, ge=1, le=1_000_000)
    #: `rules`: only the inline promotion of stable facts reaches LTM (`reference.
    #: promotion`). `consolidate`: that, and when a session ends its STM records become
    #: LTM episodes (`reference.forgetting.consolidation`).
    promotion: Promotion = "rules"
    consolidation: ConsolidationRule | None = None
    #: Thresholds on the monitoring figures (`reference.policy.alerts`): they change no
    #: decision, only what a run reports.
    alerts: AlertRule | None = None
    #: LTM retrieval: dense only when absent (or `lexical: false`), else dense + lexical.
    retrieval: RetrievalRule | None = None
    # Last, so that its validator sees the rule blocks above.
    oracle: bool = False

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise field_error("must be one line")
        return value.strip()

    @field_validator("consolidation")
    @classmethod
    def _consolidation_needs_consolidate(
        cls, value: ConsolidationRule | None, info: Any
    ) -> ConsolidationRule | None:
        promotion = info.data.get("promotion")
        if value is not None and promotion == "rules":
            raise field_error("applies only with promotion: consolidate (promotion is 'rules')")
        return value

    @property
    def consolidates(self) -> bool:
        """Whether ended sessions are consolidated into LTM episodes."""
        return self.promotion == "consolidate"

    @property
    def lexical_retrieval(self) -> RetrievalRule | None:
        """The lexical retrieval settings when on, else None (dense only)."""
        return self.retrieval if self.retrieval is not None and self.retrieval.lexical else None

    @property
    def consolidation_rule(self) -> ConsolidationRule:
        """The consolidation settings (defaults when the block is omitted)."""
        return self.consolidation or ConsolidationRule()

    @field_validator("oracle")
    @classmethod
    def _oracle_alone(cls, value: bool, info: Any) -> bool:
        # The oracle is the upper bound: any other removal rule would make it lose what
        # the probes need. Compliance rules (forget commands, PII) still apply.
        clashing = [
            b for b in ("ttl", "sliding", "importance", "archival", "events") if info.data.get(b)
        ]
        if value and clashing:
            raise field_error(f"an oracle keeps exactly what the probes need; remove {clashing}")
        return value

    def with_params(self, overrides: Mapping[str, Any]) -> Strategy:
        """A new validated strategy with dotted parameters replaced, e.g.
        `{"ttl.default_s": 600, "events.0.action": "delete", "decay": None}`."""
        data = self.model_dump(mode="json")
        for path, value in overrides.items():
            set_path(data, path, value)
        return validate_strategy(data, source=None)

    def fingerprint(self) -> str:
        """A short stable hash of the behaviour: the dump of every field but name and
        description, less the options at a default that changes nothing.

        Run results are keyed by fingerprint, so an option a strategy leaves at such a
        default stays out of the hash, and adding one never re-keys the strategies that
        don't use it: the default `promotion: rules` (which takes no `consolidation`
        block, so both are left out), no `alerts` block, and a rule's quiet options
        (`ScopedRule`: `types`, `layers`, `ttl_from`, left out of the dump itself). Any
        other value of these counts like every other field. `forget_commands` without
        confirmation hashes as its `enabled` bool, as it was before it became a block.
        """
        config = self.model_dump(mode="json", exclude={"name", "description"})
        # `forget_commands: true` / `false` hash as the bool they were before the block.
        commands = self.forget_commands
        if (commands.confirm_everything, commands.confirm_within_s) == (False, 120.0):
            config["forget_commands"] = commands.enabled
        if self.promotion == "rules":
            del config["promotion"], config["consolidation"]
        if self.alerts is None:
            del config["alerts"]
        if self.retrieval is None:  # dense only, as before the option existed
            del config["retrieval"]
        blob = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def to_yaml(self) -> str:
        """The full configuration as YAML, which loads back into an equal strategy."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def validate_strategy(
    data: Mapping[str, Any], *, source: str | None, node: yaml.Node | None = None
) -> Strategy:
    """A strategy from plain data; errors carry YAML lines when `node` is given."""
    try:
        return Strategy.model_validate(dict(data))
    except ValidationError as exc:
        raise StrategyError(
            validation_problems(exc, source=source, node=node, model=Strategy)
        ) from None


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Replace the dotted `path` in a strategy's plain data (`Strategy.with_params`)."""
    parts = path.split(".")
    target: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(target, list):
            if not part.isdigit() or int(part) >= len(target):
                message = f"{part!r} is not an index of this list (length {len(target)})"
                raise StrategyError.single(path, message)
            if last:
                target[int(part)] = value
            else:
                target = target[int(part)]
        elif isinstance(target, dict):
            if last:
                target[part] = value
            else:
                if target.get(part) is None:  # switch an absent rule block on
                    target[part] = {}
                target = target[part]
        else:
            message = f"{'.'.join(parts[:depth])} is not a block with parameters"
            raise StrategyError.single(path, message)
