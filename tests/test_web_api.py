"""The web table's JSON API: whole hands through HTTP, what a page may see, and malformed,
hostile and oversized requests (each a 4xx with a message, the server serving on)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette", reason="the web table needs the 'web' extra (starlette)")
pytest.importorskip("httpx", reason="the API tests need httpx (the 'dev' extra)")

from starlette.testclient import TestClient  # noqa: E402

from agents.evaluation.stats import mean_ci  # noqa: E402
from agents.registry import make_agent  # noqa: E402
from butifarra.web.app import ServerConfig, create_app  # noqa: E402
from butifarra.web.tables import AgentPool, Table, agent_seed, deal_for, parse_setup  # noqa: E402
from butifarra_env.core.actions import mask_from_bits  # noqa: E402
from butifarra_env.core.cards import N_CARDS, cards_of  # noqa: E402
from butifarra_env.core.game import Game  # noqa: E402
from butifarra_env.core.observation import Observer  # noqa: E402
from butifarra_env.core.options import Options  # noqa: E402
from butifarra_env.envs.replay import replay  # noqa: E402
from butifarra_env.records import load_records  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
AGENTS = ("rule", "random")
HOSTS = ("testserver", "127.0.0.1")
JSON = {"content-type": "application/json"}


def make_client(tmp_path: Path, **kw: Any) -> TestClient:
    config = ServerConfig(
        records_path=str(tmp_path / "games.jsonl"),
        seed=kw.pop("seed", 7),
        agents=AGENTS,
        allowed_hosts=HOSTS,
        **kw,
    )
    return TestClient(create_app(config), raise_server_exceptions=False)


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    return make_client(tmp_path)


def new_game(client: TestClient, **setup: Any) -> tuple[str, dict[str, Any]]:
    r = client.post("/api/games", json={"opponents": ["random", "rule"], **setup})
    assert r.status_code == 201, r.text
    body = r.json()
    return body["id"], body


def table_of(client: TestClient, gid: str) -> Table:
    return client.app.state.store.games[gid]  # type: ignore[attr-defined]


def first_legal(view: dict[str, Any]) -> int:
    return view["legal"][0]


def act(client: TestClient, gid: str, view: dict[str, Any], action: int | None = None) -> Any:
    """The person plays ``action`` (default: the first legal one) from ``view``."""
    action = first_legal(view) if action is None else action
    return client.post(f"/api/games/{gid}/act", json={"action": action, "at": view["n_actions"]})


def play_out(client: TestClient, gid: str, view: dict[str, Any], check=None) -> dict[str, Any]:
    """Play the person's first legal move until the hand ends (at most 60 moves)."""
    for _ in range(60):
        if view["over"]:
            return view
        r = client.post(
            f"/api/games/{gid}/act", json={"action": first_legal(view), "at": view["n_actions"]}
        )
        assert r.status_code == 200, r.text
        if check is not None:
            check(r.json())
        view = r.json()["view"]
    raise AssertionError("the hand did not end within 60 moves of the person")


# --------------------------------------------------------------------------- privacy
VIEW_KEYS = {
    "phase", "to_move", "dealer", "trump", "chooser", "delegated", "level", "level_name",
    "multiplier", "multiplier_text", "rules", "team_points", "team_tricks", "counts", "trick",
    "trick_leader", "n_actions", "setup", "players", "deal", "hand_number", "match_scores",
    "target", "hand", "legal", "next_double", "next_multiplier", "butifarra_multiplier",
    "tricks", "log", "over", "result", "saved", "duplicate", "match",
}  # fmt: skip
EVENT_KEYS = {"seat", "action", "text", "state", "trick_done"}


def visible_cards(body: dict[str, Any]) -> set[int]:
    """Every card id a response shows, from the fields that hold cards."""
    seen: set[int] = set()
    views = [body["view"]] + [e["state"] for e in body.get("events", [])]
    for v in views:
        seen |= {c for c in v["trick"] if c is not None}
    v = body["view"]
    seen |= set(v["hand"]) | {c for c in v["legal"] if c < N_CARDS}
    for t in v["tricks"]:
        seen |= set(t["cards"])
    seen |= {e["action"] for e in v["log"] if e["action"] < N_CARDS}
    for e in body.get("events", []):
        if e["action"] < N_CARDS:
            seen.add(e["action"])
        if e["trick_done"]:
            seen |= set(e["trick_done"]["cards"])
    return seen


@pytest.mark.parametrize("seat", [0, 3])
def test_a_page_sees_its_own_hand_and_played_cards_only(client: TestClient, seat: int) -> None:
    gid, body = new_game(client, seat=seat, mode="duplicate", bot="random")
    table = table_of(client, gid)

    def check(body: dict[str, Any]) -> None:
        v = body["view"]
        assert set(v) == VIEW_KEYS  # a new field must be reviewed here for what it reveals
        assert all(set(e) == EVENT_KEYS for e in body.get("events", []))
        game = table.hand.game
        assert set(v["hand"]) == set(cards_of(game.hands[seat]))
        if not game.is_over:
            played = set().union(*(set(cards_of(p)) for p in game.played))
            others = set().union(*(set(cards_of(game.hands[s])) for s in range(4) if s != seat))
            assert visible_cards(body) <= set(v["hand"]) | played
            assert not visible_cards(body) & others
            if game.to_move == seat:
                assert v["legal"] == game.legal_actions()  # the engine's mask, as it is
            else:
                assert v["legal"] == []

    check(body)
    play_out(client, gid, body["view"], check)


def test_two_sessions_have_separate_games(client: TestClient) -> None:
    a, body_a = new_game(client, seat=0)
    b, body_b = new_game(client, seat=1)
    assert a != b and len(a) >= 32 and re.fullmatch(r"[A-Za-z0-9_-]+", a)
    assert not set(body_a["view"]["hand"]) & set(body_b["view"]["hand"])  # same deal, other seat
    view_a = client.get(f"/api/games/{a}").json()["view"]
    play_out(client, b, body_b["view"])
    assert client.get(f"/api/games/{a}").json()["view"] == view_a  # untouched by b's hand


# --------------------------------------------------------------------------- play
def test_a_reload_gets_the_same_view(client: TestClient) -> None:
    gid, body = new_game(client)
    view = body["view"]
    for _ in range(6):
        r = client.post(
            f"/api/games/{gid}/act", json={"action": first_legal(view), "at": view["n_actions"]}
        )
        view = r.json()["view"]
    assert client.get(f"/api/games/{gid}").json()["view"] == view


def test_a_finished_hand_is_appended_to_the_records_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "games.jsonl"
    client = make_client(tmp_path)
    client.post("/api/games", json={})  # an earlier game, left unfinished: nothing saved
    gid, body = new_game(client, seat=2)
    view = play_out(client, gid, body["view"])
    assert view["saved"] == 1
    (record,) = load_records(path)
    game = table_of(client, gid).hand.game
    assert record["actions"] == [[s, a] for s, a in game.actions]
    assert record["players"][2] == "human" and record["human_seat"] == 2
    assert replay(record).game.result() == view["result"]
    first_line = path.read_text().splitlines()[0]
    r = client.post(f"/api/games/{gid}/next")
    view = play_out(client, gid, r.json()["view"])
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and lines[0] == first_line  # appended, never rewritten
    assert json.loads(lines[1])["deal"] == 1


def test_records_from_another_run_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "games.jsonl"
    client = make_client(tmp_path)
    gid, body = new_game(client)
    play_out(client, gid, body["view"])
    before = path.read_bytes()
    client2 = make_client(tmp_path)  # a second server on the same file
    gid, body = new_game(client2)
    play_out(client2, gid, body["view"])
    assert path.read_bytes().startswith(before)
    assert len(load_records(path)) == 2


def test_same_seed_same_deals_and_the_dealer_comes_from_the_seed(tmp_path: Path) -> None:
    hands = []
    for _ in range(2):
        client = make_client(tmp_path, seed=11)
        _, body = new_game(client, seat=1)
        hands.append(body["view"]["hand"])
    dealer, deal = deal_for(11, 0)
    assert hands[0] == hands[1]
    assert set(hands[0]) == set(cards_of(deal[1]))
    assert body["view"]["dealer"] == dealer
    _, other = new_game(make_client(tmp_path, seed=12), seat=1)
    assert set(other["view"]["hand"]) != set(hands[0])


def test_a_match_carries_the_score_and_rotates_the_deal_until_101(client: TestClient) -> None:
    gid, body = new_game(client, mode="match", opponents=["rule", "rule"])
    view, scores = body["view"], [0, 0]
    for hand in range(60):  # a match to 101 is far shorter
        assert (view["hand_number"], view["match_scores"], view["target"]) == (hand, scores, 101)
        view = play_out(client, gid, view)
        scores = [a + b for a, b in zip(scores, view["result"]["scores"], strict=True)]
        assert view["match"]["scores"] == scores
        dealer = view["dealer"]
        view = client.post(f"/api/games/{gid}/next").json()["view"]
        if max(scores) >= 101:
            break
        assert view["dealer"] == (dealer + 1) % 4
    else:
        raise AssertionError("no team reached 101 in 60 hands")
    assert (view["hand_number"], view["match_scores"]) == (0, [0, 0])  # a new match
    assert view["match"]["winner"] is None


def test_duplicate_mode_plays_the_same_deal_with_the_bot_in_the_seat(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    deltas = []
    gid, body = new_game(client, mode="duplicate", seat=1, partner="rule", bot="rule")
    view = body["view"]
    for _ in range(3):
        view = play_out(client, gid, view)
        deltas.append(view["duplicate"]["last"]["delta"])
        view = client.post(f"/api/games/{gid}/next").json()["view"]
    records = load_records(tmp_path / "games.jsonl")
    assert [r["role"] for r in records] == ["human", "bot"] * 3
    for human, bot, delta in zip(records[::2], records[1::2], deltas, strict=True):
        assert (human["dealer"], human["hands"]) == (bot["dealer"], bot["hands"])
        assert bot["players"] == ["rule", "rule", "random", "rule"]  # seat 2: the right opponent
        assert delta == human["result"]["rewards"][1] - bot["result"]["rewards"][1]
        assert replay_with_fresh_agents(bot) == bot["actions"]  # the bot really played it
    d = view["duplicate"]
    assert d["n"] == 3 and d["deltas"] == deltas
    mean, lo, hi = mean_ci(np.asarray(deltas, dtype=float))  # the project's one interval
    assert (d["mean"], d["lo"], d["hi"]) == pytest.approx((mean, lo, hi), abs=1e-3)
    assert d["mean"] == pytest.approx(sum(deltas) / 3, abs=1e-3)


def replay_with_fresh_agents(record: dict[str, Any]) -> list[list[int]]:
    """The actions fresh agents (named in the record, seeded as the server seeds them) take
    on the record's deal, from their observations."""
    game = Game(Options(), record["dealer"], [sum(1 << c for c in h) for h in record["hands"]])
    agents = {s: make_agent(spec, record["seed"] + s) for s, spec in enumerate(record["players"])}
    for s, agent in agents.items():
        agent.reset(agent_seed(record["seed"], record["deal"], s))
    observer = Observer()
    observer.reset(game)
    while not game.is_over:
        seat = game.to_move
        action = agents[seat].act(observer.observe(seat), mask_from_bits(game.legal))
        game.step(action)
        observer.update(game, seat, action)
    return [[s, a] for s, a in game.actions]


# --------------------------------------------------------------------------- refusals
def test_moves_that_do_not_fit_the_position_are_409_and_change_nothing(client: TestClient) -> None:
    gid, body = new_game(client)
    view = body["view"]
    while view["phase"] != "play" or len(view["legal"]) == len(view["hand"]):
        view = act(client, gid, view).json()["view"]
    illegal = next(c for c in view["hand"] if c not in view["legal"])
    not_held = next(c for c in range(N_CARDS) if c not in view["hand"])
    for action in (illegal, not_held, 52):
        r = client.post(f"/api/games/{gid}/act", json={"action": action, "at": view["n_actions"]})
        assert r.status_code == 409
        assert "illegal action" in r.json()["error"] and "legal actions" in r.json()["error"]
    r = client.post(f"/api/games/{gid}/act", json={"action": view["legal"][0], "at": 0})
    assert r.status_code == 409 and "out of date" in r.json()["error"]
    assert client.post(f"/api/games/{gid}/next").status_code == 409
    assert client.get(f"/api/games/{gid}").json()["view"] == view


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "send"),
        (b'{"at": 0}', "send"),
        (b'{"action": "9o"}', "action must be an int"),
        (b'{"action": 48.0}', "action must be an int"),
        (b'{"action": true}', "action must be an int"),
        (b'{"action": 56}', "action must be an int"),
        (b'{"action": -1}', "action must be an int"),
        (b'{"action": 48, "at": "x"}', "at must be an int"),
        (b'{"action": 48, "cards": [1]}', "unknown field"),
        (b"\xff\xfe", "not UTF-8 text"),
        (b"[" * 100000 + b"]" * 100000, "request body over"),
    ],
)
def test_malformed_moves_are_400_with_a_message(
    client: TestClient, body: bytes, match: str
) -> None:
    gid, created = new_game(client)
    r = client.post(f"/api/games/{gid}/act", content=body, headers=JSON)
    assert 400 <= r.status_code < 500
    assert match in r.json()["error"]
    assert client.get(f"/api/games/{gid}").json()["view"] == created["view"]


def test_deep_nesting_within_the_size_limit_is_refused(client: TestClient) -> None:
    gid, _ = new_game(client)
    r = client.post(f"/api/games/{gid}/act", content=b"[" * 8000 + b"]" * 8000, headers=JSON)
    assert r.status_code == 400 and "nested deeper than" in r.json()["error"]


@pytest.mark.parametrize(
    ("setup", "match"),
    [
        ({"partner": "ppo:/etc/passwd"}, "partner must be one of"),
        ({"opponents": ["rule"]}, "opponents must be a list of two"),
        ({"opponents": ["rule", "nobody"]}, "opponents[1] must be one of"),
        ({"seat": 4}, "seat must be an int 0-3"),
        ({"seat": "0"}, "seat must be an int 0-3"),
        ({"mode": "poker"}, "mode must be one of"),
        ({"seed": -1}, "a page cannot choose the deals"),
        ({"seed": 7}, "a page cannot choose the deals"),
        ({"bot": None}, "bot must be one of"),
        ({"hands": [[1, 2, 3]]}, "unknown setup field"),
        ({"obligada": "yes"}, "obligada must be True or False, got 'yes'"),
        ({"linear_doubling": 1}, "linear_doubling must be True or False, got 1"),
        ({"butifarra_max_doubling_level": 5}, "butifarra_max_doubling_level must be an int 0-4"),
        ({"butifarra_max_doubling_level": "2"}, "butifarra_max_doubling_level must be an int"),
        ({"variants": {"obligada": True}}, "unknown setup field"),
    ],
)
def test_bad_setups_are_400_naming_the_field(client: TestClient, setup: dict, match: str) -> None:
    r = client.post("/api/games", json=setup)
    assert r.status_code == 400
    assert match in r.json()["error"]
    assert len(client.app.state.store) == 0  # type: ignore[attr-defined]


VARIANTS: dict[str, Any] = {
    "obligada": True,
    "linear_doubling": True,
    "butifarra_max_doubling_level": 2,
}
VARIANT_LABELS = ["obligada", "linear doubling", "butifarra: no Sant Vicenç"]


def test_variants_chosen_by_the_page_are_played_shown_and_recorded(tmp_path: Path) -> None:
    """The variants of a new game reach the engine, every agent at the table (before the
    first deal), the contract the page shows, the record and the replay viewer."""
    client = make_client(tmp_path)
    gid, body = new_game(client, seat=1, mode="duplicate", bot="rule", **VARIANTS)
    table = table_of(client, gid)
    expected = Options(**VARIANTS)
    assert table.options == expected == table.hand.game.options
    agents = [*table.agents.values(), *table.shadow_agents.values()]
    assert len(agents) == 3 + 4 and all(a.options == expected for a in agents)
    assert body["view"]["setup"]["variants"] == VARIANTS
    assert body["view"]["rules"] == VARIANT_LABELS
    assert all(e["state"]["rules"] == VARIANT_LABELS for e in body["events"])
    asked_to_double = []

    def check(body: dict[str, Any]) -> None:
        v = body["view"]
        if v["phase"] == "doubling" and v["to_move"] == 1:
            asked_to_double.append(v)
            assert v["next_multiplier"] == expected.multiplier(v["trump"], v["level"] + 1)
        elif v["trump"] is not None:
            assert v["next_multiplier"] is None
            assert v["multiplier_text"].startswith(f"x{v['multiplier']}")

    view = play_out(client, gid, body["view"], check)
    assert view["rules"] == VARIANT_LABELS and view["saved"] == 2
    human, bot = load_records(tmp_path / "games.jsonl")
    for record in (human, bot):
        assert {k: record["options"][k] for k in VARIANTS} == VARIANTS
        game = replay(record).game  # every move checked under the record's options
        assert game.options == expected and game.result() == record["result"]
    listed = client.get("/api/records").json()["records"]
    assert [r["rules"] for r in listed] == [VARIANT_LABELS, VARIANT_LABELS]
    frames = client.get("/api/records/0").json()["frames"]
    assert all(f["rules"] == VARIANT_LABELS for f in frames)
    if frames[-1]["level"] >= 2:
        assert "linear doubling" in frames[-1]["multiplier_text"]


def test_a_game_with_an_agent_that_cannot_play_the_variants_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that cannot play a chosen variant refuses when the game is made: 400 naming
    it and the variant, no game kept; the same agent plays the default rules."""
    from agents.base import UnsupportedVariant
    from agents.random_agent import RandomAgent
    from agents.registry import AGENT_FACTORIES

    class DefaultRulesOnly(RandomAgent):
        name = "strict"
        supported_variants = frozenset()

    monkeypatch.setitem(AGENT_FACTORIES, "strict", lambda arg, seed: DefaultRulesOnly(seed))
    config = ServerConfig(
        records_path=str(tmp_path / "games.jsonl"),
        seed=7,
        agents=("rule", "strict"),
        allowed_hosts=HOSTS,
    )
    client = TestClient(create_app(config), raise_server_exceptions=False)
    for setup in ({"partner": "strict"}, {"mode": "duplicate", "bot": "strict"}):
        r = client.post("/api/games", json={**setup, "obligada": True})
        assert r.status_code == 400, r.text
        assert "agent 'strict' cannot play obligada" in r.json()["error"]
        assert len(client.app.state.store) == 0  # type: ignore[attr-defined]
    r = client.post("/api/games", json={"partner": "strict", "linear_doubling": True})
    assert r.status_code == 400 and "linear doubling" in r.json()["error"]
    ok = client.post("/api/games", json={"partner": "strict", "obligada": False})
    assert ok.status_code == 201, ok.text
    assert issubclass(UnsupportedVariant, ValueError)


def test_unknown_and_malformed_ids_and_routes(client: TestClient) -> None:
    gid, _ = new_game(client)
    assert client.get("/api/games/" + "A" * 32).status_code == 404
    assert client.get("/api/games/short").status_code == 400
    assert client.get("/api/games/%2E%2E%2Fetc%2Fpasswd").status_code in (400, 404)
    assert client.post("/api/games/" + "A" * 32 + "/act", json={"action": 1}).status_code == 404
    assert client.get("/api/nothing").status_code == 404
    assert client.put(f"/api/games/{gid}").status_code == 405
    assert "error" in client.get("/api/nothing").json()
    assert client.delete(f"/api/games/{gid}").status_code == 200
    assert client.get(f"/api/games/{gid}").status_code == 404
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/api/config").status_code == 200  # still serving


def test_request_bodies_are_capped(client: TestClient) -> None:
    big = b'{"mode": "hand", "x": "' + b"a" * 20000 + b'"}'
    r = client.post("/api/games", content=big, headers=JSON)
    assert r.status_code == 413 and "over" in r.json()["error"]

    def chunks():  # no Content-Length: the limit holds while the body streams in
        for _ in range(40):
            yield b" " * 1000

    r = client.post("/api/games", content=chunks(), headers=JSON)
    assert r.status_code == 413
    r = client.post("/api/replay", content=b"[" + b" " * (3 * 1024 * 1024) + b"]", headers=JSON)
    assert r.status_code == 413


def test_the_number_of_games_is_capped(tmp_path: Path) -> None:
    busy = make_client(tmp_path, max_games=2, idle_evict_s=3600)
    new_game(busy)
    new_game(busy)
    r = busy.post("/api/games", json={})
    assert r.status_code == 503 and "full" in r.json()["error"]
    idle = make_client(tmp_path, max_games=2, idle_evict_s=0)
    first, _ = new_game(idle)
    second, _ = new_game(idle)
    idle.get(f"/api/games/{first}")  # first is now the most recently used
    third, _ = new_game(idle)
    assert idle.get(f"/api/games/{second}").status_code == 404  # the least recently used went
    assert idle.get(f"/api/games/{first}").status_code == 200
    assert idle.get(f"/api/games/{third}").status_code == 200


def test_foreign_hosts_and_security_headers(client: TestClient) -> None:
    r = client.get("/", headers={"host": "evil.example"})
    assert r.status_code == 400
    r = client.get("/")
    assert r.status_code == 200 and "<title>Butifarra" in r.text
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"


def test_every_asset_is_served_by_the_project(client: TestClient) -> None:
    static = REPO / "butifarra" / "web" / "static"
    for path in sorted(static.iterdir()):
        text = path.read_text("utf-8").replace("http://www.w3.org/2000/svg", "")  # a name only
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.I), path.name
        assert client.get(f"/static/{path.name}").status_code == 200
    for page in ("/", "/replay"):
        html = client.get(page).text
        for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert ref.startswith("/"), ref
            assert client.get(ref).status_code == 200, ref


# --------------------------------------------------------------------------- replay API
def test_records_list_and_replay(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    gid, body = new_game(client, mode="duplicate", bot="random")
    play_out(client, gid, body["view"])
    listing = client.get("/api/records").json()
    assert listing["total"] == 2 and [r["role"] for r in listing["records"]] == ["human", "bot"]
    data = client.get("/api/records/1").json()
    record = load_records(tmp_path / "games.jsonl")[1]
    assert len(data["frames"]) == len(record["actions"]) + 1
    assert data["has_probs"] == ("probs" in record)
    assert client.get("/api/records/2").status_code == 404
    assert client.get("/api/records?limit=0").status_code == 400
    assert client.get("/api/records?offset=x").status_code == 400
    sent = client.post("/api/replay", json={"record": record}).json()
    assert sent == data
    record["actions"][5] = [record["actions"][5][0], 99]
    r = client.post("/api/replay", json={"record": record})
    assert r.status_code == 400 and "actions[5]" in r.json()["error"]
    r = client.post("/api/replay", json={"record": {"format_version": 1}})
    assert r.status_code == 400 and "missing" in r.json()["error"]


# --------------------------------------------------------------------------- the command
def test_the_command_serves_on_a_printed_loopback_port(tmp_path: Path) -> None:
    records = tmp_path / "g.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "butifarra.web", "--records", str(records), "--agents", "rule"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, line
        import httpx

        # The socket listens before the address is printed (serve.bind_socket), so the
        # request waits in its backlog until the app answers: no polling, one bounded wait.
        r = httpx.get(f"http://127.0.0.1:{m.group(1)}/api/config", timeout=60)
        assert r.json()["agents"] == ["rule"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--host", "0.0.0.0"], "--host must be"),
        (["--agents", "nobody"], "unknown agent"),
        (["--records", "."], "is a directory"),
    ],
)
def test_the_command_refuses_bad_options_in_one_line(args: list[str], match: str) -> None:
    import contextlib
    import io

    from butifarra.web.serve import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(args) == 2
    assert match in err.getvalue() and err.getvalue().count("\n") == 1


def test_a_foreign_records_file_is_refused_at_start(tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text("my notes\n")
    with pytest.raises(ValueError, match="not a JSON Lines file of game records"):
        create_app(ServerConfig(records_path=str(notes), agents=AGENTS))
    assert notes.read_text() == "my notes\n"


def test_table_refuses_unknown_agents_without_the_server() -> None:
    with pytest.raises(ValueError, match="partner must be one of"):
        parse_setup({"partner": "ppo"}, AGENTS, 0)
    table = Table(parse_setup({}, AGENTS, 0), make_agent)
    assert table.view()["players"][0] == "human"


def test_the_agent_pool_hands_out_independent_reseeded_copies() -> None:
    pool = AgentPool(["random"], make_agent)
    a, b, c = pool("random", 1), pool("random", 1), pool("random", 2)
    assert len({id(a), id(b), id(c), id(pool.prototypes["random"])}) == 4
    obs = np.zeros(491, np.uint8)
    mask = np.zeros(56, np.int8)
    mask[:12] = 1

    def draws(agent) -> list[int]:
        return [agent.act(obs, mask) for _ in range(30)]

    first = draws(a)
    assert first == draws(b)  # same seed, same play, each from its own generator
    assert first != draws(c)
    with pytest.raises(ValueError, match="not offered"):
        pool("rule", 0)


def test_the_serve_subcommand_plugs_into_a_command_line() -> None:
    import argparse

    from butifarra.web.serve import add_serve_parser, run_serve

    parser = argparse.ArgumentParser(prog="butifarra")
    add_serve_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", "--agents", "rule, random", "--seed", "5"])
    assert args.func is run_serve and args.agents == ["rule", "random"] and args.seed == 5
    assert (args.port, args.host, args.records) == (0, "127.0.0.1", "butifarra_games.jsonl")
    for bad in (["--port", "70000"], ["--seed", "-1"], ["--max-games", "0"], ["--agents", ","]):
        with pytest.raises(SystemExit):
            parser.parse_args(["serve", *bad])
