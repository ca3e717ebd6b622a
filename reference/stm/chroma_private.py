"""A `chroma run` server that only the owner of a Unix socket can reach.

Chroma's server (1.x) has no authentication and listens on TCP: on 127.0.0.1 every
local user could read every tenant's short-term memory. So `start_chroma_server(path,
private=True)` runs this module under `unshare --net` (with `--map-root-user` when not
root): in a network namespace of its own, with only a loopback nobody else shares, it
starts `chroma run` on 127.0.0.1 and relays to it from a Unix socket in the data
directory (mode 0600 in a 0700 directory). Only the socket's owner can connect; the
clients talk HTTP over it (`reference.stm.chroma_client`, `http+unix://` URLs).

The server dies with this process (`PR_SET_PDEATHSIG`), and this process ends when the
server does (its exit status), so a supervisor watches one process.

    python -m reference.stm.chroma_private --socket S --port P --path D --log L
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

__all__ = ["main", "namespaces_available"]

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_PR_SET_PDEATHSIG = 1


def unshare_command() -> list[str]:
    """`unshare --net`, mapping the caller to root in a user namespace when not root."""
    command = ["unshare", "--net"]
    if os.geteuid() != 0:
        command.append("--map-root-user")
    return command


def namespaces_available() -> bool:
    """Whether this machine lets the caller make a network namespace."""
    try:
        done = subprocess.run([*unshare_command(), "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def _relay(socket_path: Path, port: int, server: subprocess.Popen[bytes]) -> int:
    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        with contextlib.suppress(asyncio.CancelledError):  # the server ended: shutting down
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    socket_path.unlink(missing_ok=True)
    listener = await asyncio.start_unix_server(connect, path=str(socket_path))
    os.chmod(socket_path, 0o600)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.terminate)
    try:
        return await asyncio.to_thread(server.wait)
    finally:
        listener.close()
        socket_path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="chroma run behind a private Unix socket")
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args(argv)
    _loopback_up()
    chroma = Path(sys.executable).with_name("chroma")
    command = [str(chroma), "run", "--path", str(args.path), "--host", "127.0.0.1"]
    with open(args.log, "ab") as out:
        server = subprocess.Popen(
            [*command, "--port", str(args.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    return asyncio.run(_relay(args.socket, args.port, server))


if __name__ == "__main__":
    sys.exit(main())
