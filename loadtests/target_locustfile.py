"""Locust load test of a memory service over HTTP (`memharness load --target URL`).

The same conversations, scenario timelines, pacing, shapes, SLAs and reports as
`loadtests/locustfile.py`; the users are `HttpConversationUser`s posting /v1/turn,
/v1/recall and /v1/events to Locust's --host with the key of MEMH_API_KEY (the HTTP
contract: docs/load.md, "Load-testing your own memory service"). Each call's round trip,
the service's own time (Server-Timing) and the network's are recorded apart.

    MEMH_API_KEY=... locust -f loadtests/target_locustfile.py --headless \\
        --host http://127.0.0.1:8080 -u 10 -r 10 -t 60s
"""

from loadtests import listeners  # noqa: F401  (registers the event listeners)
from loadtests.http_user import HttpConversationUser
from loadtests.run import RateStepShape, StepShape

__all__ = ["HttpConversationUser", "RateStepShape", "StepShape"]
