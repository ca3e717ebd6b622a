"""Request and response bodies of the HTTP API (docs/http-api.md), as pydantic models.

Requests are strict (no "5" for 5, no 1 for true) and refuse unknown fields. The
models check types and shapes only; the values are then checked by the reference's own
validation (`reference.validation`: ids, texts, metadata, k), in `memharness.serve.app`,
so a hostile id is refused over HTTP exactly as the Python API refuses it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TurnRequest(_Request):
    user_id: str
    session_id: str
    text: str
    metadata: dict[str, str | int | float | bool] | None = None
    at: float | None = Field(None, description="epoch seconds; only with --virtual-time")


class RecallRequest(_Request):
    user_id: str
    session_id: str
    query: str
    k: int | None = Field(None, description="top-k of each layer (default: the service's)")
    at: float | None = Field(None, description="epoch seconds; only with --virtual-time")


class ForgetRequest(_Request):
    user_id: str
    session_id: str
    command: str = Field(description="a forget command in words, or the answer to its question")


class EventRequest(_Request):
    name: str
    user_id: str
    payload: dict[str, Any] = Field(default_factory=dict)
    at: float | None = Field(None, description="epoch seconds; only with --virtual-time")


class ContextItem(BaseModel):
    layer: Literal["stm", "ltm"]
    id: str
    text: str
    score: float


class Stored(BaseModel):
    stm: str | None
    ltm: str | None


class Forgotten(BaseModel):
    scope: str
    stm_removed: int
    ltm_erased: int


class TurnResponse(BaseModel):
    message_id: str
    masked_text: str
    reply: str | None
    context: list[ContextItem]
    stored: Stored
    forgotten: Forgotten | None
    timings_ms: dict[str, float]


class RecallResponse(BaseModel):
    hits: list[ContextItem]


class ForgetResponse(BaseModel):
    scope: str | None
    stm_removed: int
    ltm_erased: int
    reply: str | None


class EventResponse(BaseModel):
    stm_removed: int
    ltm_archived: int
    ltm_deleted: int


class DeleteUserResponse(BaseModel):
    removed: dict[str, int]


class HealthResponse(BaseModel):
    status: Literal["ok", "unavailable"]
    #: Per layer ("session", "stm", "ltm"): "ok" or "down".
    layers: dict[str, Literal["ok", "down"]] = {}


class ErrorDetail(BaseModel):
    code: str
    field: str | None
    message: str


class ErrorResponse(BaseModel):
    error: ErrorDetail
