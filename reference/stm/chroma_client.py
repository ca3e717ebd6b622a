"""Chroma clients for the short-term layer: embedded under a data directory, or HTTP by URL.

Telemetry is off in both. Embedded clients are cached per directory for the life of the
process: Chroma runs one embedded system per path per process, refuses a second client
on the same path with other settings, and starting one costs a second or more. An HTTP
client is cheap and made fresh each call.

Chroma's HTTP client is built without a timeout (`httpx.Client(timeout=None)`); ours
gets `Timeouts.connect_s` to connect and `Timeouts.operation_s` per read and write
(`reference.resilience`), so a paused or unreachable server ends in an error, not a hang.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from reference.errors import BackendUnavailable, ConfigurationError, InvalidInput
from reference.resilience import DEFAULT_TIMEOUTS, SHORT_TERM, Timeouts

#: Port of an http:// URL that names none: the port `chroma run` listens on by default.
DEFAULT_HTTP_PORT = 8000

_embedded: dict[Path, Any] = {}
_embedded_lock = threading.Lock()


def make_chroma_client(
    url: str | None, data_dir: Path, *, timeouts: Timeouts = DEFAULT_TIMEOUTS
) -> Any:
    """A `chromadb.api.ClientAPI`: embedded under `data_dir/chroma` when `url` is None,
    else connected to the server at `url` (http or https), checked with a heartbeat."""
    if url is None:
        return _embedded_client(Path(data_dir) / "chroma")
    if url.startswith(UNIX_SCHEME):
        return _unix_client(url, unquote(url.removeprefix(UNIX_SCHEME)), timeouts)
    host, port, ssl = parse_chroma_url(url)
    return _http_client(url, host, port, ssl, timeouts)


def describe_chroma(client: Any) -> str:
    """`Chroma at <url>` of an HTTP client, `Chroma (embedded)` otherwise."""
    url = getattr(getattr(client, "_server", None), "_api_url", None)
    return f"Chroma at {str(url).split('/api/')[0]}" if url else "Chroma (embedded)"


def parse_chroma_url(url: str) -> tuple[str, int, bool]:
    """(host, port, ssl) of a server URL such as `http://127.0.0.1:8000`."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("chroma_url", "must be an http:// or https:// URL")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidInput("chroma_url", f"{url!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidInput("chroma_url", f"{url!r} must start with http:// or https://")
    if not parts.hostname:
        raise InvalidInput("chroma_url", f"{url!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("chroma_url", "must not carry credentials (Chroma auth is a header)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidInput("chroma_url", f"{url!r} must be scheme://host[:port], nothing more")
    ssl = parts.scheme == "https"
    if port is None:
        port = 443 if ssl else DEFAULT_HTTP_PORT
    return parts.hostname, port, ssl


def _embedded_client(path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    path = path.expanduser().resolve()
    with _embedded_lock:
        client = _embedded.get(path)
        if client is None:
            path.mkdir(parents=True, exist_ok=True)
            client = chromadb.PersistentClient(
                path=str(path),
                settings=Settings(anonymized_telemetry=False, allow_reset=True),
            )
            _embedded[path] = client
        return client


def _http_client(url: str, host: str, port: int, ssl: bool, timeouts: Timeouts) -> Any:
    import chromadb
    from chromadb.config import Settings

    base = f"{'https' if ssl else 'http'}://{host}:{port}"
    timeout = httpx.Timeout(timeouts.operation_s, connect=timeouts.connect_s)
    try:
        # A bounded probe first: chromadb's client would wait forever on a silent host.
        httpx.get(f"{base}/api/v2/heartbeat", timeout=timeout).raise_for_status()
        client = chromadb.HttpClient(
            host=host, port=port, ssl=ssl, settings=Settings(anonymized_telemetry=False)
        )
        session = getattr(getattr(client, "_server", None), "_session", None)
        if not isinstance(session, httpx.Client):
            raise ConfigurationError(
                "chromadb's HTTP client has no httpx session to give a timeout to "
                "(chromadb changed): calls to a paused server would hang"
            )
        session.timeout = timeout
        client.heartbeat()
    except (httpx.HTTPError, ConnectionError, ValueError) as exc:
        # chromadb raises ValueError("Could not connect to a Chroma server...") itself.
        raise BackendUnavailable(
            f"unreachable: {exc}", layer=SHORT_TERM, server=f"Chroma at {url}"
        ) from exc
    return client


#: URL scheme of a server behind a Unix socket (`reference.stm.chroma_server.unix_url`).
UNIX_SCHEME = "http+unix://"
#: Host name the client of a socket is given (unique per socket) -> the socket's path.
_sockets: dict[str, str] = {}


def _unix_client(url: str, socket_path: str, timeouts: Timeouts) -> Any:
    """A client of the private server behind `socket_path` (`chroma_private`)."""
    import chromadb
    from chromadb.config import Settings

    host = "chroma-" + hashlib.sha256(socket_path.encode()).hexdigest()[:16]
    _sockets[host] = socket_path
    timeout = httpx.Timeout(timeouts.operation_s, connect=timeouts.connect_s)
    transport = httpx.HTTPTransport(uds=socket_path)
    try:
        with httpx.Client(transport=transport, timeout=timeout) as probe:
            probe.get(f"http://{host}/api/v2/heartbeat").raise_for_status()
        _accept_unix_api()
        settings = Settings(
            anonymized_telemetry=False,
            chroma_api_impl=_UNIX_API,
            chroma_server_host=host,
            chroma_server_http_port=DEFAULT_HTTP_PORT,
        )
        client = chromadb.Client(settings=settings)
        client._server._session.timeout = timeout  # type: ignore[attr-defined]
        client.heartbeat()
    except (httpx.HTTPError, ConnectionError, ValueError, OSError) as exc:
        raise BackendUnavailable(
            f"unreachable: {exc}", layer=SHORT_TERM, server=f"Chroma at {url}"
        ) from exc
    return client


_UNIX_API = "reference.stm.chroma_client.UnixSocketFastAPI"


@functools.cache
def _accept_unix_api() -> None:
    """chromadb names its systems by API class and refuses classes it does not know:
    ours is its HTTP client (`FastAPI`) with another transport, named as that one is."""
    import uuid

    from chromadb.api.shared_system_client import SharedSystemClient

    known = SharedSystemClient._get_identifier_from_settings

    def identifier(settings: Any) -> str:
        if settings.chroma_api_impl == _UNIX_API:
            return str(uuid.uuid4())  # as chromadb names each FastAPI client's system
        return known(settings)

    SharedSystemClient._get_identifier_from_settings = staticmethod(identifier)  # type: ignore[method-assign]


@functools.cache
def _unix_api() -> Any:
    from chromadb.api.fastapi import FastAPI

    class UnixSocketFastAPI(FastAPI):
        """chromadb's HTTP client, over the Unix socket its host name stands for."""

        def __init__(self, system: Any) -> None:
            super().__init__(system)
            socket_path = _sockets[str(system.settings.chroma_server_host)]
            over_tcp = self._session
            self._session = httpx.Client(
                transport=httpx.HTTPTransport(uds=socket_path),
                timeout=None,
                limits=self.http_limits,
                headers=over_tcp.headers,
            )
            over_tcp.close()

    return UnixSocketFastAPI


def __getattr__(name: str) -> Any:
    # chromadb imports its API class by name; built on first use (chromadb is heavy).
    if name == "UnixSocketFastAPI":
        return _unix_api()
    raise AttributeError(name)
