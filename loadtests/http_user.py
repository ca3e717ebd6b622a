"""The Locust user of `memharness load --target URL`: the same conversations and scenario
timelines as `ConversationUser`, played over HTTP against a service speaking the contract.

Only the calls differ (`loadtests/user.py` keeps the plan: which user says what, when, and
the pacing): a turn is POST /v1/turn, a probe POST /v1/recall, a business event POST
/v1/events, each with the tenant's key as a bearer token. Per call it records

- the round trip as the client sees it, under the operation's name (`turn`, `recall`,
  `event`): the SLAs judge this, what a caller of the service waits for;
- the service's own time, `Server-Timing: app;dur=<ms>`, as `<op>.service`;
- the rest, round trip - service, as `<op>.network`: the wire, the HTTP stack on both
  ends (the client library's encoding and parsing included) and any proxy in between.

A turn's layers (session, pii, embed, stm, ltm, promotion) come from the response's
`timings_ms` when the service reports them (the reference's service does); a service
that does not report them has no layer rows, and a layer SLA on it has no data.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from locust import HttpUser

from loadtests.target import ServiceError, error_of, service_ms
from loadtests.timelines import session_of
from loadtests.user import ConversationUser
from memharness.scenarios.model import ProbeStep
from reference.turns import TIMING_KEYS

__all__ = ["Exchange", "HttpConversationUser"]

#: The layers a turn's `timings_ms` may report (the whole turn is the round trip here).
LAYER_KEYS = tuple(key for key in TIMING_KEYS if key != "turn")


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and its answer: the JSON body (None on failure), the error, the round
    trip and the service's own time (None when the response reports none)."""

    payload: Any
    error: Exception | None
    round_trip_ms: float
    service_ms: float | None


class HttpConversationUser(ConversationUser, HttpUser):
    """A `ConversationUser` whose calls go to the service at Locust's --host."""

    def on_start(self) -> None:
        super().on_start()
        target = self.load.target
        assert target is not None, "the target is set at init in every process with users"
        self.client.headers["Authorization"] = f"Bearer {target.key}"

    def _exchange(self, method: str, path: str, body: dict[str, Any]) -> Exchange:
        """One call to the service, timed from the request's start to its body's end."""
        started = time.perf_counter()
        with self.client.request(method, path, json=body, catch_response=True) as response:
            round_trip = (time.perf_counter() - started) * 1000.0
            error: Exception | None = None
            payload: Any = None
            if response.status_code == 0:  # no answer: Locust keeps the requests error
                error = ConnectionError(f"{self.host}{path}: {response.error}")
            elif response.status_code != 200:
                error = error_of(response.status_code, response.content)
            else:
                try:
                    payload = response.json()
                except ValueError:
                    error = ServiceError(200, "not-json", None, "the body is not JSON")
            if error is None:
                response.success()
            else:
                response.failure(error)
            return Exchange(payload, error, round_trip, service_ms(response.headers))

    def _fire_split(self, op: str, call: Exchange) -> None:
        """The service's time and the network's, when the service reported its own."""
        if call.service_ms is not None:
            self._fire("op", f"{op}.service", call.service_ms)
            self._fire("op", f"{op}.network", max(0.0, call.round_trip_ms - call.service_ms))

    def _turn(
        self, text: str, session_id: str, metadata: dict[str, Any] | None = None
    ) -> Exception | None:
        """POST /v1/turn; fires the round trip as `turn`, its split and the layers the
        service reports. A failure is fired as a failed turn and returned."""
        body: dict[str, Any] = {"user_id": self.user_id, "session_id": session_id, "text": text}
        if metadata:
            body["metadata"] = metadata
        ready = time.perf_counter()
        with self.load.turn_slot:
            started = time.perf_counter()
            call = self._exchange("POST", "/v1/turn", body)
            finished = time.perf_counter()
        self._fire("turn", "turn", call.round_trip_ms, call.error)
        if call.error is None:
            self._fire_split("turn", call)
            timings = call.payload.get("timings_ms") if isinstance(call.payload, dict) else None
            for key in LAYER_KEYS:
                value = (timings or {}).get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    self._fire("layer", key, float(value))
        self._fire_queued(ready, started, finished, call.error)
        return call.error

    def _timed_call(self, name: str, step: Any) -> None:
        """A probe (POST /v1/recall) or a business event (POST /v1/events), timed as
        `recall` or `event` with their split."""
        if isinstance(step, ProbeStep):
            body: dict[str, Any] = {
                "user_id": self.user_id,
                "session_id": session_of(self.user_id, step),
                "query": step.probe,
                "k": step.k,
            }
            call = self._exchange("POST", "/v1/recall", body)
        else:
            body = {"name": step.event, "user_id": self.user_id, "payload": dict(step.payload)}
            call = self._exchange("POST", "/v1/events", body)
        self._fire("op", name, call.round_trip_ms, call.error)
        if call.error is None:
            self._fire_split(name, call)
