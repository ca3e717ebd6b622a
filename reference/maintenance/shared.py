"""The open-session tracker shared between serving processes and the maintenance process.

A `ForgettingEngine` learns of the sessions its turns touch in process
(`SessionTracker`); consolidation needs them where the sweeps run. `SharedSessions` is
one Redis sorted set per namespace (`Namespace.open_sessions_key`): member
`user_id session_id`, score the moment the session ends if no turn comes.

- serving side (`ServingBackground`): `publish(tracker.drain())` writes what the turns
  noted; a session noted again keeps the later end (`ZADD GT`);
- maintenance side: `pull(tracker, now)` notes the sessions due by `now` into the
  sweeping engine's tracker; after the sweep, `settle(tracker, pulled)` removes the ones
  it consolidated (only if no turn pushed their end later meanwhile: a compare-and-delete
  on the score) and writes back the new end of the ones a later turn extended.

A maintenance process that dies between consolidating and settling leaves the session in
the set; the next sweep consolidates it again and finds nothing left to do (its STM
records are gone), so nothing is consolidated twice.
"""

from __future__ import annotations

from typing import Any

import redis

from reference.forgetting.consolidation import SessionTracker
from reference.keys import Namespace

#: Entries pulled per sweep at most (the rest wait for the next one).
PULL_LIMIT = 10_000

# Remove members whose score is still at most the one pulled (a turn did not extend them).
_SETTLE = """
local n = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= tonumber(ARGV[i + 1]) then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
"""


class SharedSessions:
    """Open sessions of one namespace in Redis (see the module docstring)."""

    def __init__(self, client: redis.Redis, namespace: Namespace) -> None:
        self.client = client
        self.key = namespace.open_sessions_key
        self._settle: Any = client.register_script(_SETTLE)

    def publish(self, sessions: list[tuple[str, str, float]]) -> int:
        """Add (user_id, session_id, ends_at) entries, keeping the later end of a session
        already there; returns how many were given."""
        if not sessions:
            return 0
        mapping: dict[str, float] = {}
        for user_id, session_id, ends_at in sessions:
            member = f"{user_id} {session_id}"
            mapping[member] = max(ends_at, mapping.get(member, ends_at))
        self.client.zadd(self.key, mapping, gt=True)
        return len(mapping)

    def pull(self, tracker: SessionTracker, now: float) -> dict[str, float]:
        """Note the sessions due by `now` in `tracker`; returns member -> end as pulled."""
        rows: Any = self.client.zrangebyscore(
            self.key, "-inf", repr(float(now)), start=0, num=PULL_LIMIT, withscores=True
        )
        pulled: dict[str, float] = {}
        for member, score in rows:
            user_id, _, session_id = str(member).partition(" ")
            tracker.note(user_id, session_id, float(score))
            pulled[str(member)] = float(score)
        return pulled

    def settle(self, tracker: SessionTracker, pulled: dict[str, float]) -> int:
        """After a sweep: drop the pulled sessions `tracker` no longer holds (consolidated),
        write back the later end of those it still holds (extended); returns how many
        were dropped."""
        gone: list[str | float] = []
        extended: list[tuple[str, str, float]] = []
        for member, score in pulled.items():
            user_id, _, session_id = member.partition(" ")
            ends_at = tracker.ends_at(user_id, session_id)
            if ends_at is None:
                gone.extend((member, repr(score)))
            elif ends_at > score:
                extended.append((user_id, session_id, ends_at))
        self.publish(extended)
        return int(self._settle(keys=[self.key], args=gone)) if gone else 0

    def count(self) -> int:
        """How many sessions are waiting (a read)."""
        return int(self.client.zcard(self.key))
