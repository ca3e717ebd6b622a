"""Erasure of everything about one user: the one routine behind every path.

`DELETE /v1/users/{id}` (`MemorySystem.delete_user_data`), a confirmed "forget
everything" and the unconfirmed command (`forgetter`'s plan, applied by the executor)
all call `erase_user`, so they leave the same thing behind:

- LTM: every fact of the user deleted (archived and expired ones too), every audit entry
  of the user redacted (`LongTermStore.erase` with a filter naming the user only), and
  the user's activity row (`memh_users`) removed;
- STM: every record of the user, dead ones included;
- sessions: every session of the user.

The order is the executor's: LTM first, then STM, then sessions. Each step is
idempotent, so an erasure interrupted by a failing layer is completed by running it
again.

What the stores' files keep afterwards (old row versions in PostgreSQL's heap and WAL,
Chroma's log and freed SQLite pages, Redis's dump) is the business of the file
cleanup that follows an erasure (`reference.forgetting.reclaim`, run by the service
through `memharness.serve.cleanup`).
"""

from __future__ import annotations

from dataclasses import dataclass

from reference.ltm.base import LongTermStore
from reference.ltm.filters import LtmFilter
from reference.session.base import SessionStore
from reference.stm.base import ShortTermStore
from reference.stm.filters import StmFilter
from reference.validation import check_id

__all__ = ["Erased", "erase_user"]


@dataclass(frozen=True, slots=True)
class Erased:
    """How many of the user's records each layer removed."""

    sessions: int
    stm: int
    ltm: int

    def by_layer(self) -> dict[str, int]:
        return {"session": self.sessions, "stm": self.stm, "ltm": self.ltm}


def erase_user(
    *,
    session: SessionStore,
    stm: ShortTermStore,
    ltm: LongTermStore,
    user_id: str,
    actor: str = "forget",
    cause: str = "erasure of the user",
) -> Erased:
    """Remove everything the layers hold about `user_id` (see the module docstring).
    `cause` goes into the audit as it is: it must not hold an erased value."""
    check_id("user_id", user_id)
    # A filter naming the user only: every fact, and the user's whole audit, redacted.
    ltm_removed = ltm.erase(filter=LtmFilter(user_id=user_id), actor=actor, cause=cause)
    ltm.forget_activity(user_id=user_id)
    stm_removed = stm.delete(filter=StmFilter(user_id=user_id, include_dead=True))
    sessions = session.delete_user(user_id=user_id)
    return Erased(sessions=sessions, stm=stm_removed, ltm=ltm_removed)
