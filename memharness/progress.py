"""Progress of a command's slow phases, on stderr: the one way memharness shows it.

A phase is anything that may take more than a few seconds (starting workers, embedding
texts ahead, replaying a strategy, a rate step of a load, writing a report). It prints a
line when it starts and one when it ends, with its elapsed seconds:

    embedding ahead: locomo, 4 users on 2 workers ...
    embedding ahead: locomo, 4 users on 2 workers: done in 57.0 s

A phase that counts its work (`Phase.update`) also draws a live line between the two
on a terminal, redrawn in place (a carriage return); piped into a file or another
program there is no live line, only the start and the end: no carriage returns in logs.
The command's own output printed during a live phase goes through `Progress.echo`, which
clears the live line first.

No phase stays silent: while one runs, every `HEARTBEAT_S` seconds without a line or a
live redraw of it, a heartbeat says it still runs (`<title>: still running, 40 s`): a
line when piped, the live line on a terminal.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

__all__ = ["Phase", "Progress"]

_CLEAR = "\r\x1b[K"  # back to the line's start, erase it
#: Seconds a phase may go without a word before its heartbeat.
HEARTBEAT_S = 10.0


class Progress:
    """Where phases are shown: `stream` (stderr by default, looked up when written to, so
    a test's capture sees it), live when it is a terminal unless `live` says otherwise;
    nothing at all when not `enabled`. `clock` gives seconds (injected in tests)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        enabled: bool = True,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool | None = None,
    ) -> None:
        self._stream = stream
        self.enabled = enabled
        self._live = live
        self.clock = clock
        # A heartbeat thread by default on the real clock; with an injected clock (a
        # test) none unless asked: the test calls `Phase.beat` itself.
        self.heartbeat = clock is time.monotonic if heartbeat is None else heartbeat
        self._drawn: Phase | None = None  # the phase whose live line is on screen
        self._lock = threading.RLock()  # the heartbeat writes from its own thread
        self.said = clock()  # when a phase last showed anything

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    @property
    def live(self) -> bool:
        if self._live is not None:
            return self._live
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    @property
    def drawing(self) -> bool:
        """True when `Phase.update` draws (enabled, on a terminal): worth computing."""
        return self.enabled and self.live

    def start(self, title: str, *, total: int | None = None, unit: str = "") -> Phase:
        """Begin a phase (its start line now); end it with `Phase.end` or a `with` block."""
        phase = Phase(self, title, total=total, unit=unit)
        self._line(f"{title} ...")
        if self.enabled and self.heartbeat:
            threading.Thread(target=phase._heartbeat, daemon=True).start()
        return phase

    def echo(self, line: str, *, err: bool = False) -> None:
        """A line of the command's own output (stdout, or stderr with `err`), printed
        below a live line rather than into it."""
        with self._lock:
            self._clear()
            target = self.stream if err else sys.stdout
            target.write(line + "\n")
            target.flush()

    def _line(self, text: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._clear()
            self.stream.write(text + "\n")
            self.stream.flush()
            self.said = self.clock()

    def _draw(self, phase: Phase, text: str) -> None:
        if not self.drawing:
            return
        with self._lock:
            self.stream.write(_CLEAR + text)
            self.stream.flush()
            self._drawn = phase
            self.said = self.clock()

    def _clear(self) -> None:
        if self._drawn is not None:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._drawn = None


class Phase:
    """One phase of a `Progress`: `update` while it runs (drawn live on a terminal only),
    `end` when it is over (a summary after its elapsed time); as a context manager it
    ends by itself, 'failed' or 'interrupted' when an exception leaves the block."""

    def __init__(self, progress: Progress, title: str, *, total: int | None, unit: str) -> None:
        self.progress = progress
        self.title = title
        self.total = total
        self.unit = unit
        self.started = progress.clock()
        self.ended = False
        self.last = ""  # the last update's figures: what a piped heartbeat shows
        self._stopped = threading.Event()

    def elapsed(self) -> float:
        return self.progress.clock() - self.started

    def update(self, done: int, detail: str = "") -> None:
        """`done` units of `total` so far, and a few words more (live line only)."""
        if self.ended:
            return
        elapsed = self.elapsed()
        parts = [self.title]
        if self.total:
            parts.append(f"{done / self.total:4.0%} {done:,}/{self.total:,} {self.unit}".rstrip())
        else:
            parts.append(f"{done:,} {self.unit}".rstrip())
        if elapsed > 0 and self.unit:
            parts.append(f"{done / elapsed:,.0f} {self.unit}/s")
        if detail:
            parts.append(detail)
        self.last = "  ".join(parts)
        self.progress._draw(self, f"{self.last}  {elapsed:.0f} s")

    def end(self, summary: str = "", *, outcome: str = "done in") -> None:
        """The end line: '<title>: done in 12.3 s: <summary>'; once (later calls do nothing)."""
        if self.ended:
            return
        self.ended = True
        self._stopped.set()
        tail = f": {summary}" if summary else ""
        self.progress._line(f"{self.title}: {outcome} {self.elapsed():.1f} s{tail}")

    def beat(self) -> None:
        """The heartbeat, when the phase showed nothing for `HEARTBEAT_S`: a line when
        piped, its live line on a terminal."""
        progress = self.progress
        if self.ended or progress.clock() - progress.said < HEARTBEAT_S:
            return
        text = f"{self.title}: still running, {self.elapsed():.0f} s"
        if self.last and not progress.drawing:
            text = f"{self.last}  {self.elapsed():.0f} s"
        if progress.drawing:
            progress._draw(self, text)
        else:
            progress._line(text)

    def _heartbeat(self) -> None:
        while not self._stopped.wait(1.0):
            self.beat()

    def __enter__(self) -> Phase:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self.end()
        elif issubclass(kind, KeyboardInterrupt):
            self.end(outcome="interrupted after")
        else:
            self.end(outcome="failed after")
