"""A Redis lease: one sweeper per namespace at a time, with a fencing token.

Data, with names from `reference.keys.Namespace`:

- string `lease_key(name)`: the holder's token, with a native expiry (`SET NX PX`);
- counter `lease_fence_key(name)`: `INCR`ed at every acquisition; the count is the
  holder's fencing token (`Lease.fence`), larger at every takeover.

`acquire` takes the lease if nobody holds it; `renew` extends it and `release` deletes it,
each only if the stored token is still ours (a Lua compare-and-set: a holder whose lease
expired and was taken by another can neither extend nor delete the new holder's lease).
Expiry is the Redis server's: lease times are wall milliseconds whatever clock the
memory runs on.

**Fencing.** Before each batch of changes the holder calls `check()`: one script that
says whether the lease is still ours *and* has at least `margin_s` left. A holder that
was paused (a GC pause, SIGSTOP, a stalled VM) past its lease finds it gone or another's
and applies nothing. What remains: the stores (Chroma, PostgreSQL) cannot check a token
themselves, so a batch whose `check()` passed is applied even if the lease then runs out
while it is in flight. The margin bounds that window: a batch that takes less than
`margin_s` from its check to its last write finishes while the lease is still ours, so
no other holder can start a batch concurrently. A pause longer than the margin in exactly
that interval (after the check, before the write) can still let a stale batch land once;
the changes a sweep makes are idempotent decisions from the records as they are (an
expired record is deleted once; a second delete finds nothing), so such a batch repeats
work, never undoes a newer holder's.
"""

from __future__ import annotations

import secrets
from typing import Any

import redis

from reference.errors import InvalidInput
from reference.keys import Namespace
from reference.validation import check_id

#: Shortest lease accepted: under a second, renewal round trips eat the lease.
MIN_LEASE_S = 1.0

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

_CHECK = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then return 0 end
return 1
"""


class LeaseLost(RuntimeError):
    """The lease is no longer ours (expired, taken by another holder, or released)."""


class Lease:
    """A named lease in one namespace; see the module docstring.

    `lease_s` is the lease's length (>= 1 s); `margin_s` (default a fifth of it) the
    least time that must be left for `check()` to pass. Not thread-safe: one owner thread
    acquires, renews, checks and releases.
    """

    def __init__(
        self,
        client: redis.Redis,
        namespace: Namespace,
        *,
        name: str = "sweeper",
        lease_s: float = 10.0,
        margin_s: float | None = None,
    ) -> None:
        if not isinstance(lease_s, int | float) or not lease_s >= MIN_LEASE_S:
            raise InvalidInput("lease_s", f"must be at least {MIN_LEASE_S:g} s, got {lease_s!r}")
        margin = lease_s / 5 if margin_s is None else margin_s
        if not 0 <= margin < lease_s:
            raise InvalidInput("margin_s", f"must be in [0, lease_s), got {margin_s!r}")
        self.client = client
        self.name = check_id("name", name)
        self.key = namespace.lease_key(name)
        self.fence_key = namespace.lease_fence_key(name)
        self.lease_ms = int(lease_s * 1000)
        self.margin_ms = int(margin * 1000)
        self.token: str | None = None
        #: The fencing token of the current (or last) acquisition; 0 before the first.
        self.fence = 0
        self._renew: Any = client.register_script(_RENEW)
        self._release: Any = client.register_script(_RELEASE)
        self._check: Any = client.register_script(_CHECK)

    @property
    def lease_s(self) -> float:
        return self.lease_ms / 1000

    @property
    def held(self) -> bool:
        """Whether this object believes it holds the lease (`check()` asks the server)."""
        return self.token is not None

    def acquire(self) -> bool:
        """Take the lease if nobody holds it; True if ours now (already ours: renewed)."""
        if self.token is not None:
            return self.renew()
        token = secrets.token_hex(16)
        if not self.client.set(self.key, token, nx=True, px=self.lease_ms):
            return False
        self.token = token
        self.fence = int(self.client.incr(self.fence_key))
        return True

    def renew(self) -> bool:
        """Extend the lease by `lease_s` if still ours; False (and no longer held) if not."""
        if self.token is None:
            return False
        if int(self._renew(keys=[self.key], args=[self.token, self.lease_ms])):
            return True
        self.token = None
        return False

    def check(self) -> bool:
        """Whether the lease is ours with at least `margin_s` left: call it before every
        batch; False means apply nothing (and the lease is no longer held)."""
        if self.token is None:
            return False
        if int(self._check(keys=[self.key], args=[self.token, self.margin_ms])):
            return True
        self.token = None
        return False

    def ensure(self) -> None:
        """`check()` or raise `LeaseLost`: the hook a sweep calls before each batch."""
        if not self.check():
            raise LeaseLost(f"lease {self.key}: no longer held (fence {self.fence})")

    def release(self) -> bool:
        """Give the lease up if still ours (another replica may take it at once)."""
        token, self.token = self.token, None
        if token is None:
            return False
        return bool(int(self._release(keys=[self.key], args=[token])))

    def holder_token(self) -> str | None:
        """The token stored on the server now (whoever holds it); a read."""
        value = self.client.get(self.key)
        return None if value is None else str(value)

    def current_fence(self) -> int:
        """The last fencing token issued (by any holder); a read."""
        value = self.client.get(self.fence_key)
        return 0 if value is None else int(value)
