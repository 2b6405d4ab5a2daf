"""The web server: a Starlette app holding one :class:`~butifarra.web.tables.Table` per
browser session, the static page, and the replay API.

Every game lives on the server behind an unguessable id (``secrets.token_urlsafe``) that the
page keeps in its local storage, so a reload finds it again. The server answers only with
what that session's seat may see (:meth:`Table.view`). Everything is bounded: the number of
games (the least recently used idle one makes room, else 503), the size of a request body
(413), the length of a records page. A malformed request gets a 4xx with a JSON
``{"error": message}`` and changes nothing.

Build it with :func:`create_app`; :mod:`butifarra.web.serve` runs it under uvicorn.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agents.registry import agent_names, make_agent
from butifarra.web.replay import record_summary, replay_data
from butifarra.web.tables import (
    MATCH_TARGET,
    MODES,
    AgentPool,
    Conflict,
    RecordLog,
    Table,
    parse_setup,
)
from butifarra_env.records import iter_records

__all__ = ["GameStore", "ServerConfig", "ServerFull", "create_app"]

STATIC_DIR = Path(str(resources.files("butifarra.web").joinpath("static")))
GAME_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
RECORDS_PAGE = 200
"""The most record summaries one request returns."""


@dataclass
class ServerConfig:
    """What ``butifarra serve`` sets: where records go, the deals' seed, who may play."""

    records_path: str = "butifarra_games.jsonl"
    seed: int = 0
    agents: Sequence[str] = field(default_factory=agent_names)
    """The agent specs a page may choose (a page never names a checkpoint file)."""
    max_games: int = 64
    idle_evict_s: float = 600.0
    """A game untouched this long may be dropped to make room for a new one."""
    max_body: int = 16 * 1024
    """Bytes a game request may carry."""
    max_replay_body: int = 2 * 1024 * 1024
    """Bytes a record sent to the replay viewer may carry."""
    allowed_hosts: Sequence[str] = ("127.0.0.1", "localhost", "[::1]")
    """Host headers answered (a guard against DNS rebinding to the local server)."""


class ServerFull(Exception):
    """Every game slot is taken by a game in use."""


class GameStore:
    """The live games by id: bounded, least recently used first out (when idle)."""

    def __init__(self, max_games: int, idle_evict_s: float) -> None:
        self.max_games = max_games
        self.idle_evict_s = idle_evict_s
        self.games: OrderedDict[str, Table] = OrderedDict()
        self.lock = threading.Lock()

    def add(self, table: Table) -> str:
        """Store ``table`` under a new id; raises ServerFull when no idle game can go."""
        with self.lock:
            if len(self.games) >= self.max_games:
                oldest_id, oldest = next(iter(self.games.items()))
                if time.monotonic() - oldest.last_used < self.idle_evict_s:
                    raise ServerFull
                del self.games[oldest_id]
            gid = secrets.token_urlsafe(24)
            self.games[gid] = table
            return gid

    def get(self, gid: str) -> Table:
        with self.lock:
            table = self.games.get(gid)
            if table is None:
                raise KeyError(gid)
            self.games.move_to_end(gid)
            table.last_used = time.monotonic()
            return table

    def remove(self, gid: str) -> bool:
        with self.lock:
            return self.games.pop(gid, None) is not None

    def __len__(self) -> int:
        return len(self.games)


# --------------------------------------------------------------------------- middleware
class BodyLimit:
    """Refuse (413) a request whose declared or actual body exceeds its route's limit."""

    def __init__(self, app: ASGIApp, default: int, limits: dict[str, int]) -> None:
        self.app = app
        self.default = default
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.get(scope["path"], self.default)
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared < 0 or declared > limit:
                    await _too_large(limit)(scope, receive, send)
                    return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, f"request body over {limit} bytes")
            return message

        await self.app(scope, limited, send)


def _too_large(limit: int) -> Response:
    return JSONResponse({"error": f"request body over {limit} bytes"}, status_code=413)


class SecurityHeaders:
    """Same-origin assets only (no inline script), no framing, no sniffing."""

    HEADERS = [
        (
            b"content-security-policy",
            b"default-src 'self'; img-src 'self' data:; object-src 'none'; "
            b"base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
        ),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"DENY"),
        (b"cache-control", b"no-store"),
    ]

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + self.HEADERS
            await send(message)

        await self.app(scope, receive, with_headers)


# --------------------------------------------------------------------------- helpers
async def _json_body(request: Request) -> Any:
    """The request's JSON body (empty body: an empty object); 400 when it is not JSON."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HTTPException(400, f"the request body is not valid JSON: {e}") from None
    except RecursionError:
        raise HTTPException(400, "the request body nests too deeply") from None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _game_id(request: Request) -> str:
    gid = request.path_params["gid"]
    if not GAME_ID.match(gid):
        raise HTTPException(400, "a game id is 16-64 letters, digits, '-' or '_'")
    return gid


def _checked(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with the user's mistakes as HTTP errors: a move that does not fit the
    position (:class:`Conflict`) is 409, any other ValueError (RecordError included) 400."""
    try:
        return fn(*args)
    except Conflict as e:
        raise HTTPException(409, str(e)) from None
    except ValueError as e:
        raise HTTPException(400, str(e)) from None


def _int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = lo - 1
    if not lo <= value <= hi:
        raise HTTPException(400, f"{name} must be an integer {lo}-{hi}, got {text[:20]!r}")
    return value


# --------------------------------------------------------------------------- the app
def create_app(config: ServerConfig | None = None) -> Starlette:
    """The server for ``config``: the records file is checked and every offered agent is
    built once now, so a bad path or an unusable agent fails at start (ValueError)."""
    config = config or ServerConfig()
    if config.max_games < 1:
        raise ValueError(f"max_games must be >= 1, got {config.max_games}")
    records = RecordLog(config.records_path)
    agents = list(dict.fromkeys(config.agents))
    if not agents:
        raise ValueError("at least one agent must be offered")
    maker = AgentPool(agents, make_agent)  # ValueError naming an unusable agent, now
    store = GameStore(config.max_games, config.idle_evict_s)

    async def page(request: Request) -> Response:
        name = "replay.html" if request.url.path == "/replay" else "index.html"
        return FileResponse(STATIC_DIR / name, media_type="text/html")

    async def favicon(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")

    async def get_config(request: Request) -> Response:
        return JSONResponse(
            {
                "agents": agents,
                "modes": list(MODES),
                "seed": config.seed,
                "target": MATCH_TARGET,
                "records": Path(records.path).name,
                "max_games": config.max_games,
            }
        )

    async def new_game(request: Request) -> Response:
        data = await _json_body(request)
        try:
            setup = parse_setup(data, agents, config.seed)
        except ValueError as e:
            raise HTTPException(400, str(e)) from None
        table = await run_in_threadpool(Table, setup, maker, records)
        try:
            gid = store.add(table)
        except ServerFull:
            raise HTTPException(
                503, f"the server is full ({config.max_games} games in play); try again later"
            ) from None
        with table.lock:
            body = {"id": gid, "view": table.view(), "events": table.opening}
        return JSONResponse(body, status_code=201)

    def _table(request: Request) -> Table:
        gid = _game_id(request)
        try:
            return store.get(gid)
        except KeyError:
            raise HTTPException(
                404, "no such game (it ended, or the server restarted): start a new one"
            ) from None

    async def get_game(request: Request) -> Response:
        table = _table(request)

        def view() -> dict[str, Any]:
            with table.lock:
                return table.view()

        return JSONResponse({"view": await run_in_threadpool(view)})

    async def act(request: Request) -> Response:
        table = _table(request)
        data = await _json_body(request)
        if not isinstance(data, dict) or "action" not in data:
            raise HTTPException(400, 'send {"action": action id, "at": moves seen}')
        extra = set(data) - {"action", "at"}
        if extra:
            raise HTTPException(400, f"unknown field(s) {sorted(extra)}; send action and at")

        def run() -> dict[str, Any]:
            with table.lock:
                return _checked(table.act, data["action"], data.get("at"))

        return JSONResponse(await run_in_threadpool(run))

    async def next_hand(request: Request) -> Response:
        table = _table(request)

        def run() -> dict[str, Any]:
            with table.lock:
                return _checked(table.next_hand)

        return JSONResponse(await run_in_threadpool(run))

    async def end_game(request: Request) -> Response:
        gid = _game_id(request)
        if not store.remove(gid):
            raise HTTPException(404, "no such game")
        return JSONResponse({"ended": True})

    async def list_records(request: Request) -> Response:
        offset = _int_param(request, "offset", 0, 0, 10**9)
        limit = _int_param(request, "limit", 50, 1, RECORDS_PAGE)

        def run() -> dict[str, Any]:
            path = Path(records.path)
            out: list[dict[str, Any]] = []
            skipped: list[str] = []
            total = 0
            if path.exists():
                for i, record in enumerate(iter_records(path, skip_bad=True, skipped=skipped)):
                    total = i + 1
                    if offset <= i < offset + limit:
                        out.append(record_summary(i, record))
            return {"records": out, "total": total, "skipped": len(skipped), "file": path.name}

        return JSONResponse(await run_in_threadpool(run))

    async def get_record(request: Request) -> Response:
        index = request.path_params["index"]

        def run() -> dict[str, Any]:
            if Path(records.path).exists():
                for i, record in enumerate(iter_records(records.path, skip_bad=True)):
                    if i == index:
                        return _checked(replay_data, record)
            raise HTTPException(404, f"no record {index} in {Path(records.path).name}")

        return JSONResponse(await run_in_threadpool(run))

    async def replay_record(request: Request) -> Response:
        data = await _json_body(request)
        record = data.get("record") if isinstance(data, dict) and "record" in data else data
        return JSONResponse(await run_in_threadpool(_checked, replay_data, record))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, str(exc.detail))

    async def server_error(request: Request, exc: Exception) -> Response:
        return _error(500, f"internal error: {type(exc).__name__}")

    routes = [
        Route("/", page),
        Route("/replay", page),
        Route("/favicon.ico", favicon),
        Route("/api/config", get_config),
        Route("/api/games", new_game, methods=["POST"]),
        Route("/api/games/{gid}", get_game, methods=["GET"]),
        Route("/api/games/{gid}", end_game, methods=["DELETE"]),
        Route("/api/games/{gid}/act", act, methods=["POST"]),
        Route("/api/games/{gid}/next", next_hand, methods=["POST"]),
        Route("/api/records", list_records),
        Route("/api/records/{index:int}", get_record),
        Route("/api/replay", replay_record, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=list(config.allowed_hosts)),
            Middleware(
                BodyLimit, default=config.max_body, limits={"/api/replay": config.max_replay_body}
            ),
        ],
        exception_handlers={
            HTTPException: http_error,
            Exception: server_error,
        },
    )
    app.state.store = store
    app.state.records = records
    app.state.config = config
    return app
