"""The Locust user of the load test: scripted conversations or scenario timelines, one
turn per task, each turn's layers fired as request events."""

from __future__ import annotations

import random
import time
from typing import Any

import gevent
from locust import User, task

from loadtests.conversations import render
from loadtests.pacing import run_paced
from loadtests.run import run_for
from loadtests.steps import StepRecorder
from loadtests.timelines import Play, is_turn, session_of
from memharness.scenarios.model import EventStep, ForgetStep, ProbeStep, SayStep, Step
from memharness.verdict.histograms import QUEUE, QUEUE_INTENDED, TURN_INTENDED, TURN_QUEUED
from reference.errors import layer_failure
from reference.models import Event
from reference.turns import TIMING_KEYS


class ConversationUser(User):
    """A user who plays scripted conversations, one turn per task, one session each; or,
    with a scenario (`loadtests/timelines.py`), scenario users' timelines, each play as
    a new memory user, its probes and events played right before the turn after them.

    Closed loop: a think time between turns, or pacing to its share of --rate. Open loop
    (--open-loop): no wait; each turn claims the next intended start from the process's
    arrival schedule, so users are the concurrency that serves a fixed arrival rate.
    """

    def on_start(self) -> None:
        self.load = run_for(self.environment)
        self.user_id = self.load.new_user_id()
        self.rng = random.Random(f"{self.load.options.seed}/{self.user_id}")
        self.pending: list[str | Step] = []
        self.session_id = ""
        self.conversations_played = 0
        self.task_started = time.perf_counter()
        self.step: int | None = None
        self.play: Play | None = None

    def wait_time(self) -> float:
        options = self.load.options
        if options.open_loop:
            return 0.0
        if options.rate > 0:  # closed-loop pacing: this user's share of the rate
            users = max(1, self.environment.runner.user_count if self.environment.runner else 1)
            interval = users * options.workers / options.rate
            return max(0.0, interval - (time.perf_counter() - self.task_started))
        return self.rng.uniform(*options.think_time)

    @task
    def say(self) -> None:
        self.task_started = time.perf_counter()
        if not self.pending:
            self._next_conversation()
        while self.pending and not is_turn(self.pending[0]):
            self._call(self.pending.pop(0))
        if not self.pending:
            return
        if self.load.recorder is not None:
            self._stepped_turn(self.load.recorder)
            return
        item = self.pending.pop(0)
        if self.load.schedule is None:
            self._play(item)
            return
        error, paced = run_paced(self.load.schedule, lambda: self._play(item))
        self._fire("wait", QUEUE_INTENDED, paced.lag_ms)
        self._fire("turn", TURN_INTENDED, paced.response_ms, error)

    def _stepped_turn(self, recorder: StepRecorder) -> None:
        """Rate steps: claim the next intended start (None: the timeline is over, idle)."""
        claimed = time.perf_counter()
        claim = recorder.schedule.claim(claimed)
        if claim is None:
            gevent.sleep(0.1)
            return
        intended, self.step = claim
        recorder.in_flight += 1
        try:
            ahead = intended - time.perf_counter()
            if ahead > 0:
                gevent.sleep(ahead)
            started = time.perf_counter()
            recorder.sends[self.step].record(intended=intended, claimed=claimed, sent=started)
            error = self._play(self.pending.pop(0))
            finished = time.perf_counter()
            self._fire("wait", QUEUE_INTENDED, max(0.0, started - intended) * 1000.0)
            self._fire("turn", TURN_INTENDED, (finished - intended) * 1000.0, error)
            recorder.finished(finished, ok=error is None, step=self.step)
            if error is None:
                recorder.record_service(self.step, intended, (finished - started) * 1000.0)
        finally:
            recorder.in_flight -= 1

    def _next_conversation(self) -> None:
        """The next conversation: a built-in one in a new session, or the next scenario
        user's timeline as a new memory user."""
        timelines = self.load.timelines
        if timelines is not None:
            if self.conversations_played:
                self.user_id = self.load.new_user_id()
            self.play = timelines.take(self.user_id)
            self.pending = list(self.play.steps)
        else:
            conversation = self.rng.choice(self.load.conversations)
            self.pending = list(render(conversation, self.rng))
            self.session_id = f"{self.user_id}-c{self.conversations_played}"
        self.conversations_played += 1

    def _play(self, item: str | Step) -> Exception | None:
        """One turn: a built-in utterance, a scenario's say or forget command."""
        if isinstance(item, str):
            return self._turn(item, self.session_id)
        assert isinstance(item, SayStep | ForgetStep)
        assert self.load.timelines is not None and self.play is not None
        session = session_of(self.user_id, item)
        if isinstance(item, ForgetStep):
            error = self._turn(item.forget, session)
        else:
            error = self._turn(item.say, session, dict(item.metadata) or None)
        self.load.timelines.count(self.play, item)  # not reached when the stop kills it
        return error

    def _call(self, step: str | Step) -> None:
        """A scenario's probe (a recall) or business event (published), timed as an op."""
        load = self.load
        assert load.timelines is not None
        assert isinstance(step, ProbeStep | EventStep) and self.play is not None
        name = "recall" if isinstance(step, ProbeStep) else "event"
        if isinstance(step, EventStep):
            # Counted as it is sent: the stop can kill this user after Redis took the
            # event and before the reply, and the maintenance process then applies it.
            load.timelines.count(self.play, step)
        with load.turn_slot:  # --serial: one call at a time, as for turns
            self._timed_call(name, step)
        if isinstance(step, ProbeStep):
            load.timelines.count(self.play, step)

    def _timed_call(self, name: str, step: ProbeStep | EventStep) -> None:
        load, system = self.load, self.load.system
        assert system is not None, "the memory is built at init in every process with users"
        started = time.perf_counter()
        try:
            if isinstance(step, ProbeStep):
                system.recall(
                    user_id=self.user_id,
                    session_id=session_of(self.user_id, step),
                    query=step.probe,
                    k=step.k,
                )
            else:
                event = Event(
                    name=step.event,
                    user_id=self.user_id,
                    at=system.clock.now(),
                    payload=dict(step.payload),
                )
                if load.bus is not None:
                    load.bus.publish(event)
                else:  # the in-memory backend: no other process sees these stores
                    system.handle_event(event)
        except Exception as exc:
            self._fire("op", name, (time.perf_counter() - started) * 1000.0, exc)
        else:
            self._fire("op", name, (time.perf_counter() - started) * 1000.0)

    def _turn(
        self, text: str, session_id: str, metadata: dict[str, Any] | None = None
    ) -> Exception | None:
        """One turn; fires its events. On failure, returns the error after firing it as a
        failure of the layer that raised and of the turn (the layers that finished before
        it are fired as the successes they were)."""
        system = self.load.system
        assert system is not None, "the memory is built at init in every process with users"
        ready = time.perf_counter()
        with self.load.turn_slot:
            started = time.perf_counter()
            try:
                result = system.turn(
                    user_id=self.user_id, session_id=session_id, text=text, metadata=metadata
                )
            except Exception as exc:
                finished = time.perf_counter()
                where = layer_failure(exc)
                if where is not None:
                    for key, ms in where.finished_ms.items():
                        self._fire("layer", key, ms)
                    self._fire("layer", where.layer, where.layer_ms, exc)
                self._fire("turn", "turn", (finished - started) * 1000.0, exc)
                self._fire_queued(ready, started, finished, exc)
                return exc
        finished = time.perf_counter()
        for key in TIMING_KEYS:
            self._fire("turn" if key == "turn" else "layer", key, result.timings_ms[key])
        self._fire_queued(ready, started, finished)
        return None

    def _fire_queued(
        self, ready: float, started: float, finished: float, exc: Exception | None = None
    ) -> None:
        """--serial: the wait for this process's turn slot, and the turn with it."""
        if self.load.options.serial:
            self._fire("wait", QUEUE, (started - ready) * 1000.0)
            self._fire("turn", TURN_QUEUED, (finished - ready) * 1000.0, exc)

    def _fire(
        self, request_type: str, name: str, ms: float, exception: BaseException | None = None
    ) -> None:
        self.environment.events.request.fire(
            request_type=request_type,
            name=name,
            response_time=ms,
            response_length=0,
            exception=exception,
            context={"memh_env": self.environment, "memh_step": self.step},
        )
