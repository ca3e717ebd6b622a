"""Short-term layer: add, and query with an uncached and a cached query embedding.

`query` is measured read-only (touch=False), the path a turn takes unless its strategy
reads access statistics (sliding window, importance, decay); `query+touch` adds the
access write those strategies need (one Chroma metadata update).

Sizes: 1,000 records in the measured session; 5,000 (small) or 100,000 (full) in the
collection, the others in sessions of 20 records of other users. `add` embeds its text
(fresh, so uncached) inside the call, as a caller without a vector would; it grows the
measured session by one record per round. SLA: 50 ms at p95.
"""

from __future__ import annotations

import functools

from bench.config import STM_SESSION, STM_USER, BenchCase, BenchConfig
from bench.measure import Measure
from bench.seed import Texts
from reference.models import Hit, MemoryRecord

CACHED_QUERY = "Please remember the aisle seat on the morning flight"


def _params(config: BenchConfig, **extra: object) -> dict[str, object]:
    return {
        "stm_session_records": config.sizes.stm_session,
        "stm_collection_records": config.sizes.stm_collection,
        **extra,
    }


def test_stm_add(
    measure: Measure, case: BenchCase, texts: Texts, bench_config: BenchConfig
) -> None:
    add = functools.partial(
        case.system.stm.add, user_id=STM_USER, session_id=STM_SESSION, force=True
    )
    measure(
        "stm.add",
        "stm",
        add,
        case=case,
        setup=lambda: ((), {"text": texts.fresh()}),
        params=_params(bench_config, embedding="uncached, inside the call"),
    )


def _query(case: BenchCase, *, touch: bool) -> functools.partial[list[Hit[MemoryRecord]]]:
    return functools.partial(
        case.system.stm.query, user_id=STM_USER, session_id=STM_SESSION, k=5, touch=touch
    )


def test_stm_query_uncached(
    measure: Measure, case: BenchCase, texts: Texts, bench_config: BenchConfig
) -> None:
    query = _query(case, touch=False)
    measure(
        "stm.query[uncached]",
        "stm",
        query,
        case=case,
        setup=lambda: ((), {"text": texts.fresh("Where is")}),
        params=_params(bench_config, query_embedding="uncached", k=5),
    )


def test_stm_query_cached(measure: Measure, case: BenchCase, bench_config: BenchConfig) -> None:
    measure(
        "stm.query[cached]",
        "stm",
        _query(case, touch=False),
        case=case,
        setup=lambda: ((), {"text": CACHED_QUERY}),
        params=_params(bench_config, query_embedding="cached", k=5),
    )


def test_stm_query_with_touch(measure: Measure, case: BenchCase, bench_config: BenchConfig) -> None:
    measure(
        "stm.query+touch[cached]",
        "stm",
        _query(case, touch=True),
        case=case,
        setup=lambda: ((), {"text": CACHED_QUERY}),
        params=_params(bench_config, query_embedding="cached", k=5, touch=True),
    )
