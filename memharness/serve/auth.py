"""API keys per tenant, stored hashed, checked on every request.

A key is `mhk_<key id>_<secret>`: the key id (8 hex digits) names the entry in the keys
file, the secret is 32 random bytes (`secrets.token_urlsafe`). The file keeps, per key,
its id, its tenant, the SHA-256 of the whole key and when it was created or revoked;
never the key. `memharness serve keys add --tenant T` prints a new key once.

Why SHA-256 and not scrypt or argon2: a slow hash protects *guessable* secrets (passwords)
when the hash file leaks. These secrets are 256 random bits: no dictionary, and 2^256
guesses whatever the hash costs. A slow hash would only add its cost (tens of
milliseconds by design) to every request of a service that aims for 25 ms turns.

Checking a key: the key id selects the entry (a dict lookup on the public part), then
`hmac.compare_digest` compares the SHA-256 of the presented key with the stored one, in
time independent of where they differ. A malformed key, an unknown id, a wrong secret and
a revoked key all get the same answer (None), so a caller learns nothing from which.

The file is re-read when its modification time or size changes (one `stat` per
request), so `keys revoke` takes effect on the next request of a running service.
Writes go to a temporary file renamed over the old one (mode 0600): a reader never sees
half a file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reference.errors import InvalidInput

__all__ = ["TENANT_RE", "KeyEntry", "KeyStore"]

#: Tenant names: no '.' (it separates tenant and user in scoped ids) and no '@'.
TENANT_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_KEY_RE = re.compile(r"mhk_([0-9a-f]{8})_([A-Za-z0-9_-]{43})")
_VERSION = 1


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """One key as the file keeps it: no secret, only its hash."""

    key_id: str
    tenant: str
    sha256: str
    created_at: float
    revoked_at: float | None = None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def check_tenant(tenant: object) -> str:
    if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
        raise InvalidInput(
            "tenant", f"{str(tenant)[:40]!r} must match {TENANT_RE.pattern} (no '.' or '@')"
        )
    return tenant


class KeyStore:
    """The keys file at `path` (JSON): add, revoke, list, and verify a presented key."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, KeyEntry] = {}
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) of what was read

    # ------------------------------------------------------------------ reading
    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _refresh(self) -> None:
        """Re-read the file if it changed since it was last read (the caller holds the lock)."""
        seen = self._stat()
        if seen == self._seen:
            return
        self._entries = self._read() if seen is not None else {}
        self._seen = seen

    def _read(self) -> dict[str, KeyEntry]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput("keys", f"{self.path}: cannot read the keys file: {exc}") from None
        if not isinstance(raw, dict) or raw.get("version") != _VERSION:
            raise InvalidInput("keys", f"{self.path}: not a memharness keys file (version 1)")
        entries: dict[str, KeyEntry] = {}
        for item in raw.get("keys", []):
            try:
                entry = KeyEntry(**item)
            except TypeError as exc:
                raise InvalidInput("keys", f"{self.path}: bad entry {item!r}: {exc}") from None
            entries[entry.key_id] = entry
        return entries

    def entries(self) -> list[KeyEntry]:
        with self._lock:
            self._refresh()
            return sorted(self._entries.values(), key=lambda e: (e.tenant, e.created_at))

    # ------------------------------------------------------------------ checking
    def tenant_of(self, presented: str | None) -> str | None:
        """The tenant of a valid, unrevoked key; None for anything else (see module)."""
        if presented is None:
            return None
        match = _KEY_RE.fullmatch(presented)
        with self._lock:
            self._refresh()
            entry = self._entries.get(match.group(1)) if match else None
        if entry is None:
            # Hash anyway, so an unknown id costs what a wrong secret does.
            hmac.compare_digest(_digest(presented), "0" * 64)
            return None
        ok = hmac.compare_digest(_digest(presented), entry.sha256)
        return entry.tenant if ok and entry.revoked_at is None else None

    # ------------------------------------------------------------------ writing
    def add(self, tenant: str) -> str:
        """A new key for `tenant`: its hash is stored, the key itself returned (once)."""
        check_tenant(tenant)
        with self._lock:
            self._refresh()
            key_id = secrets.token_hex(4)
            while key_id in self._entries:
                key_id = secrets.token_hex(4)
            key = f"mhk_{key_id}_{secrets.token_urlsafe(32)}"
            # When a key was made is a real date, whatever clock serves turns.
            made = time.time()  # wall-clock ok
            entry = KeyEntry(key_id, tenant, _digest(key), made)
            self._write({**self._entries, key_id: entry})
            return key

    def revoke(self, *, key_id: str | None = None, tenant: str | None = None) -> int:
        """Revoke one key by id, or every key of a tenant; returns how many were revoked."""
        if (key_id is None) == (tenant is None):
            raise InvalidInput("key_id", "give a key id or a tenant, not both or neither")
        now = time.time()  # wall-clock ok: a revocation date is a real date
        with self._lock:
            self._refresh()
            changed = dict(self._entries)
            count = 0
            for entry in self._entries.values():
                if entry.revoked_at is None and (entry.key_id == key_id or entry.tenant == tenant):
                    changed[entry.key_id] = KeyEntry(
                        entry.key_id, entry.tenant, entry.sha256, entry.created_at, now
                    )
                    count += 1
            if count:
                self._write(changed)
            return count

    def _write(self, entries: dict[str, KeyEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {
            "version": _VERSION,
            "keys": [
                {
                    "key_id": e.key_id,
                    "tenant": e.tenant,
                    "sha256": e.sha256,
                    "created_at": e.created_at,
                    "revoked_at": e.revoked_at,
                }
                for e in entries.values()
            ],
        }
        temp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(body, handle, indent=1)
        os.replace(temp, self.path)
        self._entries = entries
        self._seen = self._stat()
