"""The server as a hostile network sees it: connections that send nothing are closed after
the header timeout, so they cannot lock other clients out, and it listens only where its Host
allow-list answers."""

from __future__ import annotations

import http.client
import select
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the web table needs the 'web' extra")
pytest.importorskip("uvicorn", reason="the web table needs the 'web' extra")

from butifarra.web.app import ServerConfig  # noqa: E402
from butifarra.web.serve import BackgroundServer, bind_socket  # noqa: E402

IDLE = 300  # more than the server's concurrency limit (256)


def _get(port: int, path: str = "/api/config") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def _all_closed_by_server(socks: list[socket.socket], within_s: float) -> bool:
    """Whether the server closed every socket (EOF) within ``within_s`` seconds in all."""
    open_ = set(socks)
    deadline = time.monotonic() + within_s
    while open_ and time.monotonic() < deadline:
        ready, _, _ = select.select(list(open_), [], [], max(0.0, deadline - time.monotonic()))
        for s in ready:
            try:
                data = s.recv(1)
            except ConnectionResetError:
                data = b""
            if data == b"":
                open_.discard(s)
    return not open_


def test_idle_connections_are_timed_out_while_a_normal_client_is_served(tmp_path: Path) -> None:
    config = ServerConfig(records_path=str(tmp_path / "games.jsonl"), agents=["random"])
    with BackgroundServer(config, header_timeout_s=0.5) as server:
        port = server.sock.getsockname()[1]
        assert _get(port) == 200
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(IDLE)]
        try:
            # the server accepts them all; once the header timeout has passed it has closed
            # every one, and a normal client is served again
            assert _all_closed_by_server(idle, within_s=15)
            statuses = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and (not statuses or statuses[-1] != 200):
                statuses.append(_get(port))
            assert statuses[-1] == 200, statuses
        finally:
            for s in idle:
                s.close()


def test_a_request_sent_slowly_within_the_timeout_is_answered(tmp_path: Path) -> None:
    config = ServerConfig(records_path=str(tmp_path / "games.jsonl"), agents=["random"])
    with BackgroundServer(config, header_timeout_s=2.0) as server:
        port = server.sock.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /api/config HTTP/1.1\r\n")
            s.sendall(b"Host: 127.0.0.1\r\n\r\n")
            assert s.recv(64).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("host", ["127.0.0.2", "0.0.0.0", "example.org"])
def test_only_the_allow_listed_loopback_names_are_served(host: str) -> None:
    with pytest.raises(ValueError, match="must be 127.0.0.1, ::1 or localhost"):
        bind_socket(host, 0)
