"""The whole turn (`MemorySystem.turn`): session, PII, embedding, STM query + add, LTM query,
promotion; with fresh utterances (uncached embedding) and with a repeated few (cached).

The turn runs in the measured STM session (1,000 records) of a user with 100 LTM facts,
so its retrieval sees the stated data sizes. The uncached run also reports the turn's own
per-layer timings (`TurnResult.timings_ms`), each checked against its layer's SLA: a turn
that meets 300 ms on average of layers can still break one layer's SLA. SLA: 300 ms.
"""

from __future__ import annotations

import itertools

from bench.config import STM_SESSION, STM_USER, BenchCase, BenchConfig
from bench.measure import Measure, OpSamples, Recorder
from bench.seed import Texts

#: Layer of each timing of a turn; "embed", "pii" and "promotion" have no SLA of their own.
BREAKDOWN = {"session": "session", "stm": "stm", "ltm": "ltm", "embed": "embed", "pii": "pii"}


def _params(config: BenchConfig, **extra: object) -> dict[str, object]:
    return {
        "stm_session_records": config.sizes.stm_session,
        "ltm_rows": config.ltm_rows[0],
        "ltm_facts_of_user": config.sizes.ltm_facts_per_user,
        **extra,
    }


def test_turn_uncached(
    measure: Measure,
    case: BenchCase,
    texts: Texts,
    bench_config: BenchConfig,
    recorder: Recorder,
) -> None:
    timings: list[dict[str, float]] = []

    def turn(text: str) -> None:
        result = case.system.turn(user_id=STM_USER, session_id=STM_SESSION, text=text)
        timings.append(result.timings_ms)

    params = _params(bench_config, query_embedding="uncached")
    whole = measure(
        "turn[uncached]",
        "turn",
        turn,
        case=case,
        setup=lambda: ((texts.utterance(),), {}),
        params=params,
    )
    measured = timings[bench_config.warmup :]
    for key, layer in BREAKDOWN.items():
        recorder.add(
            OpSamples(
                op=f"turn[uncached].{key}",
                layer=layer,
                backend=case.backend,
                samples_ms=[t[key] for t in measured],
                params={**params, "from": "TurnResult.timings_ms"},
                probe_ms=whole.probe_ms,  # measured with the turn: the same machine
            )
        )


def test_turn_cached(
    measure: Measure, case: BenchCase, texts: Texts, bench_config: BenchConfig
) -> None:
    # Fewer utterances than warm-up rounds: every measured round hits the cache.
    pool = [texts.utterance() for _ in range(min(10, bench_config.warmup))]
    cycle = itertools.cycle(pool)
    measure(
        "turn[cached]",
        "turn",
        lambda text: case.system.turn(user_id=STM_USER, session_id=STM_SESSION, text=text),
        case=case,
        setup=lambda: ((next(cycle),), {}),
        params=_params(bench_config, query_embedding="cached", distinct_utterances=len(pool)),
    )
