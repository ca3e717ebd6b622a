"""The SLAs: a limit in milliseconds on one percentile of one operation (DESIGN.md:
session 5 ms, STM 50 ms, LTM 200 ms, a whole turn 300 ms, at p95)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sla:
    """A limit in milliseconds on one percentile of one operation."""

    op: str
    limit_ms: float
    percentile: float = 95.0

    def __str__(self) -> str:
        return f"{self.op} p{self.percentile:g} < {self.limit_ms:g} ms"


DEFAULT_SLAS: tuple[Sla, ...] = (
    Sla("session", 5.0),
    Sla("stm", 50.0),
    Sla("ltm", 200.0),
    Sla("turn", 300.0),
)
#: The default SLAs' limits at p95 by layer, in milliseconds.
SLA_MS: dict[str, float] = {sla.op: sla.limit_ms for sla in DEFAULT_SLAS}


def parse_slas(text: str) -> tuple[Sla, ...]:
    """SLAs from "op=ms[@pNN],...", e.g. "session=5,stm=50,turn=300@p99"."""
    slas = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        op, sep, rest = part.partition("=")
        limit, _, pct = rest.partition("@p")
        try:
            if not sep or not op.strip():
                raise ValueError
            sla = Sla(op.strip(), float(limit), float(pct) if pct else 95.0)
        except ValueError:
            raise ValueError(f"SLA {part!r}: expected op=milliseconds[@pNN]") from None
        if not (sla.limit_ms > 0 and 0 < sla.percentile < 100):
            raise ValueError(f"SLA {part!r}: limit must be > 0 and percentile in (0, 100)")
        slas.append(sla)
    return tuple(slas)
