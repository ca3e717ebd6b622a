"""The FastAPI app of `memharness serve`: routes of docs/http-api.md over a `MemoryService`.

Every request passes `Guard` (a plain ASGI middleware) before any route:

1. the clock starts: every response, errors included, carries
   `Server-Timing: app;dur=<ms>`, the time from the request reaching the app to its
   response's headers;
2. authentication: `Authorization: Bearer <key>` must be a valid, unrevoked key
   (`memharness.serve.auth`); otherwise 401, before the body is read and before any
   store is touched (the OpenAPI schema and /docs are behind it too);
3. the body limit: a `Content-Length` over `max_body_bytes` is refused with 413 before
   a byte is read; a body sent without a length (chunked) is read up to the limit and
   refused with 413 the moment it passes it. Only then is it parsed.

Then FastAPI parses the JSON into strict models (malformed JSON: 400; a wrong type, a
missing or unknown field: 422 naming it) and the service checks values with the
reference's own validation (422 naming the field). Errors have one shape:
`{"error": {"code", "field", "message"}}`.

The system's calls are synchronous: each runs in a worker thread, at most `threads` at
once (an anyio capacity limiter), so concurrent requests overlap their waits on the
stores and meet in the embedding batcher.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memharness.serve.auth import KeyStore
from memharness.serve.cleanup import FileCleanup
from memharness.serve.models import (
    DeleteUserResponse,
    ErrorResponse,
    EventRequest,
    EventResponse,
    ForgetRequest,
    ForgetResponse,
    HealthResponse,
    RecallRequest,
    RecallResponse,
    TurnRequest,
    TurnResponse,
)
from memharness.serve.pending import Pending
from memharness.serve.service import MemoryService
from reference.errors import BackendUnavailable, InvalidInput
from reference.system import MemorySystem

__all__ = ["DEFAULT_MAX_BODY_BYTES", "Guard", "create_app"]

log = logging.getLogger("memharness.serve")

DEFAULT_MAX_BODY_BYTES = 64 * 1024
T = TypeVar("T")


def error_body(code: str, field: str | None, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "field": field, "message": message}}


class Guard:
    """Server-Timing, authentication and the body limit, in that order (see module)."""

    def __init__(self, app: ASGIApp, *, keys: KeyStore, max_body_bytes: int) -> None:
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - started) * 1000.0
                headers = list(message.get("headers", []))
                headers.append((b"server-timing", f"app;dur={ms:.3f}".encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            tenant = self.keys.tenant_of(_bearer(scope))
        except InvalidInput as exc:
            # A keys file that cannot be read: fail closed, every keyed request 503.
            log.error("serve: the keys file cannot be read, refusing every request: %s", exc)
            body = error_body(
                "keys_unavailable", None, "the service's keys cannot be read; see its log"
            )
            await JSONResponse(body, 503)(scope, receive, timed_send)
            return
        if tenant is None:
            body = error_body(
                "unauthorized", None, "a valid API key is needed: Authorization: Bearer <key>"
            )
            headers = {"WWW-Authenticate": "Bearer"}
            await JSONResponse(body, 401, headers)(scope, receive, timed_send)
            return
        scope.setdefault("state", {})["tenant"] = tenant

        declared = _header(scope, b"content-length")
        if declared is not None:
            if not declared.isdigit():
                body = error_body("bad_request", None, "Content-Length is not a number")
                await JSONResponse(body, 400)(scope, receive, timed_send)
                return
            if int(declared) > self.max_body_bytes:
                await self._too_large(scope, receive, timed_send)
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._too_large(scope, receive, timed_send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        whole = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, timed_send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = error_body(
            "body_too_large", None, f"the request body is over {self.max_body_bytes} bytes"
        )
        await JSONResponse(body, 413, {"Connection": "close"})(scope, receive, send)


_MAX_DEPTH = 64


def _malformed(message: str) -> JSONResponse:
    return JSONResponse(error_body("malformed_json", None, message), 400)


def _too_deep(value: object, depth: int = 0) -> bool:
    """Whether a parsed body nests deeper than `_MAX_DEPTH` (iterative, no recursion)."""
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if level > _MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return False


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _bearer(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def create_app(
    system: MemorySystem,
    keys: KeyStore,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    threads: int = 32,
    cleanup: FileCleanup | None = None,
    pending: Pending | None = None,
    servers_down: Callable[[], set[str]] | None = None,
) -> FastAPI:
    """The app serving `system` to the tenants of `keys` (see the module docstring);
    `cleanup`: the files' cleanup after each erasure (`memharness.serve.cleanup`);
    `pending`: where failed requests leave their unfinished work
    (`memharness.serve.pending`); `servers_down`: the layers whose supervised server is
    dead (`memharness.serve.supervisor`). The service is `app.state.service`."""
    service = MemoryService(system, cleanup, pending, servers_down)
    limiter = anyio.CapacityLimiter(threads)
    app = FastAPI(
        # `/v1/users/alice/` is a 404, not a redirect to another route.
        redirect_slashes=False,
        title="memharness reference memory",
        version="1",
        description="The reference memory behind an HTTP API: docs/serve.md",
        responses={code: {"model": ErrorResponse} for code in (400, 401, 404, 413, 422, 503)},
    )
    app.add_middleware(Guard, keys=keys, max_body_bytes=max_body_bytes)
    app.state.service = service

    async def run(call: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(call, limiter=limiter)

    def tenant(request: Request) -> str:
        return str(request.state.tenant)

    @app.post("/v1/turn", response_model=TurnResponse)
    async def turn(body: TurnRequest, request: Request) -> TurnResponse:
        who = tenant(request)
        return await run(lambda: service.turn(who, body))

    @app.post("/v1/recall", response_model=RecallResponse)
    async def recall(body: RecallRequest, request: Request) -> RecallResponse:
        who = tenant(request)
        return await run(lambda: service.recall(who, body))

    @app.post("/v1/forget", response_model=ForgetResponse)
    async def forget(body: ForgetRequest, request: Request) -> ForgetResponse:
        who = tenant(request)
        return await run(lambda: service.forget(who, body))

    @app.post("/v1/events", response_model=EventResponse)
    async def events(body: EventRequest, request: Request) -> EventResponse:
        who = tenant(request)
        return await run(lambda: service.event(who, body))

    @app.delete("/v1/users/{user_id}", response_model=DeleteUserResponse)
    async def delete_user(user_id: str, request: Request) -> DeleteUserResponse:
        who = tenant(request)
        return await run(lambda: service.delete_user(who, user_id))

    @app.get("/v1/health", response_model=HealthResponse)
    async def health() -> JSONResponse:
        layers = await run(service.health)
        ok = all(state == "ok" for state in layers.values())
        body = HealthResponse(status="ok" if ok else "unavailable", layers=layers)
        return JSONResponse(body.model_dump(), 200 if ok else 503)

    _install_error_handlers(app)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    async def invalid_input(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, InvalidInput)
        return JSONResponse(error_body("invalid", exc.field, exc.reason), 422)

    async def invalid_request(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            message = "the body is not valid JSON: " + str(first.get("ctx", {}).get("error", ""))
            return JSONResponse(error_body("malformed_json", None, message.strip()), 400)
        if first.get("type") == "recursion_loop" or _too_deep(first.get("input")):
            return _malformed("the body nests too deeply")
        where = [str(part) for part in first.get("loc", ()) if part != "body"]
        field = ".".join(where) or None
        kind = str(first.get("type", "invalid"))
        code = {"extra_forbidden": "unknown_field", "missing": "missing_field"}.get(kind, "invalid")
        if kind == "missing" and field is None:
            return JSONResponse(
                error_body("missing_body", None, "the request needs a JSON object body"), 422
            )
        if kind == "extra_forbidden":
            message = "is not a field of this request"
        else:
            message = str(first.get("msg", "is not valid"))
        return JSONResponse(error_body(code, field, message), 422)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # FastAPI's own parse failure: bytes that are not UTF-8, nesting too deep
            # for the JSON decoder.
            return _malformed("the body is not valid JSON (UTF-8 text, nested at most 64 deep)")
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, None, str(exc.detail)), exc.status_code)

    async def unavailable(_: Request, exc: Exception) -> JSONResponse:
        # The layer, never the server's address or socket path (the log has them).
        assert isinstance(exc, BackendUnavailable)
        layer = exc.layer or "a layer"
        log.warning("serve: %s", exc)
        message = f"{layer} is unavailable; the request may be sent again"
        return JSONResponse(error_body("store_unavailable", exc.layer, message), 503)

    async def internal(_: Request, exc: Exception) -> JSONResponse:
        # Starlette's last resort (it re-raises for the server's log): the client gets
        # the error's type, never its text, which may quote stored values.
        message = f"internal error ({type(exc).__name__}); see the service's log"
        return JSONResponse(error_body("internal", None, message), 500)

    app.add_exception_handler(Exception, internal)
    app.add_exception_handler(InvalidInput, invalid_input)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(BackendUnavailable, unavailable)
