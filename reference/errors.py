"""Exceptions of the reference memory. Each names the field or resource at fault."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass


class MemoryStoreError(Exception):
    """Base class of every error the reference raises on purpose."""


class InvalidInput(MemoryStoreError, ValueError):
    """An argument failed validation. `field` names it; the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class NotFound(MemoryStoreError, LookupError):
    """A session, record or fact that the operation needs does not exist (or expired)."""


class SessionClosed(MemoryStoreError):
    """An operation that needs an open session was given a closed one."""


class BackendUnavailable(MemoryStoreError, ConnectionError):
    """A configured server could not be reached or started, or failed or timed out during
    an operation. Raised by a layer, the message starts with the layer and the server
    ("session: Redis at unix:///...: ..."); `in_doubt` says the operation may have been
    applied (its reply was lost), so it is not repeated unless idempotent
    (`reference.resilience`)."""

    def __init__(
        self,
        message: str,
        *,
        layer: str | None = None,
        server: str | None = None,
        in_doubt: bool = False,
    ) -> None:
        prefix = ": ".join(part for part in (layer, server) if part)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.layer = layer
        self.server = server
        self.detail = message
        self.in_doubt = in_doubt

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled (e.g. by Ray, from a worker) with its layer, server and in_doubt; as the
        # base class, which is always importable (Ray derives classes from a cause).
        return (
            functools.partial(
                BackendUnavailable, layer=self.layer, server=self.server, in_doubt=self.in_doubt
            ),
            (self.detail,),
        )

    def after(self, tries: int, elapsed_s: float) -> BackendUnavailable:
        """This error, saying it is the last of `tries` tries over `elapsed_s` seconds."""
        return BackendUnavailable(
            f"{self.detail} (gave up after {tries} tries in {elapsed_s:.1f} s)",
            layer=self.layer,
            server=self.server,
            in_doubt=self.in_doubt,
        )


class ConfigurationError(MemoryStoreError):
    """The settings are inconsistent or incomplete (e.g. a missing encryption key)."""


def changed_nothing(exc: BaseException) -> bool:
    """Whether a store operation that raised `exc` left the store as it was: a refusal
    (invalid input, a closed session, ...), not a server that failed, whose operation may
    have landed."""
    return isinstance(exc, MemoryStoreError) and not isinstance(exc, BackendUnavailable)


@dataclass(frozen=True, slots=True)
class LayerFailure:
    """Where a turn failed: the layer running when it raised (a key of
    `reference.turns.TIMING_KEYS`), how long that layer had run, and the timings of the
    layers that finished before it, in milliseconds."""

    layer: str
    layer_ms: float
    finished_ms: Mapping[str, float]


def note_layer_failure(exc: BaseException, failure: LayerFailure) -> None:
    """Attach `failure` to `exc`. The error keeps its type, since callers of a turn catch
    `BackendUnavailable` or `InvalidInput`; `layer_failure` reads it back."""
    exc.layer_failure = failure  # type: ignore[attr-defined]


def layer_failure(exc: BaseException) -> LayerFailure | None:
    """Which layer of `MemorySystem.turn` raised `exc`; None when the turn failed before
    its first layer (invalid input) or `exc` did not come out of a turn."""
    failure = getattr(exc, "layer_failure", None)
    return failure if isinstance(failure, LayerFailure) else None
