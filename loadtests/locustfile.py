"""Locust load test of the reference memory, in-process: scripted conversations, per layer.

Each Locust process that runs users (a local run, or each worker) builds one
`MemorySystem` from `Settings()` (MEMH_* variables: embedded real servers by default,
external ones by URL) on a `SystemClock`, warms it up, and shares it among its users.
Every turn fires one Locust request event per layer ("layer": session, pii, embed, stm,
ltm, promotion) and one for the whole turn ("turn"), timed inside `MemorySystem.turn`;
in open-loop mode also "turn@intended", the response time from the turn's intended start.
Every event also goes into an HDR histogram (microseconds), which workers ship to the
master; the master (or the local runner) prints the HDR table, writes
reports/<run-id>/load_hdr.json and checks the SLAs at exit: exit code 3 names each
broken SLA. See docs/load.md.

    locust -f loadtests/locustfile.py --headless -u 20 -r 20 -t 60s
    locust -f loadtests/locustfile.py --headless -u 20 -r 20 -t 60s --open-loop --rate 50
    MEMH_LOAD_STEPS=10x30s,50x30s locust -f loadtests/locustfile.py --headless
    MEMH_LOAD_RATES=auto MEMH_LOAD_STEP_S=20 locust -f loadtests/locustfile.py --headless \
        -u 16 -r 16 --open-loop --rate 1

With MEMH_LOAD_RATES (rate steps, `loadtests/steps.py`), arrivals are open loop at each
offered rate in turn, and the run also writes reports/<run-id>/steps.json: per step the
offered and achieved rate, per-operation HDR histograms and each process's CPU and RSS.
"""

from loadtests import listeners  # noqa: F401  (registers the event listeners)
from loadtests.run import RateStepShape, StepShape
from loadtests.user import ConversationUser

__all__ = ["ConversationUser", "RateStepShape", "StepShape"]
