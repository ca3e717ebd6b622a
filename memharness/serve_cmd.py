"""`memharness serve`: the reference memory behind an HTTP API; `serve keys`: its API keys.

The server needs the optional extra `serve` (FastAPI, uvicorn); without it the command
says which extra to install. The key commands need nothing beyond the default install.
See docs/serve.md.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from memharness.cli_settings import backend_option, embedder_option, settings_from_options
from memharness.load_strategies import shared_servers
from memharness.serve.auth import KeyStore
from memharness.serve.cleanup import FileCleanup
from memharness.serve.files import private_data_dir
from reference.durations import DurationError, parse_duration
from reference.errors import InvalidInput, MemoryStoreError
from reference.settings import Settings

EXTRA_MESSAGE = (
    "memharness serve needs the optional extra 'serve' (FastAPI, uvicorn): "
    "pip install 'memharness[serve]'"
)


def _keys_path(keys: Path | None, data_dir: Path | None) -> Path:
    if keys is not None:
        return keys
    return settings_from_options(data_dir=data_dir).data_dir / "serve_keys.json"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_keys_option = click.option(
    "--keys",
    "keys",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="the keys file (default: <data dir>/serve_keys.json)",
)
_data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="where embedded servers and the keys file live (default: MEMH_DATA_DIR, .memharness)",
)


@click.group(invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="the address to bind")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--strategy", default="hybrid", show_default=True, help="a strategy name or YAML")
@backend_option
@embedder_option
@_data_dir_option
@_keys_option
@click.option(
    "--virtual-time",
    is_flag=True,
    help="a virtual clock moved by each request's `at` (harness replays); else `at` is refused",
)
@click.option(
    "--batch-window-ms",
    type=click.FloatRange(0, 1000),
    default=2.0,
    show_default=True,
    help="how long concurrent texts are collected for one embedding call; 0: no batching",
)
@click.option("--max-batch", type=click.IntRange(1, 1024), default=32, show_default=True)
@click.option(
    "--max-body-bytes", type=click.IntRange(1, 16 * 1024 * 1024), default=64 * 1024,
    show_default=True, help="larger request bodies get 413",
)  # fmt: skip
@click.option(
    "--threads", type=click.IntRange(1, 1024), default=32, show_default=True,
    help="worker threads running the memory's calls at once",
)  # fmt: skip
@click.option("--torch-threads", type=click.IntRange(1, 256), default=None)
@click.option(
    "--maintain/--no-maintain", default=True, show_default=True,
    help="run the strategy's background work beside the service (sweeps, consolidation, "
    "events): a `memharness maintain` child on servers, a sweeping thread in memory",
)  # fmt: skip
@click.option(
    "--sweep-every", type=click.FloatRange(0, min_open=True), default=10.0, show_default=True,
    help="in-memory backend: seconds between the service's own sweeps",
)  # fmt: skip
@click.option(
    "--reclaim-within", default="1h", show_default=True, metavar="DURATION",
    help="embedded servers: how long after an erasure its values may stay in the servers' "
    "files (rows are gone at once; the files are rewritten within this, and at stop); 0: "
    "before the erasure is answered",
)  # fmt: skip
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    strategy: str,
    backend: str | None,
    embedder: str | None,
    data_dir: Path | None,
    keys: Path | None,
    virtual_time: bool,
    batch_window_ms: float,
    max_batch: int,
    max_body_bytes: int,
    threads: int,
    torch_threads: int | None,
    maintain: bool,
    sweep_every: float,
    reclaim_within: str,
) -> None:
    """Serve the reference memory over HTTP (routes: docs/serve.md; keys: `serve keys`).

    Binds to 127.0.0.1 unless --host says otherwise. Every request needs a tenant's key.
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        reclaim_within_s = parse_duration(reclaim_within)
    except DurationError as exc:
        raise click.BadParameter(str(exc), param_hint="--reclaim-within") from None
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise click.ClickException(EXTRA_MESSAGE) from None
    options: dict[str, object] = dict(
        backend=backend, embedder=embedder, data_dir=data_dir, embedder_threads=torch_threads
    )
    settings = settings_from_options(**options)
    private_data_dir(settings.data_dir)  # umask 077: every file 0600, before any is written
    store = KeyStore(_keys_path(keys, settings.data_dir))
    try:
        known = store.entries()
    except InvalidInput as exc:  # a corrupted keys file: refuse to start
        raise click.ClickException(f"cannot start: {exc}") from None
    if not known:
        click.echo(
            f"warning: no API keys in {store.path}: every request will get 401 "
            "(add one: memharness serve keys add --tenant NAME)",
            err=True,
        )
    if not _is_loopback(host):
        click.echo(
            f"warning: binding to {host}, not localhost: the service is reachable from other "
            "machines (plain HTTP; put TLS in front)",
            err=True,
        )
    # Before shared_servers names the embedded servers by URL: which of them are ours.
    own_postgres = settings.backend != "memory" and settings.pg_url is None
    own = {
        "session": settings.redis_url is None,
        "stm": settings.chroma_url is None,
        "ltm": own_postgres,
    }
    with ExitStack() as stack:
        if maintain:  # both processes on the same servers: start the embedded ones here
            # Chroma behind a socket only this user reaches: its server has no authentication.
            urls = stack.enter_context(
                shared_servers(settings, settings.data_dir, private_chroma=True)
            )
            os.environ.update(urls)  # the maintenance child inherits them
            settings = settings_from_options(**options)
        _serve(
            stack,
            settings,
            store,
            host=host,
            port=port,
            strategy=strategy,
            virtual_time=virtual_time,
            batch_window_ms=batch_window_ms,
            max_batch=max_batch,
            max_body_bytes=max_body_bytes,
            threads=threads,
            maintain=maintain,
            sweep_every=sweep_every,
            own=own,
            reclaim_within_s=reclaim_within_s,
        )


def _serve(
    stack: ExitStack,
    settings: Settings,
    store: KeyStore,
    *,
    host: str,
    port: int,
    strategy: str,
    virtual_time: bool,
    batch_window_ms: float,
    max_batch: int,
    max_body_bytes: int,
    threads: int,
    maintain: bool,
    sweep_every: float,
    own: dict[str, bool],
    reclaim_within_s: float,
) -> None:
    """`own`: the layers whose embedded server this service started (supervised)."""
    import uvicorn

    from memharness.serve.app import create_app
    from memharness.serve.background import background_work
    from memharness.serve.batching import BatchingEmbedder, wrap_batching
    from memharness.serve.pending import Pending, RetryLoop
    from memharness.serve.protocol import HeaderDeadline
    from memharness.serve.supervisor import Supervisor, embedded_servers
    from reference.clock import Clock, SystemClock, VirtualClock
    from reference.embedding import make_embedder
    from reference.factory import build_memory_system

    # A virtual clock starts at today, then moves only with requests.
    clock: Clock = VirtualClock(time.time()) if virtual_time else SystemClock()  # wall-clock ok
    model = make_embedder(
        settings.embedder,
        cache_size=settings.embedding_cache_size,
        threads=settings.embedder_threads,
        runtime=settings.embedder_runtime,
    )
    batched = wrap_batching(model, window_ms=batch_window_ms, max_batch=max_batch)
    try:
        system = build_memory_system(settings, clock=clock, embedder=batched, strategy=strategy)
    except MemoryStoreError as exc:  # a missing encryption key, a server that won't start
        raise click.ClickException(str(exc)) from None
    stack.callback(system.dispose)
    private_data_dir(settings.data_dir)  # again: PostgreSQL widened it when it started
    cleanup = _file_cleanup(
        stack, settings, system, own_postgres=own["ltm"], within_s=reclaim_within_s
    )
    supervisor = Supervisor(embedded_servers(settings, own=own))
    pending = None if settings.backend == "memory" else Pending(settings.data_dir)
    app = create_app(
        system,
        store,
        max_body_bytes=max_body_bytes,
        threads=threads,
        cleanup=cleanup,
        pending=pending,
        servers_down=supervisor.down,
    )
    service = app.state.service

    def after_restart(layer: str) -> None:
        private_data_dir(settings.data_dir)  # a restarted PostgreSQL widens it again
        service.complete_pending()

    supervisor.on_restart = after_restart
    if pending is not None:
        if service.complete_pending():
            click.echo("requests a failure had left unfinished: completed", err=True)
        stack.callback(RetryLoop(service.complete_pending, pending).start().close)
    stack.callback(supervisor.start().close)  # closed before the servers stop
    click.echo(f"embedded servers: {supervisor}", err=True)
    click.echo(
        f"memharness serve on http://{host}:{port} (strategy {strategy}, {settings.backend} "
        f"backends, {settings.embedder}, batch window {batch_window_ms} ms x {max_batch}, "
        f"{'virtual' if virtual_time else 'wall'} clock)",
        err=True,
    )
    if maintain:
        running = stack.enter_context(
            background_work(
                system, settings, strategy, virtual_time=virtual_time, sweep_every_s=sweep_every
            )
        )
        click.echo(f"background work: {running}", err=True)
    else:
        click.echo(
            "background work: none here (--no-maintain: run `memharness maintain`)", err=True
        )
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            http=HeaderDeadline,
        )
    finally:
        writes = getattr(system.stm, "writes", None)  # a Chroma store's grouped adds
        if writes is not None and writes.batches:
            click.echo(
                f"short-term adds: {writes.items} records in {writes.batches} Chroma writes "
                f"(mean {writes.items / writes.batches:.2f} per write)",
                err=True,
            )
        for part in (batched, getattr(batched, "inner", None)):
            if isinstance(part, BatchingEmbedder):
                part.close()
                sizes = part.batch_sizes
                if sizes:
                    click.echo(
                        f"embedding: {part.batches} model calls, mean batch "
                        f"{sum(sizes) / len(sizes):.2f} texts (last {len(sizes)}), "
                        f"largest {max(sizes)}",
                        err=True,
                    )


def _file_cleanup(
    stack: ExitStack, settings: Settings, system: Any, *, own_postgres: bool, within_s: float
) -> FileCleanup | None:
    """The embedded servers' files cleaned within `within_s` of each erasure
    (memharness.serve.cleanup); a cleanup a crash left pending runs now. `own_postgres`:
    PostgreSQL is the embedded server (its WAL is cycled), not one given by URL."""
    if settings.backend == "memory":
        return None
    if settings.pg_url is not None:
        pg_url = settings.pg_url.get_secret_value()
    else:
        from reference.ltm.embedded_pg import start_embedded_postgres

        handle = start_embedded_postgres(settings.data_dir / "pg")  # joins the running one
        stack.callback(handle.close)
        pg_url = handle.url
    cleanup = FileCleanup(
        data_dir=settings.data_dir,
        pg_url=pg_url,
        namespace=system.ltm.namespace,
        own_postgres=own_postgres,
        within_s=within_s,
    )
    if cleanup.resume() is not None:
        click.echo("the files' cleanup left pending by an earlier run: done", err=True)
    if cleanup.deferred:
        cleanup.start()
        stack.callback(cleanup.close)  # before the servers stop: registered after them
    return cleanup


@serve.group()
def keys() -> None:
    """Manage the service's API keys (stored as SHA-256 hashes; a key is shown once)."""


@keys.command("add")
@click.option("--tenant", required=True, help="the tenant the key belongs to ([a-z0-9_-])")
@_keys_option
@_data_dir_option
def keys_add(tenant: str, keys: Path | None, data_dir: Path | None) -> None:
    """Create a key for TENANT and print it once (only its hash is stored)."""
    store = KeyStore(_keys_path(keys, data_dir))
    try:
        key = store.add(tenant)
    except InvalidInput as exc:
        raise click.BadParameter(exc.reason, param_hint="--tenant") from None
    click.echo(key)
    click.echo(f"(stored as a hash in {store.path}; this key is not shown again)", err=True)


@keys.command("revoke")
@click.option("--key-id", default=None, help="the key's id (the 8 hex digits after mhk_)")
@click.option("--tenant", default=None, help="revoke every key of this tenant")
@_keys_option
@_data_dir_option
def keys_revoke(
    key_id: str | None, tenant: str | None, keys: Path | None, data_dir: Path | None
) -> None:
    """Revoke one key (--key-id) or all of a tenant's keys (--tenant); takes effect on the
    running service's next request."""
    store = KeyStore(_keys_path(keys, data_dir))
    try:
        count = store.revoke(key_id=key_id, tenant=tenant)
    except InvalidInput as exc:
        raise click.UsageError(exc.reason) from None
    if count == 0:
        click.echo("no active key matched", err=True)
        sys.exit(1)
    click.echo(f"revoked {count} key(s)")


@keys.command("list")
@_keys_option
@_data_dir_option
def keys_list(keys: Path | None, data_dir: Path | None) -> None:
    """The keys (ids, tenants, states), never the keys themselves."""
    for entry in KeyStore(_keys_path(keys, data_dir)).entries():
        state = "revoked" if entry.revoked_at is not None else "active"
        click.echo(f"{entry.key_id}  {entry.tenant}  {state}")
