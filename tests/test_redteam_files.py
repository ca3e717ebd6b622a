"""Red team: after an erasure, the erased values are gone from every byte of every file
under the data directory of the embedded servers (issue 37, finding 3): PostgreSQL's
heap, indexes and WAL, Chroma's SQLite (its log, full-text index, freed pages), Redis
(which writes no file). Each test starts its own servers on a fresh data directory and
reads the files themselves, looking for a marker unique to the test in its common
encodings (as is, lower and upper case, UTF-16, base64 at each alignment).

The first test shows the search finds the marker when no cleanup runs: the others can
fail."""

from __future__ import annotations

import base64
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import memharness.serve.cleanup as cleanup_module
from memharness.serve.auth import KeyStore
from memharness.serve.cleanup import FileCleanup
from reference.clock import VirtualClock
from reference.embedding import HashingEmbedder
from reference.factory import build_memory_system, stop_embedded_servers
from reference.keys import Namespace
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.settings import Settings
from reference.system import MemorySystem
from tests.conftest import T0
from tests.serve_support import KEY, auth, client_for


def encodings(marker: str) -> list[bytes]:
    """The marker as bytes in the forms a file may hold it."""
    forms = {marker, marker.lower(), marker.upper()}
    found = [f.encode() for f in forms]
    found += [marker.encode("utf-16-le"), marker.encode("utf-16-be")]
    for pad in range(3):  # base64 of the marker at each offset in a longer string
        coded = base64.b64encode(b"x" * pad + marker.encode())
        found.append(coded[4:-4])
    return found


def files_holding(root: Path, needles: list[bytes]) -> list[str]:
    """Every file under `root` (sockets and the like skipped) holding one of `needles`."""
    hits = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if any(needle in data for needle in needles):
            hits.append(str(path.relative_to(root)))
    return hits


@dataclass
class Served:
    client: TestClient
    key: str
    system: MemorySystem
    data: Path
    cleanup: FileCleanup
    marker: str


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    # Not under pytest's directory: a pytest starting meanwhile narrows it to 0700, and
    # PostgreSQL's own user (when run as root) could then no longer reach its files.
    with tempfile.TemporaryDirectory(prefix="memh-rtf-") as root:
        yield from _served(Path(root) / "data", tmp_path)


def _served(data: Path, tmp_path: Path) -> Iterator[Served]:
    prefix = f"rtf{uuid.uuid4().hex[:8]}"
    settings = Settings(backend="embedded", data_dir=data, prefix=prefix, encryption_key=KEY)
    system = build_memory_system(
        settings,
        clock=VirtualClock(T0),
        embedder=HashingEmbedder(),
        namespace=Namespace(prefix),
        strategy="hybrid",
    )
    postgres = start_embedded_postgres(data / "pg")
    cleanup = FileCleanup(data_dir=data, pg_url=postgres.url, namespace=Namespace(prefix))
    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    marker = "Vrenkast" + uuid.uuid4().hex[:10]
    try:
        with client_for(system, keys, cleanup=cleanup) as client:
            # The other user first: the erased rows are then the last written on their
            # pages, where a plain VACUUM leaves their bytes in the freed space.
            said = [("max", "I always prefer Mardonico Freight for my deliveries.")]
            said += [
                ("pia", f"I always prefer {marker} Express for my deliveries."),
                ("pia", f"My favourite food is {marker} dumplings."),
                ("pia", f"I work as a {marker} engineer."),
            ]
            for user, text in said:
                turn = {"user_id": user, "session_id": "s1", "text": text}
                assert client.post("/v1/turn", headers=auth(key), json=turn).status_code == 200
            yield Served(client, key, system, data, cleanup, marker)
    finally:
        system.dispose()
        postgres.close()
        stop_embedded_servers(settings)


def _delete(served: Served) -> None:
    answer = served.client.delete("/v1/users/pia", headers=auth(served.key))
    assert answer.status_code == 200, answer.text


def _forget_everything(served: Served) -> None:
    body = {"user_id": "pia", "session_id": "s1", "command": "forget everything about me"}
    answer = served.client.post("/v1/forget", headers=auth(served.key), json=body)
    assert answer.status_code == 200, answer.text
    if answer.json()["scope"] is None:  # asked to confirm
        body["command"] = "yes, delete everything"
        answer = served.client.post("/v1/forget", headers=auth(served.key), json=body)
    assert answer.json()["scope"] == "everything", answer.text


def test_without_the_cleanup_the_erased_marker_stays_in_the_files(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search works, and the problem is real: the rows are gone, the bytes are not."""
    monkeypatch.setattr(FileCleanup, "reclaim", lambda self, ticket=None: None)
    _delete(served)
    hits = files_holding(served.data, encodings(served.marker))
    assert any(hit.startswith("pg/") for hit in hits), hits
    assert any(hit.endswith("chroma.sqlite3") for hit in hits), hits


@pytest.mark.parametrize("erase", [_delete, _forget_everything], ids=["delete", "forget"])
def test_after_an_erasure_no_file_under_the_data_dir_holds_the_marker(
    served: Served, erase: object
) -> None:
    assert files_holding(served.data, encodings(served.marker)), "never written"
    erase(served)  # type: ignore[operator]
    assert files_holding(served.data, encodings(served.marker)) == []
    assert not served.cleanup.pending.exists()
    # The other user's memories are still there, and Redis wrote no file.
    assert files_holding(served.data, [b"Mardonico"])
    names = {p.name for p in served.data.rglob("*")}
    assert not names & {"redis.db", "dump.rdb", "appendonly.aof"}, names


def test_a_cleanup_interrupted_by_a_crash_runs_at_the_next_start(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(**_: object) -> None:
        raise ConnectionError("the process died here")

    monkeypatch.setattr(cleanup_module, "reclaim_files", crash)
    _delete(served)
    assert served.cleanup.pending.exists()
    assert files_holding(served.data, encodings(served.marker))
    monkeypatch.undo()

    restarted = FileCleanup(
        data_dir=served.data, pg_url=served.cleanup.pg_url, namespace=served.cleanup.namespace
    )
    assert restarted.resume() is not None
    assert not restarted.pending.exists()
    assert files_holding(served.data, encodings(served.marker)) == []
    assert restarted.resume() is None  # nothing pending any more


def test_erasures_that_end_while_a_reclaim_runs_share_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No servers: the reclaim itself is counted. An erasure's reclaim is skipped only
    when a reclaim begun after that erasure ended has run; the mark goes once no
    erasure is under way."""
    from reference.forgetting.reclaim import Reclaimed

    runs: list[int] = []

    def counted(**_: object) -> Reclaimed:
        runs.append(1)
        return Reclaimed()

    monkeypatch.setattr(cleanup_module, "reclaim_files", counted)
    cleanup = FileCleanup(data_dir=tmp_path, pg_url=None, namespace=Namespace("rtfc"))
    cleanup.erasure_begins()
    cleanup.erasure_begins()
    first, second = cleanup.erasure_ends(), cleanup.erasure_ends()
    assert cleanup.pending.exists()
    assert cleanup.reclaim(second) is not None and len(runs) == 1
    assert not cleanup.pending.exists()
    assert cleanup.reclaim(first) is not None and len(runs) == 1  # covered: shared
    cleanup.erasure_begins()
    third = cleanup.erasure_ends()
    cleanup.erasure_begins()  # a fourth, still under way
    assert cleanup.reclaim(third) is not None and len(runs) == 2
    assert cleanup.pending.exists()  # the fourth keeps it pending
    cleanup.reclaim(cleanup.erasure_ends())
    assert len(runs) == 3 and not cleanup.pending.exists()


def test_the_cleanup_beside_writing_turns_fails_none_and_keeps_chroma_whole(
    served: Served,
) -> None:
    """Chroma's file is rebuilt while turns write to it (the embedded client, in this
    process): done in the same process, the rebuild broke the file ("database disk
    image is malformed"); in a child process every turn succeeds and the file is whole."""
    import sqlite3
    import threading

    failures: list[str] = []
    stop = threading.Event()

    def turns() -> None:
        count = 0
        while not stop.is_set():
            turn = {"user_id": "max", "session_id": "s1", "text": f"note number {count}"}
            answer = served.client.post("/v1/turn", headers=auth(served.key), json=turn)
            if answer.status_code != 200:
                failures.append(answer.text)
            count += 1

    writer = threading.Thread(target=turns)
    writer.start()
    try:
        for _ in range(5):
            assert served.cleanup.reclaim() is not None
    finally:
        stop.set()
        writer.join()
    assert failures == []
    db = served.data / "chroma" / "chroma.sqlite3"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


_REOPEN = """
import sys
from pathlib import Path
from reference.clock import VirtualClock
from reference.embedding import HashingEmbedder
from reference.factory import build_memory_system, stop_embedded_servers
from reference.keys import Namespace
from reference.settings import Settings
from reference.stm.filters import StmFilter

data, prefix, key, now = Path(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
settings = Settings(backend="embedded", data_dir=data, prefix=prefix, encryption_key=key)
system = build_memory_system(
    settings, clock=VirtualClock(now), embedder=HashingEmbedder(), namespace=Namespace(prefix)
)
hits = system.recall(user_id="acme.max", session_id="s1", query="Mardonico Freight", k=3)
print(system.stm.count(filter=StmFilter(user_id="acme.max")))
print(system.stm.count(filter=StmFilter(user_id="acme.pia", include_dead=True)))
print(any("Mardonico" in h.record.text for h in hits.stm_hits))
system.dispose()
stop_embedded_servers(settings)
"""


def test_after_the_cleanup_a_restarted_chroma_still_serves_the_other_user(
    served: Served,
) -> None:
    """The purged log entries are the erased records' only: Chroma, opened again by
    another process (its HNSW index rebuilt from the log), finds the other user's
    record by vector and nothing of the erased user."""
    _delete(served)
    assert files_holding(served.data, encodings(served.marker)) == []
    served.system.dispose()
    stop_embedded_servers(Settings(backend="embedded", data_dir=served.data))
    prefix = served.cleanup.namespace.prefix
    done = subprocess.run(
        [sys.executable, "-c", _REOPEN, str(served.data), prefix, KEY, str(T0)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=Path(__file__).parent.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "0", "True"], done.stdout
