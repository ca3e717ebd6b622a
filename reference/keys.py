"""Every Redis key, Chroma collection and PostgreSQL table name, in one place.

All names carry a per-run prefix so parallel workers, test cases and simulation runs
sharing a server never see each other's data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reference.errors import InvalidInput

_PREFIX_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True, slots=True)
class Namespace:
    """Names derived from one prefix (lowercase letters, digits, '_'; it starts SQL names)."""

    prefix: str = "memh"

    def __post_init__(self) -> None:
        if not _PREFIX_RE.fullmatch(self.prefix):
            raise InvalidInput(
                "prefix",
                f"{self.prefix!r} must match {_PREFIX_RE.pattern} (it becomes part of SQL "
                "table and Chroma collection names)",
            )

    # Redis (session layer). Ids are validated to exclude ':' so keys cannot collide.
    # Sessions are keyed per user: two users may hold the same session id, and nothing
    # one user does can tell whether another user's session of that id exists.
    def session_key(self, user_id: str, session_id: str) -> str:
        return f"{self.prefix}:user:{user_id}:session:{session_id}"

    def context_key(self, user_id: str, session_id: str) -> str:
        return f"{self.prefix}:user:{user_id}:session:{session_id}:ctx"

    def user_sessions_key(self, user_id: str) -> str:
        return f"{self.prefix}:user:{user_id}:sessions"

    @staticmethod
    def session_member(user_id: str, session_id: str) -> str:
        """A session's member in the expiry index: `user_id:session_id` (ids hold no ':')."""
        return f"{user_id}:{session_id}"

    @property
    def session_expiry_key(self) -> str:
        """Sorted set of `session_member`s scored by expires_at, for active sweeps."""
        return f"{self.prefix}:sessions:by_expiry"

    def key_pattern(self) -> str:
        return f"{self.prefix}:*"

    # Chroma (short-term layer): one collection, scoped by session through metadata.
    @property
    def stm_collection(self) -> str:
        return f"{self.prefix}_stm"

    # PostgreSQL (long-term layer).
    @property
    def facts_table(self) -> str:
        return f"{self.prefix}_facts"

    @property
    def audit_table(self) -> str:
        return f"{self.prefix}_fact_audit"

    @property
    def users_table(self) -> str:
        """Per-user activity (last_active_at) that archival of inactive users reads."""
        return f"{self.prefix}_users"

    @property
    def migrations_table(self) -> str:
        return f"{self.prefix}_schema_migrations"

    @property
    def facts_embedding_index(self) -> str:
        return f"{self.prefix}_facts_embedding_hnsw"

    # Redis (events: business events for the forgetting engine). Group names are
    # validated ids (no ':'), so per-group keys cannot collide with each other.
    @property
    def events_stream(self) -> str:
        """The stream of business events; consumer groups live inside it."""
        return f"{self.prefix}:events"

    @property
    def events_dead_letters_key(self) -> str:
        """List of JSON records of stream entries acknowledged without being handled."""
        return f"{self.prefix}:events:dead_letters"

    def events_processed_key(self, group: str) -> str:
        """Set of event ids a group's idempotent handler has applied."""
        return f"{self.prefix}:events:group:{group}:processed"

    def events_failures_key(self, group: str) -> str:
        """Hash of event id -> how often the group's handler raised on it."""
        return f"{self.prefix}:events:group:{group}:failures"

    # Redis (the maintenance process, `reference.maintenance`).
    def lease_key(self, name: str) -> str:
        """The holder's token of a lease (one sweeper per namespace), with its expiry."""
        return f"{self.prefix}:lease:{name}"

    def lease_fence_key(self, name: str) -> str:
        """Counter of a lease's acquisitions: the holder's fencing token."""
        return f"{self.prefix}:lease:{name}:fence"

    @property
    def open_sessions_key(self) -> str:
        """Sorted set of `user_id session_id` of sessions turns touched, scored by when
        each ends if no turn comes: the serving processes' trackers, shared."""
        return f"{self.prefix}:maintenance:open_sessions"
