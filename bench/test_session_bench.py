"""Session layer: get (slides the TTL), append_message (updates the context window), create.

Sizes: `sessions` live sessions seeded (1,000 small, 10,000 full); each round picks one
of them at random (setup, untimed). SLA: 5 ms at p95.
"""

from __future__ import annotations

import itertools
import random
import uuid

from bench.config import BenchCase
from bench.measure import Measure


def test_session_get(measure: Measure, case: BenchCase, rng: random.Random) -> None:
    def setup() -> tuple[tuple[()], dict[str, str]]:
        user_id, session_id = rng.choice(case.sessions)
        return (), {"user_id": user_id, "session_id": session_id}

    measure(
        "session.get",
        "session",
        case.system.session.get,
        case=case,
        setup=setup,
        params={"sessions": len(case.sessions)},
    )


def test_session_append_message(measure: Measure, case: BenchCase, rng: random.Random) -> None:
    def setup() -> tuple[tuple[()], dict[str, str]]:
        user_id, session_id = rng.choice(case.sessions)
        return (), {"user_id": user_id, "session_id": session_id, "message_id": uuid.uuid4().hex}

    measure(
        "session.append_message",
        "session",
        case.system.session.append_message,
        case=case,
        setup=setup,
        params={"sessions": len(case.sessions), "window": case.system.session.window},
    )


def test_session_create(measure: Measure, case: BenchCase) -> None:
    counter = itertools.count()

    def setup() -> tuple[tuple[()], dict[str, str]]:
        index = next(counter)
        return (), {"user_id": f"nu{index % 100}", "session_id": f"new{index}"}

    measure(
        "session.create",
        "session",
        case.system.session.create,
        case=case,
        setup=setup,
        params={"sessions": len(case.sessions)},
    )
