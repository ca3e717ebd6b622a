"""The service's files readable by their owner only.

`memharness serve` sets the process's umask to 077 before anything is written, so the
files it and the embedded servers it starts create (PostgreSQL's, Redis's dump,
Chroma's `chroma.sqlite3` and its segments, logs, the keys file) are 0600 in 0700
directories; files an earlier run left with wider modes are narrowed when it starts.
Another local user then reads no tenant's memories from the data directory.

Run as root, the embedded PostgreSQL runs as its own system user (`pgserver`), which
adds g+rx,o+rx to every ancestor of its directory on each start, the data directory
included. Once the servers have started, `private_data_dir` runs again: the data
directory is 0700 again, and owned by PostgreSQL's user (root reaches it regardless),
so that user can still reach its own directory to stop the server.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["private_data_dir"]


def private_data_dir(path: Path) -> None:
    """umask 077 from now on; `path` and everything under it lose their group and other
    bits (0700 directories, 0600 files when they were 0755 / 0644)."""
    os.umask(0o077)
    path.mkdir(parents=True, exist_ok=True)
    _narrow(path)
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            _narrow(Path(root, name))
    postgres = path / "pg"
    if os.geteuid() == 0 and postgres.is_dir():
        owner = postgres.stat()
        if owner.st_uid != 0 and path.stat().st_uid != owner.st_uid:
            os.chown(path, owner.st_uid, owner.st_gid)


def _narrow(path: Path) -> None:
    if path.is_symlink():
        return
    try:
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            os.chmod(path, mode & 0o700)
    except FileNotFoundError:  # a server removed it meanwhile
        pass
