"""Red team: European names and addresses said to the service under `hybrid` never sit
in plaintext in the answer's masked_text, the STM, the LTM (values and audit), the
session, whatever is extracted from them (issue 37, finding 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memharness.serve.auth import KeyStore
from reference.ltm.filters import LtmFilter
from reference.stm.filters import StmFilter
from tests.serve_support import auth, client_for, memory_system

SAID = [
    ("My address is Hauptstrasse 12, 10115 Berlin.", ["Hauptstrasse 12", "10115"]),
    ("I live at 12 Rue de Rivoli, 75001 Paris.", ["Rue de Rivoli", "75001"]),
    ("My new address is Lindenweg 5, 04109 Leipzig.", ["Lindenweg 5", "04109"]),
    ("My name is Pia Schulz.", ["Pia Schulz", "Schulz"]),
    ("Ich heiße Jürgen Müller.", ["Jürgen Müller", "Müller"]),
    ("Mi dirección es Calle Mayor 5, 28013 Madrid.", ["Calle Mayor 5", "28013"]),
    ("Il mio indirizzo è Via Garibaldi 12, 20121 Milano.", ["Garibaldi", "20121"]),
]


@pytest.mark.parametrize(("text", "secrets"), SAID)
def test_names_and_addresses_are_masked_everywhere_and_sealed_in_ltm(
    tmp_path: Path, text: str, secrets: list[str]
) -> None:
    system = memory_system("rtpii", tmp_path)
    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    with client_for(system, keys) as client:
        answer = client.post(
            "/v1/turn",
            headers=auth(key),
            json={"user_id": "pia", "session_id": "s1", "text": text},
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
    user = "acme.pia"
    stm = system.stm.records(filter=StmFilter(user_id=user, include_dead=True))
    facts = system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True))
    audit = system.ltm.audit_log(user_id=user)
    session = system.session.get(user_id=user, session_id="s1")
    stored = json.dumps(
        {
            "masked": body["masked_text"],
            "context": body["context"],
            "stm": [(r.text, r.metadata) for r in stm],
            "ltm": [(f.key, f.value, f.text) for f in facts],
            "audit": [(a.old_value, a.new_value, a.cause) for a in audit],
            "session": None if session is None else session.task_state,
        },
        ensure_ascii=False,
    )
    for secret in secrets:
        assert secret not in stored, (secret, stored)
    for fact in facts:
        # A value that came from text with PII in it is sealed, and unseals to the original.
        assert "_sealed" in fact.value, fact.value
        original = json.dumps(system.reveal(fact), ensure_ascii=False)
        assert any(s in original for s in secrets), original
