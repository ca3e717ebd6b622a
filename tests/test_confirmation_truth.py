"""The ground truth of "forget everything" with confirmation: from the script (the
`confirms` answer and its time) and the strategy's `forget_commands` setting, never from
what the memory replied; and replays of `scenarios/forget_confirmation.yaml` that meet it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memharness.scenarios import ScenarioError, load_scenario, parse_scenario
from memharness.scenarios.model import ProbeStep
from memharness.sim.truth import FactState, UserTruth
from reference.policy.loading import load_strategy
from reference.policy.rules import ForgetCommandsRule
from tests.fixtures.replay import replay_scenario

SUITE = Path(__file__).resolve().parents[1] / "scenarios"
ASKS = ForgetCommandsRule(confirm_everything=True, confirm_within_s=120)
AT_ONCE = ForgetCommandsRule()
OFF = ForgetCommandsRule(enabled=False)

SCRIPT = """
name: t
users:
  - id: a
    timeline:
      - {at: 100, session: s, say: My address is 1 Main St., facts: [{id: f, type: profile}]}
      - {at: 200, session: s, forget: forget everything about me, scope: everything, facts: [f]}
      - {at: REPLY_AT, session: s, say: "REPLY", CONFIRMS}
      - {at: 1000, session: s, probe: What is my address?, needed: [f], forbidden: []}
      - {at: 1001, session: s, probe: Where do I live?, forbidden: [f]}
"""


def truth_of(reply: str, at: float, confirms: str, rule: ForgetCommandsRule) -> UserTruth:
    text = SCRIPT.replace("REPLY_AT", str(at)).replace("REPLY", reply)
    text = text.replace("CONFIRMS", f"confirms: {confirms}" if confirms else "facts: []")
    return UserTruth.of(parse_scenario(text).users[0], rule)


def lists(truth: UserTruth, user_steps: list[ProbeStep]) -> list[tuple[list[str], list[str]]]:
    return [(p.needed, p.forbidden) for p in map(truth.judged, user_steps)]


def probes(truth_text_reply: str = "yes") -> list[ProbeStep]:
    text = SCRIPT.replace("REPLY_AT", "250").replace("REPLY", truth_text_reply)
    steps = parse_scenario(text.replace("CONFIRMS", "confirms: true")).users[0].timeline
    return [s for s in steps if isinstance(s, ProbeStep)]


def test_a_strategy_that_asks_erases_at_a_confirmation_in_time() -> None:
    truth = truth_of("yes", 250, "true", ASKS)
    assert truth.state("f", 249) is FactState.VALID  # asked: nothing erased yet
    assert truth.state("f", 250) is FactState.ERASED
    assert truth.erased_by == {2: ["f"]}  # erased by the confirming turn
    assert lists(truth, probes()) == [([], []), ([], ["f"])]


@pytest.mark.parametrize(
    ("reply", "at", "confirms"),
    [("no", 250, "false"), ("yes", 321, "true"), ("book a taxi", 250, "")],
    ids=["refused", "late", "unrelated"],
)
def test_a_strategy_that_asks_spares_without_a_confirmation_in_time(
    reply: str, at: float, confirms: str
) -> None:
    truth = truth_of(reply, at, confirms, ASKS)
    assert truth.state("f", 2000) is FactState.VALID and truth.erased_by == {}
    assert lists(truth, probes()) == [(["f"], []), ([], [])]  # needed, and not forbidden


@pytest.mark.parametrize("confirms", ["true", "false"])
def test_a_strategy_that_does_not_ask_erases_at_the_command(confirms: str) -> None:
    truth = truth_of("yes" if confirms == "true" else "no", 250, confirms, AT_ONCE)
    assert truth.state("f", 199) is FactState.VALID
    assert truth.state("f", 200) is FactState.ERASED and truth.erased_by == {1: ["f"]}
    assert lists(truth, probes()) == [([], []), ([], ["f"])]


def test_commands_off_erase_nothing() -> None:
    truth = truth_of("yes", 250, "true", OFF)
    assert truth.state("f", 2000) is FactState.VALID and truth.erased_by == {}


def test_the_scenario_under_hybrid_and_keep_all() -> None:
    users = {u.id: u for u in load_scenario(SUITE / "forget_confirmation.yaml").users}
    hybrid = load_strategy("hybrid").forget_commands
    erased = {
        name: {f for f in ("grace_addr", "hank_milk", "ivy_company", "jack_email", "lin_addr",
                           "wang_company", "zhao_spicy")
               if f in (t := UserTruth.of(users[name], hybrid)).changes
               and t.state(f, 2e9) is FactState.ERASED}
        for name in users
    }  # fmt: skip
    assert erased == {
        "grace": {"grace_addr"}, "hank": set(), "ivy": set(), "jack": set(),
        "lin_mei": {"lin_addr"}, "wang_lei": set(), "zhao_min": set(),
    }  # fmt: skip
    for user in users.values():  # without asking, every command erases at once
        truth = UserTruth.of(user, AT_ONCE)
        for fact_id in next(s.facts for s in user.timeline if hasattr(s, "forget")):
            assert truth.state(fact_id, 2e9) is FactState.ERASED


def test_confirms_must_answer_a_forget_everything(tmp_path: Path) -> None:
    text = SCRIPT.replace("REPLY_AT", "250").replace("REPLY", "yes")
    text = text.replace("CONFIRMS", "confirms: true").replace("scope: everything", "scope: topic")
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace("forget everything about me", "forget my address"))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    message = str(err.value)
    assert "bad.yaml:8: users[0].timeline[2].confirms: answers a forget command" in message


@pytest.mark.parametrize("name", ["hybrid", "keep_all"])
def test_replays_meet_the_truth(tmp_path: Path, name: str) -> None:
    text = (SUITE / "forget_confirmation.yaml").read_text(encoding="utf-8")
    result = replay_scenario(tmp_path, text, load_strategy(name), prefix=f"fc_{name}")
    assert result.leaked == 0, result.leaks
    verdicts = [v for r in result.probe_records for v in r["verdicts"].values()]
    assert "forbidden hit" not in verdicts and "leak" not in verdicts
    # Under hybrid the refused, late and dropped requests keep their facts, which the
    # probes need (5, and jack's table); keep_all erased all but the table at once.
    assert result.needed == (6 if name == "hybrid" else 1)
    assert result.over_forgotten == 0  # nothing erased that the script did not confirm
