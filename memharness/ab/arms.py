"""The two arms' source trees: the candidate (the checkout itself, uncommitted changes
included) and the baseline (a commit in a temporary detached worktree, or a directory).

`resolve_baseline` turns `--ab`'s value into a tree: "auto" is the merge base with `main`
on another branch, `HEAD~1` on main; a value with a path separator (or starting with
".") that names an existing directory is used as it is, without git (a bare word such as
`main` is always a ref, even if a directory of that name happens to exist here); anything
else is a git ref, checked out with `git worktree add --detach` under `workdir` and
removed by the returned cleanup (also when the run fails).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

AUTO = "auto"


class AbError(Exception):
    """A problem that stops the A/B gate before a verdict (exit status 2)."""


@dataclass(frozen=True, slots=True)
class ArmTree:
    """Where an arm's code comes from."""

    name: str  # "baseline" or "candidate"
    tree: Path
    ref: str | None  # as given (None for a directory)
    sha: str | None  # the commit (the checkout's HEAD for the candidate)
    dirty: bool | None  # uncommitted changes to tracked files (candidate only)

    def describe(self) -> str:
        if self.sha is None:
            return f"{self.name}: {self.tree}"
        extra = " + uncommitted changes" if self.dirty else ""
        ref = f"{self.ref} = " if self.ref and self.ref != self.sha else ""
        return f"{self.name}: {ref}{self.sha[:12]}{extra} ({self.tree})"

    def as_dict(self) -> dict[str, object]:
        return {
            "tree": str(self.tree),
            "ref": self.ref,
            "sha": self.sha,
            "dirty": self.dirty,
        }


def git(root: Path, *args: str) -> str:
    """Run git in `root`; its stdout, stripped. A failure raises AbError with git's words."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError as exc:
        raise AbError("git is not installed") from exc
    if done.returncode != 0:
        raise AbError(f"git {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def candidate_tree(root: Path) -> ArmTree:
    """The checkout itself; its HEAD and whether tracked files have uncommitted changes."""
    try:
        sha = git(root, "rev-parse", "HEAD")
        dirty = bool(git(root, "status", "--porcelain", "--untracked-files=no"))
    except AbError:
        sha, dirty = None, None  # not a git checkout: still comparable against a PATH
    return ArmTree("candidate", root, ref=None, sha=sha, dirty=dirty)


def default_ref(root: Path) -> str:
    """The merge base with `main` on another branch; `HEAD~1` on main (or at its tip)."""
    branch = git(root, "rev-parse", "--abbrev-ref", "HEAD")
    if branch == "main":
        return "HEAD~1"
    try:
        base = git(root, "merge-base", "HEAD", "main")
    except AbError:
        return "HEAD~1"  # no local main (a shallow or single-branch clone)
    return "HEAD~1" if base == git(root, "rev-parse", "HEAD") else base


def is_path(value: str) -> bool:
    return (os.sep in value or value.startswith(".")) and Path(value).is_dir()


def resolve_baseline(root: Path, value: str, workdir: Path) -> tuple[ArmTree, Callable[[], None]]:
    """The baseline tree for `--ab VALUE`, and the cleanup that removes what was made."""
    if value != AUTO and is_path(value):
        return ArmTree("baseline", Path(value).resolve(), None, None, None), lambda: None
    ref = default_ref(root) if value == AUTO else value
    try:
        sha = git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except AbError as exc:
        raise AbError(f"baseline {ref!r} is not a commit of {root} ({exc})") from None
    path = workdir / f"baseline-{sha[:12]}"
    git(root, "worktree", "add", "--detach", str(path), sha)

    def remove() -> None:
        with contextlib.suppress(AbError):
            git(root, "worktree", "remove", "--force", str(path))
        if path.exists():  # git refused: at least the files go (git prune clears the rest)
            shutil.rmtree(path, ignore_errors=True)

    return ArmTree("baseline", path, ref=ref, sha=sha, dirty=False), remove
