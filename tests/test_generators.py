"""Generators: reproducible bytes, valid scenarios, the promised mixtures, streaming memory."""

from __future__ import annotations

import io
import tracemalloc
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner

from memharness.scenarios.generate import DOMAINS, Mixture, generate_scenario, iter_users
from memharness.scenarios.loader import parse_scenario
from memharness.scenarios.model import EventStep, ForgetStep, ProbeStep, SayStep, to_epoch
from memharness.scenarios_cmd import scenarios
from reference.pii import RegexPiiMasker

_DAY = 86_400.0


def _text(domain: str, users: int, seed: int, zh_share: float = 0.5) -> str:
    out = io.StringIO()
    generate_scenario(out, domain=domain, users=users, seed=seed, zh_share=zh_share)
    return out.getvalue()


class _Sink(io.TextIOBase):
    """Counts what is written and keeps none of it (a /dev/null for memory tests)."""

    def __init__(self) -> None:
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)


@pytest.mark.parametrize("domain", DOMAINS)
def test_same_seed_same_bytes(domain: str) -> None:
    assert _text(domain, 40, 7) == _text(domain, 40, 7)
    assert _text(domain, 40, 7) != _text(domain, 40, 8)


def test_a_user_does_not_depend_on_how_many_follow() -> None:
    few = list(iter_users(domain="travel", users=5, seed=3))
    many = list(iter_users(domain="travel", users=50, seed=3))
    assert few == many[:5]


@pytest.mark.parametrize("domain", DOMAINS)
def test_generated_scenario_validates_and_matches_counts(domain: str) -> None:
    out = io.StringIO()
    counts = generate_scenario(out, domain=domain, users=120, seed=11)
    scenario = parse_scenario(out.getvalue(), source=f"{domain}.yaml")
    steps = [step for user in scenario.users for step in user.timeline]
    assert len(scenario.users) == counts["users"] == 120
    assert len(steps) == counts["steps"]
    assert sum(isinstance(s, EventStep) for s in steps) == counts["event"]
    assert sum(isinstance(s, ForgetStep) for s in steps) == counts["forget"]
    assert sum(isinstance(s, SayStep) and s.sensitive for s in steps) == counts["pii"]
    superseding = sum(
        1 for s in steps if isinstance(s, SayStep) for f in s.facts if f.supersedes is not None
    )
    assert superseding == counts["drift"] + (counts["event"] if domain == "assistant" else 0)
    assert all(isinstance(s, ProbeStep) for s in (user.timeline[-1] for user in scenario.users))


def test_mixture_proportions() -> None:
    mix = Mixture()
    total: Counter[str] = Counter()
    users = 3000
    for _, _, episodes in iter_users(domain="ecommerce", users=users, seed=5, mixture=mix):
        total.update({kind: 1 for kind, n in episodes.items() if n})
    assert abs(total["drift"] / users - mix.drift) < 0.04
    assert abs(total["repeat"] / users - (1 - mix.drift) * mix.repeat) < 0.04
    for kind in ("event", "forget", "pii", "noise", "long_gap", "thread"):
        expected = getattr(mix, kind)
        if kind == "noise":  # noise is drawn per session; a user has at least one chance
            assert total[kind] / users >= expected - 0.04
        else:
            assert abs(total[kind] / users - expected) < 0.04, kind


def test_long_gaps_are_over_100_days() -> None:
    mix = Mixture(long_gap=1.0)
    for _, steps, _ in iter_users(domain="assistant", users=20, seed=1, mixture=mix):
        ats = [step["at"] for step in steps]
        gaps = [to_epoch(b) - to_epoch(a) for a, b in pairwise(ats)]
        assert max(gaps) >= 100 * _DAY


def _marked(domain: str, users: int, seed: int) -> list[tuple[SayStep, str, str]]:
    """(statement, value, kind) of every value the generated statements mark."""
    scenario = parse_scenario(_text(domain, users, seed), source="x.yaml")
    assert all(user.pii_complete for user in scenario.users)
    return [
        (step, entry.value, entry.kind)
        for user in scenario.users
        for step in user.timeline
        if isinstance(step, SayStep)
        for entry in step.pii
    ]


def test_pii_is_real_pii() -> None:
    masker = RegexPiiMasker()
    marked = _marked("hotline", 300, 2)
    assert {kind for _, _, kind in marked} == {
        "cn_id", "mobile", "bank_card", "phone", "ssn", "name", "address",
    }  # fmt: skip
    for step, value, kind in marked:
        assert step.sensitive and len(step.pii) == 1, step.say
        if kind in ("cn_id", "mobile", "bank_card"):  # the kinds the regex detector knows
            found = masker.detect(step.say)
            assert [(m.text, m.kind) for m in found] == [(value, kind)], step.say
        elif kind == "ssn":
            area, group, serial = (int(part) for part in value.split("-"))
            assert 0 < area < 900 and area != 666 and group and serial, value
        elif kind == "phone":
            phonenumbers = pytest.importorskip("phonenumbers")
            number = phonenumbers.parse(value, None if value.startswith("+") else "US")
            if value.startswith("0"):  # a Chinese landline with its area code
                number = phonenumbers.parse(value, "CN")
            assert phonenumbers.is_valid_number(number), value


def test_addresses_said_in_an_address_change_are_marked() -> None:
    marked = [(s, v) for s, v, kind in _marked("assistant", 200, 5) if kind == "address"]
    changes = [s for s, _ in marked if not s.sensitive]  # the profile_updated episodes
    assert changes and all(s.facts[0].key == "address" for s in changes)
    assert all(value in s.say for s, value in marked)


def test_newer_pii_kinds_leave_every_other_draw_as_it_was() -> None:
    # The newer kinds come from a generator of their own: the steps' times, sessions and
    # facts are those the first kinds alone gave, only the disclosure's words differ.
    def shape(steps: list[dict[str, object]]) -> list[tuple[object, ...]]:
        return [(s["at"], s.get("session"), sorted(s)) for s in steps]

    only_first = Mixture(pii=1.0)
    for _, steps, _ in iter_users(domain="travel", users=60, seed=9, mixture=only_first):
        said = [s for s in steps if s.get("sensitive")]
        assert len(said) == 1
    users = list(iter_users(domain="travel", users=60, seed=9, mixture=only_first))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("memharness.scenarios.pii_values.NEW_KINDS_SHARE", 0.0)
        first_kinds = list(iter_users(domain="travel", users=60, seed=9, mixture=only_first))
    assert [shape(steps) for _, steps, _ in users] == [shape(steps) for _, steps, _ in first_kinds]
    changed = sum(a != b for (_, a, _), (_, b, _) in zip(users, first_kinds, strict=True))
    assert 0 < changed < len(users)


@pytest.mark.parametrize(("share", "chinese"), [(0.0, False), (1.0, True)])
def test_language_mix(share: float, chinese: bool) -> None:
    text = _text("ecommerce", 30, 4, zh_share=share)
    body = text.split("users:", 1)[1]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in body) is chinese


def test_memory_does_not_grow_with_users() -> None:
    """Users are streamed: peak memory for 1,000 users is about that of 100."""

    def peak(users: int) -> int:
        tracemalloc.start()
        generate_scenario(_Sink(), domain="ecommerce", users=users, seed=1)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    assert peak(1000) < 2 * peak(100) + 200_000


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="domain"):
        list(iter_users(domain="bank", users=1, seed=0))
    with pytest.raises(ValueError, match="users"):
        list(iter_users(domain="travel", users=0, seed=0))


def test_cli_generate_is_reproducible(tmp_path: Path) -> None:
    runner = CliRunner()
    files = [tmp_path / "a.yaml", tmp_path / "b.yaml"]
    for path in files:
        args = ["generate", "--domain", "travel", "--users", "25", "--seed", "9", "-o", str(path)]
        result = runner.invoke(scenarios, args)
        assert result.exit_code == 0, result.output
    assert files[0].read_bytes() == files[1].read_bytes()
    result = runner.invoke(scenarios, ["stats", str(files[0])])
    assert result.exit_code == 0 and "users              25" in result.output
