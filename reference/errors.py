"""Exceptions of the reference memory. Each names the field or resource at fault."""

from __future__ import annotations


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
    """A configured server could not be reached or started."""


class ConfigurationError(MemoryStoreError):
    """The settings are inconsistent or incomplete (e.g. a missing encryption key)."""
