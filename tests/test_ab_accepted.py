"""Slowdowns a change declares on purpose (`memharness.ab.accepted`): read from the
messages of the commits between the baseline and the candidate, and nowhere else."""

from __future__ import annotations

import subprocess
from pathlib import Path

from memharness.ab.accepted import accepted_slowdowns, parse_trailers
from memharness.ab.arms import ArmTree


def test_trailers_name_an_operation_and_a_reason() -> None:
    messages = (
        "Lexical retrieval\n\n"
        "Accepted-slowdown: turn[uncached]: a second ranking in every LTM read\n"
        "Accepted-slowdown: shard.replay: the detector reads names\n"
        "Not-a-trailer: stm.add: no\n"
        "  Accepted-slowdown: indented lines are prose, not trailers\n"
        "Accepted-slowdown: missing-reason:\n"
        "the next line is no reason\n"
    )
    assert parse_trailers(messages) == {
        "turn[uncached]": "a second ranking in every LTM read",
        "shard.replay": "the detector reads names",
    }


def test_the_newest_commit_wins_for_an_operation_named_twice() -> None:
    newest_first = (
        "b\n\nAccepted-slowdown: stm.add: newer reason\n"
        "a\n\nAccepted-slowdown: stm.add: older reason\n"
    )
    assert parse_trailers(newest_first) == {"stm.add": "newer reason"}


def _commit(repo: Path, message: str) -> str:
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", message], check=True
    )
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def test_only_the_commits_since_the_baseline_count(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for key, value in (("user.email", "t@example.com"), ("user.name", "t")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    _commit(repo, "old\n\nAccepted-slowdown: stm.add: an earlier change's cost")
    base = _commit(repo, "baseline")
    head = _commit(repo, "new\n\nAccepted-slowdown: turn[uncached]: lexical retrieval")

    def arm(name: str, sha: str | None) -> ArmTree:
        return ArmTree(name, repo, sha, sha, False)

    got = accepted_slowdowns(repo, arm("baseline", base), arm("candidate", head))
    assert got == {"turn[uncached]": "lexical retrieval"}
    # Against the newest commit itself nothing is accepted, nor for a directory baseline.
    assert accepted_slowdowns(repo, arm("baseline", head), arm("candidate", head)) == {}
    assert accepted_slowdowns(repo, arm("baseline", None), arm("candidate", head)) == {}
