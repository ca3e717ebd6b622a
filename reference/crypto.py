"""Field-level AES-256-GCM encryption of sensitive long-term values, and their anonymisation.

A token is `v1:<key id>:<base64url(nonce + ciphertext + tag)>`: a fresh random 96-bit
nonce per call, and the key id (first 4 bytes of sha256(key), hex) so that after a key
rotation the right key is picked without trial decryption. The associated data (AAD)
names the owner of the value, e.g. `f"{user_id}/{category}/{key}"`: a token copied into
another user's row, or under another key, does not decrypt.

Sealing (`seal_value`) keeps a JSON value readable without raw PII: every string with
detected PII is replaced by its masked form, and the original whole value is kept as one
token under `_sealed`, with the time of sealing under `_sealed_at`. `anonymise_value`
drops the token once the deadline has passed (24 h by default, a strategy parameter),
which leaves the masked form only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import os
import re
from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import SecretStr

from reference.errors import ConfigurationError, InvalidInput
from reference.text_interfaces import PiiMasker
from reference.validation import check_json_object, check_text, check_timestamp

__all__ = [
    "ANONYMISED",
    "DEFAULT_ANONYMISE_AFTER_S",
    "ENV_VAR",
    "RESERVED_KEYS",
    "SEALED",
    "SEALED_AT",
    "DecryptionError",
    "FieldCipher",
    "anonymise_value",
    "generate_key",
    "is_anonymised",
    "is_sealed",
    "key_id",
    "needs_anonymising",
    "seal_value",
    "unseal_value",
]

ENV_VAR = "MEMH_ENCRYPTION_KEY"
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
VERSION = "v1"
DEFAULT_ANONYMISE_AFTER_S = 24 * 3600.0

SEALED = "_sealed"
SEALED_AT = "_sealed_at"
ANONYMISED = "_anonymised"

# A sealed value's plaintext: compact JSON (one encoder, built once; see `encode_json`).
_compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

RESERVED_KEYS = frozenset({SEALED, SEALED_AT, ANONYMISED})

_GENERATE_HINT = 'python -c "import os,base64;print(base64.b64encode(os.urandom(32)).decode())"'
_KID_RE = re.compile(r"[0-9a-f]{8}")
_HEX_KEY_RE = re.compile(r"[0-9a-fA-F]{64}")


class DecryptionError(InvalidInput):
    """A token that does not decrypt: malformed, altered, another owner's, or an unknown key.

    Raised without the cryptography traceback; `field` names the value that failed.
    """


def key_id(key: bytes) -> str:
    """The id a token carries for `key`: the first 4 bytes of its SHA-256, in hex."""
    return hashlib.sha256(key).hexdigest()[:8]


def generate_key() -> str:
    """A fresh random 256-bit key, base64-encoded, as `MEMH_ENCRYPTION_KEY` takes it."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")


class FieldCipher:
    """AES-256-GCM over single fields, with key rotation.

    The current key encrypts; it and every key in `previous` decrypt. Build it once at
    start-up (`from_setting`) and share it: it holds no per-call state.
    """

    def __init__(self, key: bytes, *, previous: Sequence[bytes] = ()) -> None:
        self._kid = key_id(_check_key(key, "the key"))
        self._current = AESGCM(key)
        # A list per id: two keys sharing a 32-bit id is unlikely, not impossible.
        self._by_kid: dict[str, list[AESGCM]] = {self._kid: [self._current]}
        seen = {key}
        for n, old in enumerate(previous, start=1):
            _check_key(old, f"previous key #{n}")
            if old not in seen:
                seen.add(old)
                self._by_kid.setdefault(key_id(old), []).append(AESGCM(old))

    @classmethod
    def from_setting(cls, secret: SecretStr | None) -> FieldCipher:
        """The cipher for `Settings.encryption_key`; a missing key is a start-up error.

        The setting holds one key (32 bytes as base64, or 64 hex characters), or several
        separated by commas during a rotation: the first encrypts, all of them decrypt.
        """
        raw = secret.get_secret_value().strip() if secret is not None else ""
        if not raw:
            raise ConfigurationError(
                f"{ENV_VAR} is not set. Long-term memory encrypts sensitive fields with "
                "AES-256-GCM and never writes them in plaintext, so it needs a key. "
                f"Generate one with {_GENERATE_HINT} and set {ENV_VAR} to it (32 bytes as "
                "base64, or 64 hex characters). Keep it: values sealed under a lost key "
                "cannot be read back."
            )
        parts = [p.strip() for p in raw.split(",")]
        if not all(parts):
            raise InvalidInput("encryption_key", f"{ENV_VAR} has an empty entry in its list")
        keys = [_parse_key(p, n) for n, p in enumerate(parts)]
        return cls(keys[0], previous=keys[1:])

    @property
    def key_id(self) -> str:
        """The id of the key that encrypts."""
        return self._kid

    @property
    def key_ids(self) -> frozenset[str]:
        """The ids of every key that decrypts (current and previous)."""
        return frozenset(self._by_kid)

    def __repr__(self) -> str:
        # Never the key material: only ids, which are safe to log.
        return f"FieldCipher(key_id={self._kid!r}, key_ids={sorted(self._by_kid)!r})"

    def encrypt(self, plaintext: str, *, aad: str) -> str:
        """`plaintext` as a `v1:<kid>:<base64url>` token bound to `aad` (its owner)."""
        if not isinstance(plaintext, str):
            raise InvalidInput("plaintext", f"must be a string, got {type(plaintext).__name__}")
        try:
            data = plaintext.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput("plaintext", "contains unpaired surrogates") from None
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._current.encrypt(nonce, data, _aad(self._kid, aad))
        return f"{VERSION}:{self._kid}:{_b64encode(nonce + sealed)}"

    def decrypt(self, token: str, *, aad: str, field: str = "token") -> str:
        """The plaintext of `token`, if it was encrypted for `aad` under a known key.

        Every failure is a `DecryptionError` naming `field`, never a cryptography error.
        """
        kid, blob = _parse_token(token, field)
        candidates = self._by_kid.get(kid)
        if candidates is None:
            raise DecryptionError(
                field,
                f"was encrypted under key id {kid}, which is not among the configured keys "
                f"({', '.join(sorted(self._by_kid))}); after a rotation, list the old key "
                f"after the new one in {ENV_VAR}",
            )
        nonce, sealed = blob[:NONCE_BYTES], blob[NONCE_BYTES:]
        associated = _aad(kid, aad)
        for cipher in candidates:
            try:
                data = cipher.decrypt(nonce, sealed, associated)
            except InvalidTag:
                continue
            return data.decode("utf-8")
        raise DecryptionError(
            field,
            f"does not decrypt for owner {aad!r} under key id {kid}: the token was altered, "
            "or it belongs to another record (the owner is bound to the ciphertext)",
        )

    def needs_rotation(self, token: str) -> bool:
        """Whether `token` was encrypted under a previous key (re-encrypt it to retire it)."""
        kid, _ = _parse_token(token, "token")
        return kid != self._kid

    def reencrypt(self, token: str, *, aad: str, field: str = "token") -> str:
        """`token` decrypted and encrypted again under the current key (key rotation)."""
        return self.encrypt(self.decrypt(token, aad=aad, field=field), aad=aad)


def _check_key(key: object, what: str) -> bytes:
    if not isinstance(key, bytes):
        raise InvalidInput("encryption_key", f"{what} must be bytes, got {type(key).__name__}")
    if len(key) != KEY_BYTES:
        raise InvalidInput(
            "encryption_key",
            f"{what} is {len(key)} bytes; AES-256 needs exactly {KEY_BYTES}",
        )
    return key


def _parse_key(text: str, position: int) -> bytes:
    """One key of the setting: 64 hex characters, or base64 (standard or URL-safe)."""
    what = f"{ENV_VAR} entry #{position + 1}" if position else ENV_VAR
    # 64 hex characters are also valid base64 (of 48 bytes), so hex is tried first.
    if _HEX_KEY_RE.fullmatch(text):
        return bytes.fromhex(text)
    try:
        key = _b64decode(text.replace("+", "-").replace("/", "_"))
    except ValueError:
        # The value itself is never echoed: it is (a mistyped) secret.
        raise InvalidInput(
            "encryption_key",
            f"{what} is neither 64 hex characters nor base64; generate a key with {_GENERATE_HINT}",
        ) from None
    if len(key) != KEY_BYTES:
        raise InvalidInput(
            "encryption_key",
            f"{what} decodes to {len(key)} bytes; AES-256 needs exactly {KEY_BYTES} "
            "(44 base64 characters, or 64 hex characters)",
        )
    return key


def _aad(kid: str, owner: str) -> bytes:
    # The header is bound too, so a token cannot be relabelled with another version or id.
    check_text("aad", owner)
    return f"{VERSION}:{kid}:{owner}".encode()


def _parse_token(token: object, field: str) -> tuple[str, bytes]:
    if not isinstance(token, str):
        raise DecryptionError(field, f"must be a token string, got {type(token).__name__}")
    parts = token.split(":")
    if len(parts) != 3 or parts[0] != VERSION or not _KID_RE.fullmatch(parts[1]):
        raise DecryptionError(field, f"is not a {VERSION} token ('{VERSION}:<key id>:<base64>')")
    try:
        blob = _b64decode(parts[2])
    except ValueError:
        raise DecryptionError(field, "has a token whose payload is not base64url") from None
    if len(blob) < NONCE_BYTES + TAG_BYTES:
        raise DecryptionError(field, "has a token too short to hold a nonce and a tag")
    return parts[1], blob


def _b64encode(data: bytes) -> str:
    # URL-safe and unpadded: compact, and free of ':' which separates the token's parts.
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError("not base64url")
    text = text.rstrip("=")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None


# --- sealed JSON values ------------------------------------------------------------


def seal_value(
    value: dict[str, Any],
    *,
    cipher: FieldCipher,
    aad: str,
    pii: PiiMasker,
    now: float,
    visible: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`value` with its PII masked and the original kept encrypted under `_sealed`.

    A value without detected PII is returned as it is (no `_sealed`). Keys are masked
    too, and so are numbers whose digits are PII (a phone number stored as an int).

    `visible`: the same value as extracted from the masked text it came from. When it
    differs from `value`, the text held PII in what became the value, so the value is
    sealed and `visible` (masked again) is what is shown, even where the masker finds
    nothing in the value on its own ("Pia Schulz" without "my name is" before it).
    """
    check_json_object("value", value)
    check_text("aad", aad)
    at = check_timestamp("now", now)
    reserved = RESERVED_KEYS.intersection(value)
    if reserved:
        raise InvalidInput(
            "value",
            f"uses reserved key(s) {sorted(reserved)}; unseal a sealed value before storing "
            "it again",
        )
    masked, changed = _mask_json(value, pii)
    if visible is not None and visible != value:
        masked, changed = _mask_json(visible, pii)[0], True
    if not changed:
        return value
    plain = _compact_json(value)
    return {**masked, SEALED: cipher.encrypt(plain, aad=aad), SEALED_AT: at}


def unseal_value(sealed: dict[str, Any], *, cipher: FieldCipher, aad: str) -> dict[str, Any]:
    """The original value of a sealed one; unsealed and anonymised values come back as-is."""
    if not is_sealed(sealed):
        return sealed
    plain = cipher.decrypt(sealed[SEALED], aad=aad, field=SEALED)
    original = json.loads(plain)
    if not isinstance(original, dict):
        raise DecryptionError(SEALED, "decrypts to JSON that is not an object")
    return original


def anonymise_value(sealed: dict[str, Any]) -> dict[str, Any]:
    """The masked form only, marked `_anonymised`: the ciphertext is dropped for good."""
    if not is_sealed(sealed):
        return sealed
    kept = {k: v for k, v in sealed.items() if k not in (SEALED, SEALED_AT)}
    return {**kept, ANONYMISED: True}


def is_sealed(value: object) -> bool:
    """Whether `value` still carries the encrypted original (`_sealed`)."""
    return isinstance(value, dict) and isinstance(value.get(SEALED), str)


def is_anonymised(value: object) -> bool:
    """Whether `value` was sealed once and its original has since been dropped."""
    return isinstance(value, dict) and value.get(ANONYMISED) is True


def needs_anonymising(value: object, *, now: float, after_s: float) -> bool:
    """Whether a sealed value is due: sealed at least `after_s` seconds before `now`."""
    if not is_sealed(value):
        return False
    check_timestamp("now", now)
    if not isinstance(after_s, int | float) or not math.isfinite(after_s) or after_s < 0:
        raise InvalidInput("after_s", f"must be a finite number >= 0, got {after_s!r}")
    assert isinstance(value, dict)  # for mypy: is_sealed checked it
    at = value.get(SEALED_AT)
    if not isinstance(at, int | float) or isinstance(at, bool) or not math.isfinite(at):
        # No trustworthy sealing time: the deadline cannot be shown not to have passed.
        return True
    return now - at >= after_s


def _mask_json(node: Any, pii: PiiMasker) -> tuple[Any, bool]:
    """`node` with every PII-bearing string masked, and whether anything changed."""
    if isinstance(node, str):
        masked = pii.mask(node)
        return masked, masked != node
    if isinstance(node, bool) or node is None:
        return node, False
    if isinstance(node, int | float):
        # json.dumps writes the digits as they are, so a number can be raw PII too.
        text = json.dumps(node)
        masked = pii.mask(text)
        return (masked, True) if masked != text else (node, False)
    if isinstance(node, list):
        items = [_mask_json(item, pii) for item in node]
        return [m for m, _ in items], any(c for _, c in items)
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        changed = False
        for key, item in node.items():
            masked_key = pii.mask(key)
            masked_item, item_changed = _mask_json(item, pii)
            changed = changed or item_changed or masked_key != key
            out[_free_key(out, masked_key)] = masked_item
        return out, changed
    raise InvalidInput("value", f"holds a {type(node).__name__}, which is not JSON")


def _free_key(taken: dict[str, Any], key: str) -> str:
    # Two keys may mask to the same string; keep both rather than drop one silently.
    if key not in taken:
        return key
    n = 2
    while f"{key}#{n}" in taken:
        n += 1
    return f"{key}#{n}"
