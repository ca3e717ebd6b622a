"""A short scripted conversation through the four layers, printed turn by turn.

It runs on a virtual clock so the forgetting part (session and STM expiry) shows in a
second instead of an hour. Each run starts by erasing the demo user from every layer,
so it can be repeated on the same embedded servers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reference.clock import VirtualClock, format_ts
from reference.factory import build_memory_system, describe_backends
from reference.ltm.base import LtmFilter
from reference.models import Fact
from reference.settings import Settings
from reference.stm.base import StmFilter
from reference.system import TIMING_KEYS, MemorySystem, TurnResult

DEMO_USER = "demo-alice"
T0 = 1_767_258_000.0  # 2026-01-01T09:00:00Z


@dataclass(frozen=True, slots=True)
class Step:
    """One utterance at an offset (seconds) from the start, in a named session."""

    offset_s: float
    session_id: str
    text: str


SCRIPT: tuple[Step, ...] = (
    Step(0, "s1", "Hi there!"),
    Step(20, "s1", "Please book a table for two at 7pm tomorrow at Luigi's."),
    Step(45, "s1", "My email is alice@example.com and my phone is 13812345678."),
    Step(70, "s1", "I always want deliveries by SF Express."),
    Step(95, "s1", "今天天气真好"),
    Step(120, "s1", "我的地址是上海市浦东新区世纪大道100号"),
    Step(150, "s1", "What time did I book the table for?"),
    # Two hours later: the session (30 min) and the STM records (1 h) have expired.
    Step(7350, "s2", "How should my parcel be delivered?"),
    Step(7380, "s2", "我的地址改成北京市海淀区中关村大街1号"),
    Step(7400, "s2", "Where do I live?"),
)


def run_demo(settings: Settings, echo: Callable[[str], None] = print) -> list[TurnResult]:
    """Play `SCRIPT` through a freshly built memory system and print what each layer did."""
    clock = VirtualClock(T0)
    system = build_memory_system(settings, clock=clock)
    try:
        system.delete_user_data(user_id=DEMO_USER)
        echo("memharness demo: one user, two sessions, on a virtual clock")
        for layer, where in describe_backends(settings).items():
            echo(f"  {layer:8} {where}")
        echo(f"  embedder {system.embedder.name}")
        results = [_play(system, step, echo) for step in SCRIPT]
        _print_forgetting(system, results, echo)
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
    if result.stm.accepted:
        assert result.stm.record is not None
        echo(f"  stm      stored as {result.stm.record.type} ({result.stm.reason})")
    else:
        echo(f"  stm      not stored: {result.stm.reason}")
    for stm_hit in result.stm_hits[:3]:
        echo(f"           recalled {stm_hit.score:.2f}  {stm_hit.record.text}")
    for ltm_hit in result.ltm_hits[:3]:
        echo(f"  ltm      recalled {ltm_hit.score:.2f}  {_describe(ltm_hit.record)}")
    if result.promoted is not None:
        echo(f"  ltm      promoted {_describe(result.promoted)}")
    return result


def _print_forgetting(
    system: MemorySystem, results: list[TurnResult], echo: Callable[[str], None]
) -> None:
    first = results[0]
    echo("")
    echo("forgetting (expiry on the virtual clock, checked lazily on read):")
    expired = system.session.peek(user_id=DEMO_USER, session_id=first.session_id)
    echo(f"  session s1 after 2 h idle: {'expired' if expired is None else 'still live'}")
    old = system.stm.records(filter=StmFilter(user_id=DEMO_USER, session_id=first.session_id))
    echo(f"  stm records of s1 still returned: {len(old)}")
    facts = system.ltm.facts(filter=LtmFilter(user_id=DEMO_USER))
    for fact in facts:
        echo(f"  ltm keeps {_describe(fact)}")
    echo(f"  footprint now: {system.footprint()}")


def _print_timings(results: list[TurnResult], echo: Callable[[str], None]) -> None:
    echo("")
    echo("per-layer timings, ms (first turn includes connection warm-up):")
    echo("  turn  " + "".join(f"{key:>10}" for key in TIMING_KEYS))
    for index, result in enumerate(results, start=1):
        echo(f"  {index:>4}  " + "".join(f"{result.timings_ms[key]:>10.2f}" for key in TIMING_KEYS))


def _describe(fact: Fact) -> str:
    return f"{fact.category}/{fact.key} v{fact.version}: {fact.value['value']}"
