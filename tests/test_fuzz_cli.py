"""Bad input on the command line: every `memharness` option that takes a free value, fed
hostile values, ends in a usage error naming the option (or, for a file, the file, line
and field), or is accepted; never a traceback, and nothing is run or written on a refusal.

Options typed by click (integers, ranges, choices) are click's business; these are the
ones the commands parse themselves: `run --strategy/--grid/--run-id`, `load --steps/
--sla/--rates/--step-duration/--duration/--run-id`, `capacity --target` (a file), and
`strategies show NAME`. Nothing runs: `run` gets a scenario that does not load (it is
read after the options are checked), `load` gets a stand-in for the Locust process, and
`capacity` an empty reports directory. `MEMH_FUZZ_EXAMPLES` scales the examples.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memharness.cli import main
from reference.policy.loading import BUILTINS

EXAMPLES = max(10, int(os.environ.get("MEMH_FUZZ_EXAMPLES", "150")) // 3)

hostile = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "*",
            "../..",
            "/etc/passwd",
            "a:b=c",
            "hybrid:",
            "hybrid:ttl.default_s=",
            "hybrid:ttl.default_s=1e999",
            "hybrid:ttl.default_s=nan",
            "hybrid:ttl.default_s=-1",
            "hybrid:no.such.key=1",
            "hybrid:ttl.default_s=[1, {a: *b}]",
            "importance:importance.base_s=1,2;importance.base_s=3",
            "fixed_ttl:ttl.default_s=" + ",".join(["1"] * 200),
            "10x",
            "0x10s",
            "10x30s/0",
            "turn=abc",
            "turn=0",
            "turn=5@p100",
            "=5",
            "auto,1",
            "0",
            "1,,2",
            "5m5",
            "\x00",
            "x" * 10_000,
            "$and",
            "'; DROP TABLE x; --",
        ]
    ),
    st.text(max_size=30),
    st.text(
        alphabet=st.sampled_from(list("hybrid:ttl.default_s=0123456789,;x@p/sm*[]{}")), max_size=40
    ),
)


def invoke(args: list[str]) -> Result:
    """Run the CLI in process; anything but a clean exit or a usage error fails."""
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{args!r} raised {result.exception!r}") from result.exception
    assert "Traceback" not in result.output, result.output
    return result


def refused_naming(result: Result, *names: str) -> bool:
    """True for a usage error (exit 2) or a ClickException (exit 1) naming one of `names`."""
    if result.exit_code in (1, 2):
        assert any(name in result.output for name in names), (names, result.output[-500:])
        return True
    return False


@pytest.fixture
def broken_scenario(tmp_path: Path) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nusers: 5\n", encoding="utf-8")
    return path


def _settings() -> Any:
    return settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.mark.parametrize("option", ["--strategy", "--grid", "--run-id"])
def test_run_options(option: str, broken_scenario: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    produced: Counter[str] = Counter()

    @_settings()
    @given(value=hostile)
    def fuzz(value: str) -> None:
        args = ["run", "--scenario", str(broken_scenario), "--backend", "memory"]
        result = invoke([*args, "--embedder", "hashing", "--out", str(out), option, value])
        # The scenario cannot load, so a run that got past the options stops at it.
        assert refused_naming(result, option, str(broken_scenario)), result.output
        produced["refused: the option" if option in result.output else "refused: scenario"] += 1
        assert not out.exists(), "a refused run wrote results"

    fuzz()
    print(f"\nfuzz[run {option}]: {dict(produced)}")


LOAD_OPTIONS = ["--steps", "--sla", "--rates", "--step-duration", "--duration", "--run-id"]


@pytest.mark.parametrize("option", LOAD_OPTIONS)
def test_load_options(option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    def stand_in(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        started.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr("memharness.load_run.subprocess.run", stand_in)
    produced: Counter[str] = Counter()

    @_settings()
    @given(value=hostile)
    def fuzz(value: str) -> None:
        before = len(started)
        out = tmp_path / uuid.uuid4().hex
        args = ["load", "--backend", "memory", "--embedder", "hashing", "--out", str(out)]
        result = invoke([*args, option, value])
        if refused_naming(result, option):
            produced["refused"] += 1
            assert len(started) == before and not out.exists(), "a refused load started"
        else:
            assert result.exit_code == 0 and len(started) == before + 1, result.output
            produced["accepted"] += 1

    fuzz()
    print(f"\nfuzz[load {option}]: {dict(produced)}")


def test_capacity_target_files(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    target = tmp_path / "target.yaml"
    produced: Counter[str] = Counter()

    @_settings()
    @given(
        field=st.sampled_from(["users", "turns_per_user_per_day", "slo_ms", "nodes"]), value=hostile
    )
    def fuzz(field: str, value: str) -> None:
        text = f"users: 1000\nturns_per_user_per_day: 20\n{field}: {value!r}\n"
        target.write_text(text, encoding="utf-8")
        result = invoke(["capacity", "--target", str(target), "--reports", str(reports)])
        assert result.exit_code == 1, result.output
        if "bad target" in result.output:
            assert f"{target}:" in result.output, result.output
            produced["bad target (file:line: field)"] += 1
        else:  # a valid target: it stops at the missing runs
            assert "no step-load run" in result.output, result.output
            produced["valid target"] += 1
        assert list(reports.iterdir()) == [], "capacity wrote a report for no runs"

    fuzz()
    print(f"\nfuzz[capacity --target]: {dict(produced)}")


def test_strategies_show_names() -> None:
    """Each name has one right outcome, known before the command runs: click's help for
    -h, -hh... and --help; a usage error (exit 2) for any other option-like name; the
    strategy for a built-in name; a refusal naming what was refused (exit 1) otherwise
    ("-" alone is a name, not an option)."""
    produced: Counter[str] = Counter()

    option_like = ["-", "--", "-h", "-hh", "--help", "--help=x", "-hx", "-x", "--file"]
    names = st.one_of(hostile, st.sampled_from([*option_like, "hybrid", "nope.yaml", "/\x00"]))

    @_settings()
    @given(name=names)
    def fuzz(name: str) -> None:
        result = invoke(["strategies", "show", name])
        usage = "strategies show [OPTIONS] NAME"
        if re.fullmatch(r"-h+|--help", name):
            assert result.exit_code == 0, result.output
            assert usage in result.output and "Error" not in result.output, result.output
            produced["help"] += 1
        elif name.startswith("-") and name != "-":
            assert result.exit_code == 2, result.output
            assert "Error: " in result.output, result.output
            produced["usage error"] += 1
        elif name in BUILTINS:
            assert result.exit_code == 0, result.output
            assert result.output.startswith("# fingerprint: "), result.output
            produced["shown"] += 1
        else:
            assert result.exit_code == 1, result.output
            assert "Error: " in result.output and "Traceback" not in result.output
            if not (name.endswith((".yaml", ".yml")) or "/" in name):  # not read as a file
                assert "no strategy named" in result.output, result.output
            produced["refused"] += 1

    fuzz()
    print(f"\nfuzz[strategies show]: {dict(produced)}")
