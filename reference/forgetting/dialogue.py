"""A turn's forget command, and the confirmation "forget everything" may wait for.

`forget_turn` decides what a turn does about forgetting, before anything is stored:

- under `forget_commands: false` (`ForgetCommandsRule.enabled`), nothing: the turn is an
  ordinary one;
- a forget command is carried out at once (`ForgettingEngine.forget`), except "forget
  everything" under `confirm_everything`: then nothing is erased, a pending confirmation
  is kept in the session's task state (`PENDING_KEY`: when it was asked, until when it
  may be confirmed), and the reply warns and asks, in the user's language;
- while a confirmation is pending in this session, the user's next turn answers it
  (`reference.policy.confirmation`): a confirming reply within the time limit erases
  everything, as the command does without confirmation; a refusal cancels; a reply
  after the limit cancels (`expired`); anything else cancels and is then an ordinary
  turn (or a command of its own).

**Permission.** Only the user who asked can confirm: the pending request lives in that
user's own session (the session layer is keyed per user), so a turn from another user
id, even with the same session id, never sees it; and it must come in the same
conversation, on time. The reference has no authentication of its own: the user id is
the identity the caller vouches for, as for every other call.

The time is the engine's clock, so a virtual clock decides "on time" in simulations.
The request lives in the session: a session that expires before the deadline (its TTL
is 30 minutes by default, the deadline 2) takes the request with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from reference.forgetting.plans import ForgetReport
from reference.models import SessionState
from reference.policy.confirmation import (
    Language,
    language_of,
    parse_confirmation,
    reply_text,
)
from reference.policy.forget_commands import ForgetCommand, parse_forget_command
from reference.policy.intent import memoised

if TYPE_CHECKING:
    from reference.forgetting.engine import ForgettingEngine

#: The session task-state key of a pending "forget everything".
PENDING_KEY = "pending_forget_everything"

#: What became of a confirmation in this turn: asked for, confirmed, refused, too late,
#: or dropped by an unrelated message.
Confirmation = Literal["asked", "confirmed", "refused", "expired", "dropped"]

_EVERYTHING = ForgetCommand("everything")
_forget_command = memoised(parse_forget_command)


@dataclass(frozen=True, slots=True)
class ForgetTurn:
    """What a turn did about forgetting.

    `handled`: the utterance was a command or an answer, and is not stored; `forgotten`:
    the report of an erasure; `reply`: what the assistant should say (None: nothing in
    particular); `clears_window`: the context window is gone (everything, or session).
    """

    handled: bool = False
    forgotten: ForgetReport | None = None
    reply: str | None = None
    confirmation: Confirmation | None = None
    clears_window: bool = False


_ORDINARY = ForgetTurn()


def forget_turn(
    engine: ForgettingEngine, state: SessionState, masked: str, *, user_id: str, session_id: str
) -> ForgetTurn:
    """What the turn of `masked` text does about forgetting (see the module docstring);
    `state` is the session as the turn found it."""
    rule = engine.strategy.forget_commands
    if not rule.enabled:
        return _ORDINARY
    language = language_of(masked)
    pending = state.task_state.get(PENDING_KEY)
    if isinstance(pending, dict):
        # A bare "ok" to a question asked in Chinese is answered in Chinese.
        language = "zh" if language == "zh" or pending.get("language") == "zh" else "en"
        _write_pending(engine, state, user_id, session_id, None)
        answer = parse_confirmation(masked)
        if answer == "confirm":
            if engine.clock.now() <= float(pending.get("until", 0.0)):
                report = engine.forget(_EVERYTHING, user_id=user_id, session_id=session_id)
                erased = reply_text("erased", language)
                return ForgetTurn(True, report, erased, "confirmed", clears_window=True)
            return ForgetTurn(True, None, reply_text("expired", language), "expired")
        if answer == "refuse":
            return ForgetTurn(True, None, reply_text("cancelled", language), "refused")
        # Neither: the request is dropped, and the message is a turn of its own.
        turn = _command_turn(engine, state, masked, language, user_id, session_id)
        if turn.handled:
            return dataclasses.replace(turn, confirmation=turn.confirmation or "dropped")
        return ForgetTurn(reply=reply_text("cancelled", language), confirmation="dropped")
    return _command_turn(engine, state, masked, language, user_id, session_id)


def _command_turn(
    engine: ForgettingEngine,
    state: SessionState,
    masked: str,
    language: Language,
    user_id: str,
    session_id: str,
) -> ForgetTurn:
    command = _forget_command(masked)
    if command is None:
        return _ORDINARY
    rule = engine.strategy.forget_commands
    if command.scope == "everything" and rule.confirm_everything:
        now = engine.clock.now()
        pending = {"asked_at": now, "until": now + rule.confirm_within_s, "language": language}
        _write_pending(engine, state, user_id, session_id, pending)
        ask = reply_text("ask", language, within_s=rule.confirm_within_s)
        return ForgetTurn(True, None, ask, "asked")
    report = engine.forget(command, user_id=user_id, session_id=session_id)
    kind = "erased" if command.scope == "everything" else command.scope
    reply = reply_text(kind, language, topic=command.topic or _that(language))
    return ForgetTurn(True, report, reply, clears_window=command.scope != "topic")


def _that(language: Language) -> str:
    return "这个" if language == "zh" else "that"


def _write_pending(
    engine: ForgettingEngine,
    state: SessionState,
    user_id: str,
    session_id: str,
    pending: dict[str, Any] | None,
) -> None:
    """Store (or, with None, remove) the pending request in the session's task state."""
    task_state = {k: v for k, v in state.task_state.items() if k != PENDING_KEY}
    if pending is not None:
        task_state[PENDING_KEY] = pending
    engine.session.update_task_state(user_id=user_id, session_id=session_id, task_state=task_state)


__all__ = ["PENDING_KEY", "Confirmation", "ForgetTurn", "forget_turn"]
