"""Short-term layer: add, and a turn's retrieval with an uncached and a cached query.

Each operation is what a turn does under the run's strategy (bench/ops.py): `stm.add`
stores the record with the strategy's deadline for its type; `stm.retrieve` embeds the
query (through the cache) and retrieves through the forgetting engine, which over-fetches
and re-ranks under a decay rule and writes the access statistics when a rule reads them
(sliding window, importance, decay). Under hybrid neither applies: the retrieval is one
read. On the null backend both are the bare store calls.

Sizes: 1,000 records in the measured session; 5,000 (small) or 100,000 (full) in the
collection, the others in sessions of 20 records of other users. `add` embeds its text
(fresh, so uncached) inside the call, as a caller without a vector would; it grows the
measured session by one record per round. SLA: 50 ms at p95.
"""

from __future__ import annotations

import functools

from bench.config import STM_SESSION, STM_USER, BenchCase, BenchConfig
from bench.measure import Measure
from bench.ops import stm_add, stm_retrieve
from bench.seed import Texts
from reference.models import Hit, MemoryRecord

CACHED_QUERY = "Please remember the aisle seat on the morning flight"


def _params(config: BenchConfig, case: BenchCase, **extra: object) -> dict[str, object]:
    engine = case.system.engine
    return {
        "stm_session_records": config.sizes.stm_session,
        "stm_collection_records": config.sizes.stm_collection,
        "strategy": None if engine is None else engine.strategy.name,
        **extra,
    }


def test_stm_add(
    measure: Measure, case: BenchCase, texts: Texts, bench_config: BenchConfig
) -> None:
    add = functools.partial(stm_add, case.system, user_id=STM_USER, session_id=STM_SESSION)
    measure(
        "stm.add",
        "stm",
        add,
        case=case,
        setup=lambda: ((), {"text": texts.fresh()}),
        params=_params(bench_config, case, embedding="uncached, inside the call"),
    )


def _retrieve(case: BenchCase) -> functools.partial[list[Hit[MemoryRecord]]]:
    return functools.partial(
        stm_retrieve, case.system, user_id=STM_USER, session_id=STM_SESSION, k=5
    )


def test_stm_retrieve_uncached(
    measure: Measure, case: BenchCase, texts: Texts, bench_config: BenchConfig
) -> None:
    measure(
        "stm.retrieve[uncached]",
        "stm",
        _retrieve(case),
        case=case,
        setup=lambda: ((), {"text": texts.fresh("Where is")}),
        params=_params(bench_config, case, query_embedding="uncached", k=5),
    )


def test_stm_retrieve_cached(measure: Measure, case: BenchCase, bench_config: BenchConfig) -> None:
    measure(
        "stm.retrieve[cached]",
        "stm",
        _retrieve(case),
        case=case,
        setup=lambda: ((), {"text": CACHED_QUERY}),
        params=_params(bench_config, case, query_embedding="cached", k=5),
    )
