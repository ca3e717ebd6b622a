"""Long-term layer: upsert, get by key, and a turn's retrieval (uncached and cached query).

Each operation is what a turn does under the run's strategy (bench/ops.py): `ltm.upsert`
writes as a promotion does, the value sealed when the strategy encrypts PII (half the
values carry an e-mail address) and with the strategy's deadline for its category;
`ltm.retrieve` embeds the query and retrieves through the forgetting engine (over-fetch
and decay re-rank, access statistics, as the strategy's rules need). On the null backend
they are the bare store calls.

Sizes: one table per size in `--bench-size` (10,000 rows small; 10,000 and 100,000 full;
1,000,000 with `--ltm-1m`), 100 facts per user; each round picks a user at random.
`upsert` writes half the time a new key, half the time a new version of a seeded one,
embedding its fresh text inside the call. SLA: 200 ms at p95.
"""

from __future__ import annotations

import functools
import itertools
import random
from typing import Any

from bench.config import BenchCase
from bench.measure import Measure
from bench.ops import ltm_retrieve, ltm_upsert
from bench.seed import Texts, ltm_key, ltm_user
from reference.models import Category

CACHED_QUERY = "which hotel room do I prefer"


def _params(case: BenchCase, **extra: object) -> dict[str, object]:
    engine = case.system.engine
    return {
        "ltm_rows": case.ltm_rows,
        "facts_per_user": case.per_user,
        "strategy": None if engine is None else engine.strategy.name,
        **extra,
    }


def _op(name: str, case: BenchCase) -> str:
    return name if case.backend == "null" else f"{name}@{case.label}"


def test_ltm_upsert(
    ltm_case: BenchCase, measure: Measure, texts: Texts, rng: random.Random
) -> None:
    fresh_keys = itertools.count()

    def setup() -> tuple[tuple[()], dict[str, Any]]:
        user = rng.randrange(ltm_case.ltm_users)
        if rng.random() < 0.5:
            category, key = ltm_key(rng.randrange(ltm_case.per_user))
        else:
            category, key = Category.PREFERENCE, f"new{next(fresh_keys)}"
        text = texts.fresh("I prefer")
        value = f"{text}, mail {texts.nonce()}@example.com" if rng.random() < 0.5 else text
        kwargs = {"user_id": ltm_user(user), "category": category, "key": key}
        return (), {**kwargs, "value": {"value": value}, "text": text}

    measure(
        _op("ltm.upsert", ltm_case),
        "ltm",
        functools.partial(ltm_upsert, ltm_case.system),
        case=ltm_case,
        setup=setup,
        params=_params(
            ltm_case,
            mix="50% new key, 50% new version; 50% of values with an e-mail address",
            embedding="uncached",
        ),
    )


def test_ltm_get(ltm_case: BenchCase, measure: Measure, rng: random.Random) -> None:
    def setup() -> tuple[tuple[()], dict[str, Any]]:
        user = rng.randrange(ltm_case.ltm_users)
        category, key = ltm_key(rng.randrange(ltm_case.per_user))
        return (), {"user_id": ltm_user(user), "category": category, "key": key}

    measure(
        _op("ltm.get", ltm_case),
        "ltm",
        ltm_case.system.ltm.get,
        case=ltm_case,
        setup=setup,
        params=_params(ltm_case),
    )


def test_ltm_retrieve_uncached(
    ltm_case: BenchCase, measure: Measure, texts: Texts, rng: random.Random
) -> None:
    def setup() -> tuple[tuple[()], dict[str, Any]]:
        user = ltm_user(rng.randrange(ltm_case.ltm_users))
        return (), {"user_id": user, "text": texts.fresh("What do I prefer for"), "k": 5}

    measure(
        _op("ltm.retrieve[uncached]", ltm_case),
        "ltm",
        functools.partial(ltm_retrieve, ltm_case.system),
        case=ltm_case,
        setup=setup,
        params=_params(ltm_case, query_embedding="uncached", k=5),
    )


def test_ltm_retrieve_cached(ltm_case: BenchCase, measure: Measure, rng: random.Random) -> None:
    def setup() -> tuple[tuple[()], dict[str, Any]]:
        user = ltm_user(rng.randrange(ltm_case.ltm_users))
        return (), {"user_id": user, "text": CACHED_QUERY, "k": 5}

    measure(
        _op("ltm.retrieve[cached]", ltm_case),
        "ltm",
        functools.partial(ltm_retrieve, ltm_case.system),
        case=ltm_case,
        setup=setup,
        params=_params(ltm_case, query_embedding="cached", k=5),
    )
