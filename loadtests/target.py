"""A memory service that speaks the HTTP contract (docs/serve.md), seen from the load.

`memharness load --target URL` drives such a service instead of an in-process memory.
This module holds what the load needs of it besides the Locust user
(`loadtests/http_user.py`): the health check before the run (`check_target`), the
service time a response reports (`Server-Timing: app;dur=<ms>`, `service_ms`), the
error a non-200 response means (`ServiceError`), and a plain client (`TargetClient`,
one `requests.Session`) for what happens outside the timed load: the warm-up, the
calibration of `--rates auto`, the erasure of the run's users and its check.

The API key travels in the environment (`MEMH_API_KEY`), never on a command line, so it
is not in the process list nor in the command `memharness load` echoes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from memharness.load_contract import API_KEY_ENV

__all__ = [
    "HEALTH_TIMEOUT_S",
    "ServiceError",
    "TargetClient",
    "check_target",
    "check_target_url",
    "error_of",
    "service_ms",
]

HEALTH_TIMEOUT_S = 10.0
#: Outside the timed load (warm-up, erasure): a request that takes longer is a failure.
REQUEST_TIMEOUT_S = 60.0
_APP_DUR = re.compile(r"(?:^|,)\s*app\s*;(?:[^,]*;)?\s*dur\s*=\s*\"?([0-9]+(?:\.[0-9]+)?)")


class ServiceError(Exception):
    """A response other than 200: its status, the contract's error code, field and message."""

    def __init__(self, status: int, code: str, field: str | None, message: str) -> None:
        where = f" ({field})" if field else ""
        super().__init__(f"HTTP {status} {code}{where}: {message}")
        self.status = status
        self.code = code
        self.field = field


def error_of(status: int, body: bytes | str | None) -> ServiceError:
    """The `ServiceError` of a failed response, from the contract's error body when it
    has one (`{"error": {"code", "field", "message"}}`), else from its first bytes."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        import json

        error = json.loads(text)["error"]
        return ServiceError(
            status, str(error.get("code")), error.get("field"), str(error.get("message"))
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return ServiceError(status, "http", None, " ".join(text.split())[:200] or "(no body)")


def service_ms(headers: Mapping[str, str]) -> float | None:
    """The service's own time for a request, `Server-Timing: app;dur=<ms>`; None when
    the response has no such metric (the split into service and network is then unknown)."""
    header = headers.get("Server-Timing") or headers.get("server-timing")
    if not header:
        return None
    match = _APP_DUR.search(header)
    return float(match.group(1)) if match else None


def check_target_url(url: str) -> str:
    """`url` without a trailing slash, when it is http(s)://host[:port][/path]; raises
    ValueError saying what is wrong otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r}: expected http://HOST:PORT or https://HOST[:PORT]")
    if parts.query or parts.fragment:
        raise ValueError(f"{url!r}: a base URL has no query or fragment")
    try:
        parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
    except ValueError:
        raise ValueError(f"{url!r}: the port is not a number in 1-65535") from None
    return url.strip().rstrip("/")


def check_target(url: str, key: str, *, timeout_s: float = HEALTH_TIMEOUT_S) -> str | None:
    """GET URL/v1/health with the key: None when the service answers 200, else what is
    wrong, in words a user can act on (nothing listens, the key was refused, ...)."""
    try:
        response = requests.get(
            f"{url}/v1/health", headers=_auth(key), timeout=timeout_s, allow_redirects=False
        )
    except requests.exceptions.ConnectionError as exc:
        if isinstance(exc, requests.exceptions.SSLError):
            return f"{url}: TLS failed: {exc}"
        return f"nothing listens at {url} (connection refused or host unreachable)"
    except requests.exceptions.Timeout:
        return f"{url}/v1/health did not answer within {timeout_s:g} s"
    if response.status_code == 401:
        return f"the key was refused by {url} (401 on /v1/health): check --api-key / {API_KEY_ENV}"
    if response.status_code != 200:
        return (
            f"{url}/v1/health answered {error_of(response.status_code, response.content)}: "
            "is this a memory service speaking the contract (docs/serve.md)?"
        )
    return None


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class TargetClient:
    """The service at `url` with `key`, for the calls outside the timed load."""

    url: str
    key: str

    def __post_init__(self) -> None:
        self.session = requests.Session()
        self.session.headers.update(_auth(self.key))

    @classmethod
    def from_env(cls, url: str) -> TargetClient:
        """The service at `url` with the key of `MEMH_API_KEY` (raises ValueError if unset)."""
        key = os.environ.get(API_KEY_ENV, "")
        if not key:
            raise ValueError(f"{API_KEY_ENV} is not set: the service needs an API key")
        return cls(check_target_url(url), key)

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """One request; its JSON body, or ServiceError for a status other than 200."""
        response = self.session.request(
            method, f"{self.url}{path}", json=body, timeout=REQUEST_TIMEOUT_S
        )
        if response.status_code != 200:
            raise error_of(response.status_code, response.content)
        return response.json()

    def turn(self, *, user_id: str, session_id: str, text: str) -> Any:
        return self.call(
            "POST", "/v1/turn", {"user_id": user_id, "session_id": session_id, "text": text}
        )

    def delete_user_data(self, *, user_id: str) -> Any:
        return self.call("DELETE", f"/v1/users/{user_id}")

    def recall(self, *, user_id: str, session_id: str, query: str, k: int = 5) -> Any:
        body = {"user_id": user_id, "session_id": session_id, "query": query, "k": k}
        return self.call("POST", "/v1/recall", body)

    def close(self) -> None:
        self.session.close()
