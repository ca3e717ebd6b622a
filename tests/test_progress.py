"""Progress lines (`memharness.progress`) and the verbosity switch (`memharness.verbosity`)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from memharness import verbosity
from memharness.progress import Progress


class Clock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_piped_progress_is_a_line_as_each_phase_starts_and_ends() -> None:
    out, clock = io.StringIO(), Clock()  # a StringIO is not a terminal: no live line
    progress = Progress(out, clock=clock)
    with progress.start("embedding ahead: locomo, 4 users", total=2662, unit="steps") as phase:
        for done in (10, 1192, 2662):
            clock.now += 1.5
            phase.update(done, "1 user done")
    clock.now += 0.25
    with progress.start("writing the report") as report:
        clock.now += 1.0
        report.end("summary.md")
    assert "\r" not in out.getvalue()
    assert out.getvalue().splitlines() == [
        "embedding ahead: locomo, 4 users ...",
        "embedding ahead: locomo, 4 users: done in 4.5 s",
        "writing the report ...",
        "writing the report: done in 1.0 s: summary.md",
    ]


def test_a_silent_phase_has_a_heartbeat_every_ten_seconds() -> None:
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, clock=clock)  # an injected clock: the test beats itself
    with progress.start("starting Ray and 2 worker(s)") as phase:
        clock.now += 9.0
        phase.beat()  # said something 9 s ago: quiet
        clock.now += 2.0
        phase.beat()
        phase.beat()  # just said it
        clock.now += 10.0
        phase.beat()
    assert out.getvalue().splitlines()[1:] == [
        "starting Ray and 2 worker(s): still running, 11 s",
        "starting Ray and 2 worker(s): still running, 21 s",
        "starting Ray and 2 worker(s): done in 21.0 s",
    ]
    assert Progress(out).heartbeat and not Progress(out, clock=clock).heartbeat
    counted = Progress(out, clock=clock)
    with counted.start("seeding", total=10, unit="rows") as phase:
        phase.update(4)
        clock.now += 10.0
        phase.beat()
    assert "seeding   40% 4/10 rows  10 s\n" in out.getvalue()


def test_a_phase_says_when_it_failed_or_was_interrupted() -> None:
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, clock=clock)
    with pytest.raises(ValueError), progress.start("replaying drift"):
        clock.now += 2.0
        raise ValueError("boom")
    with pytest.raises(KeyboardInterrupt), progress.start("replaying long_gap"):
        raise KeyboardInterrupt
    assert out.getvalue().splitlines()[1::2] == [
        "replaying drift: failed after 2.0 s",
        "replaying long_gap: interrupted after 0.0 s",
    ]


def test_a_live_line_is_redrawn_in_place_and_cleared_for_other_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, clock = io.StringIO(), Clock()
    progress = Progress(out, live=True, clock=clock)
    phase = progress.start("hybrid: replaying drift", total=200, unit="steps")
    clock.now += 2.0
    phase.update(100, "3 users done")
    progress.echo("  hybrid  recall 28%")  # the command's own line, on stdout
    phase.end()
    assert capsys.readouterr().out == "  hybrid  recall 28%\n"
    clear = "\r\x1b[K"
    assert out.getvalue() == (
        "hybrid: replaying drift ...\n"
        f"{clear}hybrid: replaying drift   50% 100/200 steps  50 steps/s  3 users done  2 s"
        f"{clear}"  # cleared before the command's line
        "hybrid: replaying drift: done in 2.0 s\n"
    )


def test_disabled_progress_prints_nothing_but_the_commands_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    progress = Progress(out, enabled=False, live=True)
    with progress.start("starting Ray", total=3, unit="steps") as phase:
        phase.update(1)
        progress.echo("a result")
    assert out.getvalue() == "" and not progress.drawing
    assert capsys.readouterr().out == "a result\n"


RAY_NOTICE = f"{verbosity.RAY_AUTH_NOTICE_LOGGER}.authentication_token_setup"


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No -v, the loggers this touches at their defaults (an earlier test in this process
    may have quietened Ray's), and put back as they were afterwards."""
    monkeypatch.delenv(verbosity.VERBOSE_ENV, raising=False)
    names = ("", "ray", verbosity.RAY_AUTH_NOTICE_LOGGER, RAY_NOTICE, "pgserver")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names[1:]:
        logging.getLogger(name).setLevel(logging.NOTSET)
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_without_verbose_third_party_info_and_notices_are_hidden(
    quiet_env: None, caplog: pytest.LogCaptureFixture
) -> None:
    verbosity.configure(False)
    logging.getLogger("pgserver").info("Running commandline: pg_ctl stop")
    assert "pg_ctl" not in caplog.text  # Python's default: warnings and errors only
    assert verbosity.locust_loglevel() == "WARNING"
    logging.getLogger("ray").setLevel(logging.INFO)  # what `import ray` does
    verbosity.quiet_ray()
    notice = logging.getLogger(RAY_NOTICE)
    assert not notice.isEnabledFor(logging.WARNING)  # "Token authentication is enabled"
    assert not logging.getLogger("ray").isEnabledFor(logging.INFO)
    assert logging.getLogger("ray.worker").isEnabledFor(logging.WARNING)  # real warnings stay


def test_verbose_shows_them_and_passes_on_to_child_processes(
    quiet_env: None, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(verbosity.VERBOSE_ENV, "0")  # restored after the test
    verbosity.configure(True)
    assert verbosity.verbose()
    assert verbosity.locust_loglevel() == "INFO"
    logging.getLogger("pgserver").info("Running commandline: pg_ctl stop")
    assert "pg_ctl stop" in caplog.text
    logging.getLogger("ray").setLevel(logging.INFO)
    verbosity.quiet_ray()
    notice = logging.getLogger(RAY_NOTICE)
    assert notice.isEnabledFor(logging.WARNING)
