"""Field-level AES-256-GCM, key rotation, and sealing / anonymising of LTM values."""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from reference.crypto import (
    ANONYMISED,
    SEALED,
    SEALED_AT,
    DecryptionError,
    FieldCipher,
    anonymise_value,
    generate_key,
    is_anonymised,
    is_sealed,
    key_id,
    needs_anonymising,
    seal_value,
    unseal_value,
)
from reference.errors import ConfigurationError, InvalidInput
from reference.pii import RegexPiiMasker, contains_raw_pii
from reference.settings import Settings
from tests.fixtures.readable import readable
from tests.test_pii import CARD_16, ID_BEIJING, pii_values

KEY = bytes(range(32))
OTHER_KEY = bytes(range(100, 132))
OWNER = "u1/profile/contact"
NOW = 1_767_225_600.0
DAY = 86_400.0
TOKEN_RE = re.compile(r"v1:[0-9a-f]{8}:[A-Za-z0-9_-]+")
PII = RegexPiiMasker()


@pytest.fixture
def cipher() -> FieldCipher:
    return FieldCipher(KEY)


def assert_clean_error(exc: BaseException) -> None:
    """The error is ours, and does not drag the cryptography traceback along."""
    assert isinstance(exc, DecryptionError)
    assert exc.__cause__ is None
    assert exc.__context__ is None or exc.__suppress_context__
    assert "InvalidTag" not in str(exc)


# --- the cipher ------------------------------------------------------------------


@pytest.mark.parametrize("plaintext", ["", "13812345678", "北京市海淀区中关村大街1号", "a" * 9999])
def test_round_trip(cipher: FieldCipher, plaintext: str) -> None:
    token = cipher.encrypt(plaintext, aad=OWNER)
    assert TOKEN_RE.fullmatch(token)
    assert token.split(":")[1] == key_id(KEY) == cipher.key_id
    assert cipher.decrypt(token, aad=OWNER) == plaintext
    assert plaintext not in token or not plaintext


def test_nonces_are_unique(cipher: FieldCipher) -> None:
    tokens = [cipher.encrypt("same value", aad=OWNER) for _ in range(2000)]
    nonces = {base64.urlsafe_b64decode(t.split(":")[2] + "==")[:12] for t in tokens}
    assert len(set(tokens)) == len(nonces) == 2000


def test_wrong_key_fails_naming_the_field(cipher: FieldCipher) -> None:
    token = cipher.encrypt("secret", aad=OWNER)
    with pytest.raises(DecryptionError) as info:
        FieldCipher(OTHER_KEY).decrypt(token, aad=OWNER, field="phone")
    assert_clean_error(info.value)
    assert info.value.field == "phone"
    assert str(info.value).startswith("phone: ")
    assert key_id(KEY) in str(info.value) and "MEMH_ENCRYPTION_KEY" in str(info.value)


def test_value_copied_to_another_owner_fails(cipher: FieldCipher) -> None:
    token = cipher.encrypt("13812345678", aad="alice/profile/phone")
    for other in ("bob/profile/phone", "alice/profile/email", "alice/fact/phone"):
        with pytest.raises(DecryptionError) as info:
            cipher.decrypt(token, aad=other, field="phone")
        assert_clean_error(info.value)
        assert info.value.field == "phone" and other in str(info.value)


def _flip(token: str, index: int) -> str:
    head, kid, body = token.split(":")
    raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw[index] ^= 0x01
    return f"{head}:{kid}:{base64.urlsafe_b64encode(bytes(raw)).rstrip(b'=').decode()}"


@pytest.mark.parametrize("index", [0, 11, 12, -1], ids=["nonce", "nonce-end", "body", "tag"])
def test_tampered_token_fails(cipher: FieldCipher, index: int) -> None:
    token = cipher.encrypt("card 6222020200112233", aad=OWNER)
    with pytest.raises(DecryptionError) as info:
        cipher.decrypt(_flip(token, index), aad=OWNER, field="card")
    assert_clean_error(info.value)
    assert info.value.field == "card"


@pytest.mark.parametrize(
    "token",
    [
        "",
        "plaintext",
        "v2:00000000:AAAA",
        "v1:zzzzzzzz:AAAA",
        "v1:0000000:AAAA",
        "v1:00000000:not base64!",
        "v1:00000000:AAAA",  # too short for a nonce and a tag
        "v1:00000000:AAAA:extra",
    ],
)
def test_malformed_tokens_fail_naming_the_field(cipher: FieldCipher, token: str) -> None:
    with pytest.raises(DecryptionError) as info:
        cipher.decrypt(token, aad=OWNER, field="email")
    assert_clean_error(info.value)
    assert info.value.field == "email"


def test_non_string_token_fails(cipher: FieldCipher) -> None:
    with pytest.raises(DecryptionError, match=r"^email: must be a token string"):
        cipher.decrypt(b"v1:..", aad=OWNER, field="email")  # type: ignore[arg-type]


def test_relabelled_key_id_fails() -> None:
    old_then_new = FieldCipher(OTHER_KEY, previous=[KEY])
    token = old_then_new.encrypt("x", aad=OWNER)
    relabelled = token.replace(key_id(OTHER_KEY), key_id(KEY))
    with pytest.raises(DecryptionError) as info:
        old_then_new.decrypt(relabelled, aad=OWNER)
    assert_clean_error(info.value)


def test_empty_aad_is_refused(cipher: FieldCipher) -> None:
    with pytest.raises(InvalidInput, match=r"^aad: "):
        cipher.encrypt("x", aad="")


def test_rotation_decrypts_old_tokens_and_encrypts_with_the_new_key() -> None:
    old = FieldCipher(KEY)
    old_token = old.encrypt("old secret", aad=OWNER)
    rotated = FieldCipher(OTHER_KEY, previous=[KEY])
    assert rotated.key_id == key_id(OTHER_KEY)
    assert rotated.key_ids == {key_id(KEY), key_id(OTHER_KEY)}
    assert rotated.decrypt(old_token, aad=OWNER) == "old secret"
    assert rotated.needs_rotation(old_token)
    new_token = rotated.reencrypt(old_token, aad=OWNER)
    assert new_token.split(":")[1] == key_id(OTHER_KEY)
    assert not rotated.needs_rotation(new_token)
    assert rotated.decrypt(new_token, aad=OWNER) == "old secret"
    # A cipher that does not hold the new key names the unknown key id.
    with pytest.raises(DecryptionError, match=key_id(OTHER_KEY)) as info:
        old.decrypt(new_token, aad=OWNER)
    assert_clean_error(info.value)


@pytest.mark.parametrize("key", [b"", b"x" * 16, b"x" * 31, b"x" * 33, b"x" * 64])
def test_key_must_be_32_bytes(key: bytes) -> None:
    with pytest.raises(InvalidInput) as info:
        FieldCipher(key)
    assert info.value.field == "encryption_key" and str(len(key)) in str(info.value)


def test_key_must_be_bytes() -> None:
    with pytest.raises(InvalidInput, match=r"^encryption_key: .*must be bytes"):
        FieldCipher("k" * 32)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="previous key #1"):
        FieldCipher(KEY, previous=[b"short"])


def test_repr_shows_ids_not_key_material() -> None:
    text = repr(FieldCipher(KEY, previous=[OTHER_KEY]))
    assert key_id(KEY) in text and key_id(OTHER_KEY) in text
    assert KEY.hex() not in text and base64.b64encode(KEY).decode() not in text


# --- the key from settings -------------------------------------------------------


@pytest.mark.parametrize("secret", [None, SecretStr(""), SecretStr("   ")])
def test_missing_key_is_a_configuration_error(secret: SecretStr | None) -> None:
    with pytest.raises(ConfigurationError) as info:
        FieldCipher.from_setting(secret)
    message = str(info.value)
    assert "MEMH_ENCRYPTION_KEY" in message
    assert "os.urandom(32)" in message and "plaintext" in message


@pytest.mark.parametrize(
    "encode",
    [
        lambda k: base64.b64encode(k).decode(),
        lambda k: base64.urlsafe_b64encode(k).decode().rstrip("="),
        lambda k: k.hex(),
        lambda k: k.hex().upper(),
        lambda k: f"  {base64.b64encode(k).decode()}\n",
    ],
    ids=["base64", "base64url-unpadded", "hex", "HEX", "whitespace"],
)
def test_key_formats(encode: Any) -> None:
    cipher = FieldCipher.from_setting(SecretStr(encode(KEY)))
    assert cipher.key_id == key_id(KEY)


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(b"k" * 16).decode(),
        base64.b64encode(b"k" * 48).decode(),
        "ab" * 16,
        "not a key at all!",
        "=====",
    ],
)
def test_malformed_key_setting_is_refused_without_echoing_it(text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        FieldCipher.from_setting(SecretStr(text))
    assert info.value.field == "encryption_key"
    assert "MEMH_ENCRYPTION_KEY" in str(info.value)
    assert text not in str(info.value)


def test_setting_lists_rotation_keys() -> None:
    setting = f"{base64.b64encode(OTHER_KEY).decode()},{KEY.hex()}"
    cipher = FieldCipher.from_setting(SecretStr(setting))
    assert cipher.key_id == key_id(OTHER_KEY)
    assert cipher.decrypt(FieldCipher(KEY).encrypt("v", aad=OWNER), aad=OWNER) == "v"
    with pytest.raises(InvalidInput, match="empty entry"):
        FieldCipher.from_setting(SecretStr(f"{KEY.hex()},"))


def test_settings_read_the_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    key = generate_key()
    monkeypatch.setenv("MEMH_ENCRYPTION_KEY", key)
    settings_ = Settings()
    assert settings_.encryption_key is not None
    assert key not in repr(settings_)
    assert FieldCipher.from_setting(settings_.encryption_key).key_id == key_id(
        base64.b64decode(key)
    )
    monkeypatch.delenv("MEMH_ENCRYPTION_KEY")
    with pytest.raises(ConfigurationError):
        FieldCipher.from_setting(Settings().encryption_key)


def test_generate_key() -> None:
    keys = {generate_key() for _ in range(50)}
    assert len(keys) == 50
    for key in keys:
        assert len(key) == 44 and len(base64.b64decode(key, validate=True)) == 32


# --- sealed values ---------------------------------------------------------------

VALUE: dict[str, Any] = {
    "name": "Alice",
    "phone": "call me on 13812345678 after 6pm",
    "contacts": [{"email": "alice.w@example.com"}, "id " + ID_BEIJING],
    "card": CARD_16,
    "mobile_as_number": 13912345678,
    "tags": ["vip", 3, True, None, 2.5],
}
RAW = ["Alice", "13812345678", "alice.w@example.com", ID_BEIJING, CARD_16, "13912345678"]


def test_seal_leaves_no_raw_pii(cipher: FieldCipher) -> None:
    sealed = seal_value(VALUE, cipher=cipher, aad=OWNER, pii=PII, now=NOW)
    assert is_sealed(sealed) and TOKEN_RE.fullmatch(sealed[SEALED])
    assert sealed[SEALED_AT] == NOW
    for ensure_ascii in (True, False):
        dumped = json.dumps(sealed, ensure_ascii=ensure_ascii)
        assert not contains_raw_pii(dumped)
        assert not any(raw in dumped for raw in RAW)
    # What has no PII stays as it was, so the value is still useful masked.
    assert sealed["name"] == "A**"  # a given name is personal data too
    assert sealed["tags"] == VALUE["tags"]
    assert sealed["phone"] == "call me on 138****5678 after 6pm"


def test_unseal_returns_the_original(cipher: FieldCipher) -> None:
    original = copy.deepcopy(VALUE)
    sealed = seal_value(VALUE, cipher=cipher, aad=OWNER, pii=PII, now=NOW)
    assert original == VALUE  # sealing does not touch its input
    assert unseal_value(sealed, cipher=cipher, aad=OWNER) == original
    # JSONB round trip: the stored form is plain JSON.
    assert unseal_value(json.loads(json.dumps(sealed)), cipher=cipher, aad=OWNER) == original


def test_sealed_value_moved_to_another_owner_fails(cipher: FieldCipher) -> None:
    sealed = seal_value(VALUE, cipher=cipher, aad="alice/profile/contact", pii=PII, now=NOW)
    with pytest.raises(DecryptionError) as info:
        unseal_value(sealed, cipher=cipher, aad="mallory/profile/contact")
    assert_clean_error(info.value)
    assert info.value.field == SEALED


def test_value_without_pii_passes_through(cipher: FieldCipher) -> None:
    value = {"seat": "aisle", "order": "ORD-2024-001", "count": 3}
    sealed = seal_value(value, cipher=cipher, aad=OWNER, pii=PII, now=NOW)
    assert sealed == value and SEALED not in sealed and SEALED_AT not in sealed
    assert unseal_value(sealed, cipher=cipher, aad=OWNER) == value
    assert anonymise_value(sealed) == value
    assert not needs_anonymising(sealed, now=NOW + 10 * DAY, after_s=DAY)


def test_anonymise_drops_the_ciphertext_for_good(cipher: FieldCipher) -> None:
    sealed = seal_value(VALUE, cipher=cipher, aad=OWNER, pii=PII, now=NOW)
    anonymised = anonymise_value(sealed)
    assert SEALED not in anonymised and SEALED_AT not in anonymised
    assert anonymised[ANONYMISED] is True and is_anonymised(anonymised)
    assert not is_sealed(anonymised)
    assert sealed[SEALED] not in json.dumps(anonymised)
    assert {k: v for k, v in anonymised.items() if k != ANONYMISED} == {
        k: v for k, v in sealed.items() if k not in (SEALED, SEALED_AT)
    }
    assert not contains_raw_pii(json.dumps(anonymised, ensure_ascii=False))
    # Nothing left to decrypt: reading it back gives the masked form, not the original.
    assert unseal_value(anonymised, cipher=cipher, aad=OWNER) == anonymised
    assert anonymise_value(anonymised) == anonymised


def test_needs_anonymising_after_the_deadline(cipher: FieldCipher) -> None:
    sealed = seal_value(VALUE, cipher=cipher, aad=OWNER, pii=PII, now=NOW)
    assert not needs_anonymising(sealed, now=NOW + DAY - 1, after_s=DAY)
    assert needs_anonymising(sealed, now=NOW + DAY, after_s=DAY)
    assert not needs_anonymising(anonymise_value(sealed), now=NOW + 2 * DAY, after_s=DAY)
    # A sealed value whose sealing time is lost is due: its deadline cannot be shown.
    undated = {k: v for k, v in sealed.items() if k != SEALED_AT}
    assert needs_anonymising(undated, now=NOW, after_s=DAY)
    with pytest.raises(InvalidInput, match=r"^after_s: "):
        needs_anonymising(sealed, now=NOW, after_s=-1)


@pytest.mark.parametrize("key", [SEALED, SEALED_AT, ANONYMISED])
def test_reserved_keys_are_refused(cipher: FieldCipher, key: str) -> None:
    with pytest.raises(InvalidInput, match=r"^value: uses reserved key"):
        seal_value({key: "x", "phone": "13812345678"}, cipher=cipher, aad=OWNER, pii=PII, now=NOW)


def test_keys_with_pii_are_masked_and_kept_apart(cipher: FieldCipher) -> None:
    # Both keys mask to "138****5678"; neither value may be lost.
    value = {"13812345678": "a", "138****5678": "b"}
    sealed = seal_value(value, cipher=cipher, aad=OWNER, pii=PII, now=NOW)
    assert not contains_raw_pii(readable(json.dumps(sealed)))
    assert "13812345678" not in json.dumps(sealed)
    assert sorted(v for k, v in sealed.items() if not k.startswith("_")) == ["a", "b"]
    assert unseal_value(sealed, cipher=cipher, aad=OWNER) == value


def test_invalid_values_are_refused(cipher: FieldCipher) -> None:
    with pytest.raises(InvalidInput, match=r"^value: "):
        seal_value(["13812345678"], cipher=cipher, aad=OWNER, pii=PII, now=NOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"^now: "):
        seal_value({"p": "13812345678"}, cipher=cipher, aad=OWNER, pii=PII, now=float("nan"))


# --- property: random JSON values with PII injected --------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)
_with_pii = st.builds(lambda a, p, b: f"{a} {p} {b}", _text, pii_values, _text)
_leaves = st.one_of(
    _text,
    _with_pii,
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
_keys = st.one_of(_text, _with_pii)
_json = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _json, max_size=5), _keys, _with_pii)
def test_seal_property(base: dict[str, Any], slot: str, injected: str) -> None:
    value = {**{k: v for k, v in base.items() if not k.startswith("_")}, f"x{slot}": injected}
    # check_json_object refuses the literal text "\u0000" as if it were a NUL (validation.py).
    assume("\\u0000" not in json.dumps(value, ensure_ascii=False))
    cipher = FieldCipher(KEY)
    sealed = seal_value(value, cipher=cipher, aad=OWNER, pii=PII, now=NOW)
    assert is_sealed(sealed)
    anonymised = anonymise_value(sealed)
    for form in (sealed, anonymised):
        for ensure_ascii in (True, False):
            text = json.dumps(form, ensure_ascii=ensure_ascii)
            # The detector reads what a reader can; the ciphertext holds no raw value.
            assert not contains_raw_pii(readable(text))
            assert injected.strip() not in text
    assert unseal_value(json.loads(json.dumps(sealed)), cipher=cipher, aad=OWNER) == value
    assert SEALED not in anonymised
