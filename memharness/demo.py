"""A short scripted conversation through the four layers, printed turn by turn.

It runs on a virtual clock under one strategy (default `hybrid`), so the forgetting layer
shows in a second: PII masked and sealed, a forget command, a business event, expiry of
the session and of short-term memory, and a sweep with its statistics. Each run starts by
erasing the demo user from every layer, so it can be repeated on the same servers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import SecretStr

from reference.clock import VirtualClock, format_ts
from reference.crypto import generate_key
from reference.factory import build_memory_system, describe_backends, resolve_strategy
from reference.ltm.filters import LtmFilter
from reference.models import Event, Fact
from reference.settings import Settings
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.turns import TIMING_KEYS, TurnResult

DEMO_USER = "demo-alice"
T0 = 1_767_258_000.0  # 2026-01-01T09:00:00Z
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Step:
    """One utterance at an offset (seconds) from the start, in a named session."""

    offset_s: float
    session_id: str
    text: str


@dataclass(frozen=True, slots=True)
class BusinessEvent:
    """A business event (e.g. the user edited their profile in the app) at an offset."""

    offset_s: float
    name: str
    payload: dict[str, object]


SCRIPT: tuple[Step | BusinessEvent, ...] = (
    Step(0, "s1", "Hi there!"),
    Step(20, "s1", "Please book a table for two at 7pm tomorrow at Luigi's."),
    Step(45, "s1", "My email is alice@example.com"),
    Step(60, "s1", "My phone is 13812345678"),
    Step(70, "s1", "I always want deliveries by SF Express."),
    Step(95, "s1", "今天天气真好"),
    Step(120, "s1", "我的地址是上海市浦东新区世纪大道100号"),
    Step(150, "s1", "What time did I book the table for?"),
    Step(170, "s1", "Forget my email"),
    # Two hours later: the session (30 min) and the STM records (1 h) have expired.
    Step(2 * HOUR + 150, "s2", "How should my parcel be delivered?"),
    # The user changed their address in the app: the remembered address is now stale.
    BusinessEvent(2 * HOUR + 160, "profile_updated", {"fields": ["address"]}),
    Step(2 * HOUR + 180, "s2", "我的地址改成北京市海淀区中关村大街1号"),
    Step(2 * HOUR + 200, "s2", "What is my email address?"),
)


def run_demo(
    settings: Settings, *, strategy: str = "hybrid", echo: Callable[[str], None] = print
) -> list[TurnResult]:
    """Play `SCRIPT` through a freshly built memory system and print what each layer did."""
    chosen = resolve_strategy(strategy, settings)
    if chosen.pii is not None and chosen.pii.encrypt_ltm and settings.encryption_key is None:
        # A real deployment must configure MEMH_ENCRYPTION_KEY (build refuses without one);
        # the demo seals with a throwaway key so it runs on a fresh checkout.
        settings = settings.model_copy(update={"encryption_key": SecretStr(generate_key())})
        echo("(demo: sealing PII with a throwaway key; set MEMH_ENCRYPTION_KEY in real use)")
    clock = VirtualClock(T0)
    system = build_memory_system(settings, clock=clock, strategy=chosen)
    try:
        system.delete_user_data(user_id=DEMO_USER)
        echo(f"memharness demo: one user, two sessions, virtual clock, strategy {chosen.name}")
        for layer, where in describe_backends(settings).items():
            echo(f"  {layer:8} {where}")
        echo(f"  embedder {system.embedder.name}")
        results = []
        for step in SCRIPT:
            if isinstance(step, BusinessEvent):
                _publish(system, step, echo)
            else:
                results.append(_play(system, step, echo))
        _show_forgetting(system, echo)
        _print_timings(results, echo)
        return results
    finally:
        system.dispose()


def _play(system: MemorySystem, step: Step, echo: Callable[[str], None]) -> TurnResult:
    before = system.session.peek(user_id=DEMO_USER, session_id=step.session_id)
    result = system.turn(
        user_id=DEMO_USER, session_id=step.session_id, text=step.text, at=T0 + step.offset_s
    )
    echo("")
    echo(f"[{format_ts(result.at)}] {step.session_id} > {step.text}")
    opened = "opened" if before is None else "continued"
    echo(f"  session  {opened}; window (newest first): {len(result.context_ids)} message ids")
    if result.masked_text != step.text:
        echo(f"  pii      masked as: {result.masked_text}")
    if result.forgotten is not None:
        report = result.forgotten
        echo(
            f"  forget   {report.scope} {report.topic or ''}: removed {len(report.stm_removed)} "
            f"STM records, erased {len(report.ltm_erased)} facts "
            f"(audit values redacted for keys {sorted(report.keys)})"
        )
    elif result.stm.accepted:
        assert result.stm.record is not None
        echo(f"  stm      stored as {result.stm.record.type} ({result.stm.reason})")
    else:
        echo(f"  stm      not stored: {result.stm.reason}")
    if result.reply is not None:
        echo(f"  reply    {result.reply}")
    for stm_hit in result.stm_hits[:3]:
        echo(f"           recalled {stm_hit.score:.2f}  {stm_hit.record.text}")
    for ltm_hit in result.ltm_hits[:3]:
        echo(f"  ltm      recalled {ltm_hit.score:.2f}  {_describe(ltm_hit.record)}")
    if result.promoted is not None:
        echo(f"  ltm      promoted {_describe(result.promoted)}")
    return result


def _publish(system: MemorySystem, step: BusinessEvent, echo: Callable[[str], None]) -> None:
    at = T0 + step.offset_s
    event = Event(name=step.name, user_id=DEMO_USER, at=at, payload=dict(step.payload))
    outcome = system.handle_event(event, at=at)
    echo("")
    echo(f"[{format_ts(at)}] event {step.name} {step.payload}")
    echo(
        f"  events   {outcome.ltm_archived} facts archived, {outcome.ltm_deleted} deleted, "
        f"{outcome.stm_removed} STM records removed"
    )


def _show_forgetting(system: MemorySystem, echo: Callable[[str], None]) -> None:
    echo("")
    echo("forgetting layer:")
    expired = system.session.peek(user_id=DEMO_USER, session_id="s1")
    echo(f"  session s1 after 2 h idle: {'expired' if expired is None else 'still live'}")
    kept = system.stm.records(filter=StmFilter(user_id=DEMO_USER, session_id="s1"))
    kinds = sorted({str(record.type) for record in kept})
    echo(
        f"  stm records of s1 still returned: {len(kept)} {kinds} "
        "(the rest expired by their type's TTL, before any sweep)"
    )
    stats = system.sweep(at=system.clock.now() + 2 * 24 * HOUR)
    echo(
        f"  sweep 2 days later: examined {stats.examined}, expired {stats.expired}, "
        f"archived {stats.archived}, anonymised {stats.anonymised}, deleted {stats.deleted}"
    )
    for fact in system.ltm.facts(filter=LtmFilter(user_id=DEMO_USER, include_dead=True)):
        echo(f"  ltm now  [{fact.status}] {_describe(fact)}")
    echo(f"  footprint now: {system.footprint()}")


def _print_timings(results: list[TurnResult], echo: Callable[[str], None]) -> None:
    echo("")
    echo("per-layer timings, ms (the first turn includes connection and model warm-up):")
    echo("  turn  " + "".join(f"{key:>10}" for key in TIMING_KEYS))
    for index, result in enumerate(results, start=1):
        cells = "".join(f"{result.timings_ms.get(key, 0.0):>10.2f}" for key in TIMING_KEYS)
        echo(f"  {index:>4}  {cells}")


def _describe(fact: Fact) -> str:
    shown = {k: v for k, v in fact.value.items() if not k.startswith("_")}
    value = shown.get("value", shown)
    return f"{fact.category}/{fact.key} v{fact.version}: {value}"
