"""``butifarra serve``: the web table on this machine, under uvicorn.

The server listens on the loopback interface only (127.0.0.1 by default) on a free port
that it prints at start; it loads nothing from the network and the page loads nothing from
anywhere else. :func:`add_serve_parser` and :func:`run_serve` plug into the ``butifarra``
command; :class:`BackgroundServer` runs the same app in a thread (tests, notebooks).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agents.registry import agent_names
from butifarra.arguments import EXIT_USAGE

if TYPE_CHECKING:  # the web framework is imported when a server starts, not to parse options
    from butifarra.web.app import ServerConfig

__all__ = ["BackgroundServer", "add_serve_parser", "bind_socket", "run_serve"]

DEFAULT_RECORDS = "butifarra_games.jsonl"


LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
"""The addresses the server listens on; the app's Host allow-list names the same ones, so an
address it would refuse every request on (127.0.0.2, ...) is refused here, at the start."""


def _loopback(host: str) -> str:
    """``host`` if it is one of :data:`LOOPBACK_HOSTS` (``[::1]`` too), else ValueError."""
    name = host.strip("[]")
    if name not in LOOPBACK_HOSTS:
        raise ValueError(
            f"--host must be 127.0.0.1, ::1 or localhost, got {host!r}: the table is for "
            "this machine only"
        )
    return "127.0.0.1" if name == "localhost" else name


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening socket on ``host`` (loopback only); port 0 takes a free one."""
    host = _loopback(host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ValueError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


HEADER_TIMEOUT_S = 10.0
"""How long a connection may take to send a request's headers (at the start, and again after
each response); then it is closed. Without it, connections that send nothing hold the
concurrency limit and every other client is answered 503."""


def _header_timeout_protocol(timeout_s: float) -> type:
    """uvicorn's h11 protocol with a header-read timeout (uvicorn arms its keep-alive timer
    only after a first response, so an idle new connection would be kept forever)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expire(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a request's headers arrived: it is being served
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

    return HeaderTimeoutProtocol


def _uvicorn(config: ServerConfig, header_timeout_s: float = HEADER_TIMEOUT_S) -> Any:
    """A ``uvicorn.Server`` for the app of ``config`` (ValueError: bad records file/agent)."""
    import uvicorn

    from butifarra.web.app import create_app

    app = create_app(config)
    return uvicorn.Server(
        uvicorn.Config(
            app,
            http=_header_timeout_protocol(header_timeout_s),
            log_level="warning",
            access_log=False,  # game ids are in the paths; keep them off the console
            limit_concurrency=256,
            timeout_keep_alive=5,
        )
    )


class BackgroundServer:
    """The app under uvicorn in a daemon thread, on a free loopback port.

    ``with BackgroundServer(config) as srv: ... srv.url ...`` starts it and waits until it
    answers; leaving the block (or :meth:`stop`) shuts it down and joins the thread.
    """

    def __init__(
        self,
        config: ServerConfig,
        host: str = "127.0.0.1",
        port: int = 0,
        header_timeout_s: float = HEADER_TIMEOUT_S,
    ) -> None:
        self.server = _uvicorn(config, header_timeout_s)
        self.app = self.server.config.app
        self.sock = bind_socket(host, port)
        self.url = _url(self.sock)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self, timeout: float = 20.0) -> BackgroundServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the web server did not start within {timeout:g} s")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- the command
def _agent_list(text: str) -> list[str]:
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        raise argparse.ArgumentTypeError("give at least one agent, e.g. 'rule,random'")
    return specs


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535 (0: a free one), got {text!r}")
    return value


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``serve`` on the ``butifarra`` command's subparsers."""
    p = sub.add_parser("serve", help="play and replay in the browser (a local web server)")
    _add_arguments(p)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "A web table on this machine: play a hand or a match to 101 against the agents, "
        "a fair (duplicate) comparison with a bot, and a replay viewer for game records. "
        "Listens on 127.0.0.1 only, on a free port printed at start."
    )
    p.add_argument("--port", type=_port, default=0, help="port (default 0: a free one)")
    p.add_argument(
        "--host", default="127.0.0.1", help="loopback address to listen on (default 127.0.0.1)"
    )
    p.add_argument(
        "--records",
        default=DEFAULT_RECORDS,
        metavar="FILE.jsonl",
        help=f"JSON Lines file every finished hand is appended to (default {DEFAULT_RECORDS})",
    )
    p.add_argument(
        "--seed",
        type=_seed,
        default=None,
        help="fix the deals, for testing: every table then plays deal d of this seed and "
        "whoever knows it knows every hand (default: deals from a secret made at start)",
    )
    p.add_argument(
        "--agents",
        type=_agent_list,
        default=None,
        help=f"agents the page offers, comma-separated (default: {','.join(agent_names())})",
    )
    p.add_argument("--max-games", type=_count, default=64, help="games held at once (default 64)")
    p.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    """Run the server until Ctrl-C; 2 with a one-line message for bad options."""
    try:
        from butifarra.web.app import ServerConfig
    except ImportError as e:
        print(
            f"butifarra serve: error: the web table needs the 'web' extra ({e}); "
            "pip install 'butifarra-rl[web]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    config = ServerConfig(
        records_path=args.records,
        seed=args.seed,
        agents=args.agents or agent_names(),
        max_games=args.max_games,
    )
    try:
        sock = bind_socket(args.host, args.port)
    except ValueError as e:
        print(f"butifarra serve: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        server = _uvicorn(config)
    except ValueError as e:
        sock.close()
        print(f"butifarra serve: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"Butifarra table: {_url(sock)}   (replay viewer: {_url(sock)}replay)", flush=True)
    print(f"Records are appended to {config.records_path}; Ctrl-C stops.", flush=True)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m butifarra.web [options]``: the ``serve`` command on its own."""
    parser = argparse.ArgumentParser(prog="python -m butifarra.web")
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))
