"""`memharness run` on a real two-node Ray cluster gives the figures of a local Ray.

The `cluster` fixture starts a head and a second node as two `ray start --block`
processes on this machine (one CPU each, ports chosen free, their own temp directories
and auth token), and afterwards stops exactly those processes and their children: never
`ray stop`, which ends every Ray on the machine. `memharness run` joins the cluster
through RAY_ADDRESS, as a user would; the same command without it (started first, in the
background, to save time) runs on a local Ray. The two one-CPU actors must have run on
different nodes (the cluster's actor table says where), and every quality figure and the
footprint of each strategy and scenario must be the same in both runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import psutil  # type: ignore[import-untyped]
import pytest

from tests.test_simulator import QUALITY

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("drift", "address_change")
STRATEGIES = ("keep_all", "fixed_ttl", "hybrid", "oracle")
NODE_START_S = 90.0  # a node starts in 10-30 s on 2 busy cores
RUN_S = 180.0
STOP_S = 20.0
OBJECT_STORE_BYTES = 128 * 2**20

# A driver of the cluster: waits for `want` alive nodes and prints them as a JSON line;
# then, asked on stdin ("actors"), prints the actor table (dead actors stay in it).
OBSERVER = """
import json, sys, time
import ray
from ray._private.state import actors

address, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
ray.init(address=address, log_to_driver=False, configure_logging=False)
while True:
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) >= want or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print(json.dumps([{"id": n["NodeID"], "cpus": n["Resources"].get("CPU", 0)} for n in alive]),
      flush=True)
if sys.stdin.readline().strip() == "actors":
    table = actors().values()
    print(json.dumps([{"class": a["ActorClassName"], "node": a["Address"]["NodeID"],
                       "state": a["State"]} for a in table]), flush=True)
ray.shutdown()
"""


def _tool(name: str) -> str:
    """A console script of this test's environment (the project's venv)."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found next to {sys.executable} nor on PATH")
    return found


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def _processes_naming(root: Path) -> list[psutil.Process]:
    """Processes whose command line names `root`: Ray's daemons and `ray start` name
    their temp directory (workers retitle themselves, so they are found as children)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if str(root) in " ".join(proc.info["cmdline"] or []) and proc.pid != os.getpid():
                found.append(proc)
    return found


def _kill(procs: list[psutil.Process]) -> list[psutil.Process]:
    """SIGKILL `procs`; returns those still alive after STOP_S."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    _, alive = psutil.wait_procs(procs, timeout=STOP_S)
    return list(alive)


def _tree(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    return []


@dataclass
class RayRoot:
    """A short directory for everything Ray of this test writes, and the environment of
    every process the test starts (Ray's socket paths must fit in 107 bytes)."""

    path: Path
    env: dict[str, str]


@pytest.fixture
def ray_root() -> Iterator[RayRoot]:
    path = Path(tempfile.mkdtemp(prefix="memh-ray-", dir="/tmp"))
    (path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(
        RAY_TMPDIR=str(path / "tmp"),  # a local Ray and drivers: nothing in /tmp/ray
        RAY_AUTH_MODE="token",  # a token of this test's own, not ~/.ray/auth_token
        RAY_AUTH_TOKEN=secrets.token_hex(32),
        RAY_USAGE_STATS_ENABLED="0",
        RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0",  # SIGTERM stops a node at once
        RAY_agent_register_timeout_ms="120000",  # agents start slowly on busy cores
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        HF_HUB_OFFLINE="1",
    )
    yield RayRoot(path, env)
    alive = _kill(_processes_naming(path))
    shutil.rmtree(path, ignore_errors=True)
    assert not alive, f"processes of this test's Ray left running: {alive}"


@dataclass
class RayNode:
    name: str
    temp_dir: Path
    log: Path
    proc: subprocess.Popen[bytes]


@dataclass
class Cluster:
    root: RayRoot
    address: str = ""
    nodes: list[RayNode] = field(default_factory=list)
    observer: subprocess.Popen[str] | None = None

    def logs(self) -> str:
        """The tails of each node's `ray start` output and of its Ray logs, for failures."""
        parts = []
        for node in self.nodes:
            parts.append(f"--- {node.name}: ray start (exit {node.proc.poll()})\n")
            parts.append(_tail(node.log, 30))
            logs = node.temp_dir / "session_latest" / "logs"
            for path in [*sorted(logs.glob("*.err")), logs / "raylet.out"]:
                if path.exists() and path.stat().st_size > 0:
                    parts.append(f"\n--- {node.name}: {path.name}\n{_tail(path, 15)}")
            parts.append("\n")
        observer_err = self.root.path / "observer.err"
        if observer_err.exists():
            parts.append(f"--- observer stderr\n{_tail(observer_err, 20)}\n")
        return "".join(parts)[-20_000:]

    def fail(self, message: str) -> NoReturn:
        pytest.fail(f"{message}\n{self.logs()}", pytrace=False)

    def check_alive(self) -> None:
        for node in self.nodes:
            if node.proc.poll() is not None:
                self.fail(f"Ray node {node.name} exited with {node.proc.returncode}")

    def start_node(self, name: str, ports: list[int], args: list[str]) -> RayNode:
        """Start a node, in its own process group, and wait until it has joined."""
        temp_dir, log = self.root.path / name, self.root.path / f"{name}.log"
        agent_listen, agent_grpc, runtime_env, metrics = ports
        command = [
            _tool("ray"), "start", "--block", *args, "--num-cpus", "1",
            "--temp-dir", str(temp_dir), "--object-store-memory", str(OBJECT_STORE_BYTES),
            "--min-worker-port", "0", "--max-worker-port", "0",
            "--dashboard-agent-listen-port", str(agent_listen),
            "--dashboard-agent-grpc-port", str(agent_grpc),
            "--runtime-env-agent-port", str(runtime_env),
            "--metrics-export-port", str(metrics),
            "--include-log-monitor", "false", "--disable-usage-stats",
        ]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.root.env,
                cwd=ROOT,
                start_new_session=True,
            )
        node = RayNode(name, temp_dir, log, proc)
        self.nodes.append(node)
        # `ray start` writes this file once its node has registered with the head.
        deadline = time.monotonic() + NODE_START_S
        while not (temp_dir / "ray_current_cluster").exists():
            self.check_alive()
            if time.monotonic() > deadline:
                self.fail(f"Ray node {name} not started after {NODE_START_S:.0f} s")
            time.sleep(0.2)
        return node

    def start_observer(self, nodes: int) -> None:
        with (self.root.path / "observer.err").open("wb") as err:
            self.observer = subprocess.Popen(
                [sys.executable, "-c", OBSERVER, self.address, str(nodes), str(NODE_START_S)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=self.root.env,
                cwd=ROOT,
            )

    def read_observer(self, timeout: float) -> Any:
        """The observer's next JSON line; fails if it or a node dies, or on the deadline."""
        proc = self.observer
        assert proc is not None and proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                line = proc.stdout.readline()
                if line:
                    return json.loads(line)
            if proc.poll() is not None:
                self.fail(f"the observer exited with {proc.returncode}")
            self.check_alive()
        self.fail(f"the observer did not answer within {timeout:.0f} s")

    def alive_nodes(self) -> list[dict[str, Any]]:
        """The alive nodes (id, CPUs), once as many as started, per the head's GCS."""
        nodes: list[dict[str, Any]] = self.read_observer(NODE_START_S + 60)
        return nodes

    def actors(self) -> list[dict[str, Any]]:
        assert self.observer is not None and self.observer.stdin is not None
        self.observer.stdin.write("actors\n")
        self.observer.stdin.flush()
        found: list[dict[str, Any]] = self.read_observer(60)
        return found

    def stop(self, keep_logs: Path) -> None:
        """Stop this cluster's processes, and only them; fail if one is left."""
        if self.observer is not None:
            self.observer.kill()
            self.observer.communicate()
        ours = [p for node in self.nodes for p in _tree(node.proc.pid)]
        for node in reversed(self.nodes):  # `ray start` stops its node's processes
            if node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_S
        for node in self.nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for node in self.nodes:  # whatever is left of the node's process group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(node.proc.pid, signal.SIGKILL)
            node.proc.wait()
        alive = _kill(ours)
        with contextlib.suppress(OSError):
            for node in self.nodes:
                logs = node.temp_dir / "session_latest" / "logs"
                if logs.is_dir():
                    shutil.copytree(logs, keep_logs / f"{node.name}-logs", dirs_exist_ok=True)
                shutil.copy(node.log, keep_logs / node.log.name)
        assert not alive, f"processes of the Ray cluster left running: {alive}"


@pytest.fixture
def cluster(ray_root: RayRoot, tmp_path: Path) -> Iterator[Cluster]:
    """A head and a second Ray node, one CPU each, started and stopped by this test."""
    found = Cluster(ray_root)
    try:
        ports = _free_ports(11)
        found.address = f"127.0.0.1:{ports[0]}"
        found.start_node(
            "head",
            ports[7:],
            ["--head", "--port", str(ports[0]), "--ray-client-server-port", str(ports[1]),
             "--dashboard-port", str(ports[2]), "--include-dashboard", "false"],
        )  # fmt: skip
        found.start_observer(2)  # it connects while the second node starts
        found.start_node("node2", ports[3:7], ["--address", found.address])
        yield found
    finally:
        found.stop(tmp_path)


@dataclass
class Run:
    """One `memharness run` in the background."""

    where: str
    out: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def result(self, fail: Any = pytest.fail) -> dict[str, Any]:
        """Wait for the run; its results.json."""
        try:
            code = self.proc.wait(timeout=RUN_S)
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            fail(
                f"memharness run on {self.where}: "
                f"{'timed out' if code is None else f'exit {code}'}\n{_tail(self.log, 60)}"
            )
        document: dict[str, Any] = json.loads((self.out / "run" / "results.json").read_text())
        return document


def _start_run(root: RayRoot, out: Path, *, address: str | None) -> Run:
    """`memharness run` on the cluster at `address`, or on a local Ray without one."""
    out.mkdir(parents=True)
    env = dict(root.env, MEMH_DATA_DIR=str(out / "data"))
    if address is not None:
        env["RAY_ADDRESS"] = address
    command = [_tool("memharness"), "run"]
    for name in SCENARIOS:
        command += ["--scenario", str(ROOT / "scenarios" / f"{name}.yaml")]
    for name in STRATEGIES:
        command += ["--strategy", name]
    command += ["--backend", "memory", "--embedder", "hashing", "--workers", "2",
                "--no-progress", "--out", str(out), "--run-id", "run"]  # fmt: skip
    log = out / "output.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
    return Run(f"RAY_ADDRESS={address}" if address else "a local Ray", out, proc, log)


@pytest.fixture
def local_run(ray_root: RayRoot, tmp_path: Path) -> Iterator[Run]:
    """The run on a local Ray, started before the cluster and running while it starts."""
    run = _start_run(ray_root, tmp_path / "local", address=None)
    yield run
    if run.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait()


def _figures(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (scenario, strategy): what must not depend on where the actors ran."""
    assert document["status"] == "complete"
    assert document["workers"] == 2
    found = {}
    for scenario in document["scenarios"]:
        for entry in scenario["strategies"]:
            key = (scenario["name"], entry["label"])
            assert entry["status"] == "ok", (key, entry["error"])
            metrics = entry["metrics"]
            found[key] = {
                "quality": {name: metrics[name] for name in QUALITY},
                "metric names": sorted(metrics),
                "footprint": entry["footprint"],
                "leaks": entry["leaks"],
            }
    return found


def test_a_two_node_cluster_gives_the_figures_of_a_local_ray(
    local_run: Run, cluster: Cluster, tmp_path: Path
) -> None:
    nodes = cluster.alive_nodes()
    assert len(nodes) == 2 and all(n["cpus"] == 1 for n in nodes), nodes

    on_cluster = _start_run(cluster.root, tmp_path / "cluster", address=cluster.address)
    on_cluster_figures = _figures(on_cluster.result(cluster.fail))
    # A CPU per node and a whole CPU per actor: each node ran one of the two actors.
    workers = [a for a in cluster.actors() if a["class"] == "ShardWorker"]
    assert len(workers) == 2, workers
    assert {a["node"] for a in workers} == {n["id"] for n in nodes}, (workers, nodes)

    local_figures = _figures(local_run.result())
    expected = {(s, label) for s in SCENARIOS for label in STRATEGIES}
    assert on_cluster_figures.keys() == expected
    assert local_figures.keys() == expected
    for key in sorted(expected):
        assert on_cluster_figures[key] == local_figures[key], key
