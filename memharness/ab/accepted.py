"""Slowdowns a change declares on purpose: the gate still measures and reports them, and
does not fail on them.

A new feature can cost time (a second ranking in every long-term read, say). The commit
that brings it says so in its message, one trailer per operation:

    Accepted-slowdown: turn[uncached]: lexical retrieval adds two statements to each LTM read

The gate reads the messages of the commits between the baseline and the candidate's HEAD
(`git log BASE..HEAD`), so the acceptance holds for this change only: the next commit's
gate, against this one, judges those operations again. A FAIL on an operation named there
is reported as ACCEPTED (with the reason) and does not fail the gate; a FAIL on any other
operation still does. A directory baseline (no commits in between) accepts nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from memharness.ab.arms import ArmTree, git

__all__ = ["TRAILER", "accepted_slowdowns"]

TRAILER = "Accepted-slowdown"
_LINE = re.compile(rf"^{TRAILER}:[ \t]*(?P<op>\S+?):[ \t]*(?P<why>\S.*?)[ \t]*$", re.MULTILINE)


def accepted_slowdowns(root: Path, baseline: ArmTree, candidate: ArmTree) -> dict[str, str]:
    """Operation -> the reason given, from the trailers of the commits baseline..candidate."""
    if baseline.sha is None or candidate.sha is None:
        return {}
    messages = git(root, "log", "--format=%B", f"{baseline.sha}..{candidate.sha}")
    return parse_trailers(messages)


def parse_trailers(messages: str) -> dict[str, str]:
    """Operation -> reason of every `Accepted-slowdown: OP: reason` line (for an operation
    named twice, the newest commit's: `git log` lists the newest first)."""
    return {m.group("op"): m.group("why") for m in reversed(list(_LINE.finditer(messages)))}
