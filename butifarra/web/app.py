"""The web server: a Starlette app holding one :class:`~butifarra.web.tables.Table` per
browser session, the static page, and the replay API.

Every game lives on the server behind an unguessable id (``secrets.token_urlsafe``) that the
page keeps in its local storage, so a reload finds it again. The server answers only with
what that session's seat may see (:meth:`Table.view`). Everything is bounded: the number of
games (the least recently used idle one makes room, else 503), the size of a request body
(413), the length of a records page. A malformed request gets a 4xx with a JSON
``{"error": message}`` and changes nothing.

Who may talk to it: only ``Host`` names on the allow-list (DNS rebinding), and a request
that changes anything (POST, DELETE) only from the server's own pages or from a client that
is not a browser page: an ``Origin`` other than the server's own loopback origin, or
``Sec-Fetch-Site: cross-site`` / ``same-site``, is 403, and a POST whose body is not declared
``application/json`` is 415 (a foreign page's "simple" ``text/plain`` POST needs no CORS
preflight, so the type is checked here, before the body is read). Every body is parsed by
:func:`butifarra_env.core.json_input.loads` (depth and digit limits).

Deals come from the server's :class:`~butifarra.web.tables.DealSource` (a secret, unless a
fixed seed is configured); a record of a deal that a table is still playing is withheld from
``/api/records`` until that hand ends.

Build it with :func:`create_app`; :mod:`butifarra.web.serve` runs it under uvicorn.
"""

from __future__ import annotations

import itertools
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
from urllib.parse import urlsplit

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
    DealSource,
    RecordLog,
    Table,
    parse_setup,
)
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.json_input import JSONInputError, loads
from butifarra_env.core.validate import is_int
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
    seed: int | None = None
    """None: deals from a per-server secret (no one can compute a hand). An int: the fixed,
    reproducible deals of :func:`~butifarra.web.tables.deal_for`, the same at every table
    (for testing; whoever knows the seed knows every hand). Never sent to a page."""
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


class SameOrigin:
    """Requests that change something (every method but GET/HEAD/OPTIONS) come from the
    server's own pages or from a client that is not a web page, and carry JSON.

    * ``Origin`` (sent by browsers with every cross-origin request and every POST) must be
      ``http://HOST:PORT`` with HOST on the server's allow-list and PORT the server's own
      (``localhost``, ``127.0.0.1`` and ``[::1]`` are all the same server); anything else,
      ``null`` included, is 403. No ``Origin`` (curl, scripts, tests) is allowed.
    * ``Sec-Fetch-Site`` (sent by current browsers), when present, must be ``same-origin`` or
      ``none``: ``cross-site`` and ``same-site`` (another port of this machine) are 403.
    * A request with a body (or a ``Content-Type``) must declare ``application/json`` (415
      otherwise): a foreign page can send ``text/plain`` or a form without a CORS
      preflight, never ``application/json``. A bodiless POST (``/next``) needs no type.
    """

    SAFE = frozenset({"GET", "HEAD", "OPTIONS"})

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = {h.lower().strip("[]") for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in self.SAFE:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, message = refusal
            await _error(status, message)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _own_port(self, scope: Scope, headers: dict[str, str]) -> int | None:
        server = scope.get("server")
        if server and server[1] is not None:
            return int(server[1])
        host = headers.get("host", "")
        try:
            return urlsplit("//" + host).port or 80
        except ValueError:
            return None

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        site = headers.get("sec-fetch-site")
        if site is not None and site.strip().lower() not in ("same-origin", "none"):
            return 403, f"refused: a request from another site (Sec-Fetch-Site: {site[:40]})"
        origin = headers.get("origin")
        if origin is not None and not self._own_origin(origin, self._own_port(scope, headers)):
            return 403, (
                f"refused: a request from another origin ({origin[:80]!r}); only this "
                "server's own pages may change games"
            )
        ctype = headers.get("content-type")
        has_body = headers.get("content-length", "0").strip() not in ("", "0") or (
            "transfer-encoding" in headers
        )
        if ctype is not None or has_body:
            ctype = ctype or ""
            if ctype.split(";")[0].strip().lower() != "application/json":
                return 415, (
                    f"a request body must be sent as Content-Type: application/json, "
                    f"got {ctype[:60]!r}"
                )
        return None

    def _own_origin(self, origin: str, port: int | None) -> bool:
        try:
            url = urlsplit(origin.strip())
            origin_port = url.port or (80 if url.scheme == "http" else None)
        except ValueError:
            return False
        return (
            url.scheme == "http"
            and (url.hostname or "") in self.hosts
            and port is not None
            and origin_port == port
            and url.path in ("", "/")
            and not url.username
            and not url.query
        )


# --------------------------------------------------------------------------- helpers
async def _json_body(request: Request) -> Any:
    """The request's JSON body (empty body: an empty object); 400 naming what is wrong when
    it is not JSON within the reader's limits (nesting depth, digits in a number)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        return loads(raw)
    except JSONInputError as e:
        raise HTTPException(400, f"the request body is refused: {e}") from None


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
    deals = DealSource(config.seed)  # the secret lives here, never in a response
    table_numbers = itertools.count()
    numbers_lock = threading.Lock()

    def next_number() -> int:
        with numbers_lock:
            return next(table_numbers)

    def deals_in_play() -> set[tuple[int, ...]]:
        """The hands of every deal a table is playing now (its record must wait)."""
        with store.lock:
            tables = list(store.games.values())
        playing = set()
        for table in tables:
            with table.lock:
                hands = table.deal_in_play()
            if hands is not None:
                playing.add(hands)
        return playing

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
                "fixed_deals": deals.fixed,
                "target": MATCH_TARGET,
                "records": Path(records.path).name,
                "max_games": config.max_games,
            }
        )

    async def new_game(request: Request) -> Response:
        data = await _json_body(request)
        try:
            setup = parse_setup(data, agents, config.seed, seed_allowed=False)
        except ValueError as e:
            raise HTTPException(400, str(e)) from None

        def build() -> Table:
            return Table(setup, maker, records, deals=deals, number=next_number())

        try:
            table = await run_in_threadpool(build)
        except ValueError as e:  # an agent that cannot play the chosen variants refuses
            raise HTTPException(400, str(e)) from None
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
            playing = deals_in_play()
            if path.exists():
                for i, record in enumerate(iter_records(path, skip_bad=True, skipped=skipped)):
                    total = i + 1
                    if offset <= i < offset + limit:
                        if _record_hands(record) in playing:
                            out.append({"index": i, "in_play": True})
                        else:
                            out.append({**record_summary(i, record), "in_play": False})
            return {"records": out, "total": total, "skipped": len(skipped), "file": path.name}

        return JSONResponse(await run_in_threadpool(run))

    async def get_record(request: Request) -> Response:
        index = request.path_params["index"]

        def run() -> dict[str, Any]:
            if Path(records.path).exists():
                for i, record in enumerate(iter_records(records.path, skip_bad=True)):
                    if i == index:
                        if _record_hands(record) in deals_in_play():
                            raise HTTPException(
                                409,
                                f"record {index} is a deal a table is still playing; "
                                "it can be shown once that hand ends",
                            )
                        return _checked(replay_data, record)
            raise HTTPException(404, f"no record {index} in {Path(records.path).name}")

        return JSONResponse(await run_in_threadpool(run))

    async def replay_record(request: Request) -> Response:
        data = await _json_body(request)
        record = data["record"] if isinstance(data, dict) and "record" in data else data
        if not isinstance(record, dict) or not record:
            raise HTTPException(
                400,
                'send a record: a JSON object (one line of a records file), or {"record": '
                f"that object}}; got {type(record).__name__}{' (empty)' if record == {} else ''}",
            )
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
            Middleware(SameOrigin, hosts=list(config.allowed_hosts)),
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
    app.state.deals = deals
    return app


def _record_hands(record: dict[str, Any]) -> tuple[int, ...] | None:
    """A record's four hands as bitmasks (the key of :meth:`Table.deal_in_play`)."""
    hands = record.get("hands")
    if not isinstance(hands, list) or len(hands) != 4:
        return None
    masks = []
    for hand in hands:
        if not isinstance(hand, list) or not all(is_int(c) and 0 <= c < N_CARDS for c in hand):
            return None
        masks.append(sum(1 << int(c) for c in set(hand)))
    return tuple(masks)
