"""The web table against a hostile but honest user: no hidden hand can be computed from what
a page is sent, no record of a deal another table is still playing is served, no foreign web
page can create or change games, and odd request bodies get a 4xx naming what was wrong."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="the web table needs the 'web' extra (starlette)")
pytest.importorskip("uvicorn", reason="the web table needs the 'web' extra (uvicorn)")

from starlette.testclient import TestClient  # noqa: E402

from butifarra.web.app import ServerConfig, create_app  # noqa: E402
from butifarra.web.serve import BackgroundServer  # noqa: E402
from butifarra.web.tables import DealSource, Table, deal_cards, deal_for  # noqa: E402
from butifarra_env.core.cards import cards_of  # noqa: E402
from butifarra_env.records import load_records  # noqa: E402

AGENTS = ("rule", "random")
HOSTS = ("testserver", "127.0.0.1", "localhost", "[::1]")
BIG_SEED = 2**62 + 123_456_789  # a seed no field of a view holds by chance


class Recorder(TestClient):
    """A test client that keeps every JSON body the server answers with (what a page gets)."""

    received: list[Any]

    def request(self, *args: Any, **kw: Any) -> httpx.Response:  # type: ignore[override]
        r = super().request(*args, **kw)
        if r.headers.get("content-type", "").startswith("application/json"):
            self.received.append(r.json())
        return r


def make_client(tmp_path: Path, seed: int | None = None, **kw: Any) -> Recorder:
    config = ServerConfig(
        records_path=str(tmp_path / "games.jsonl"),
        seed=seed,
        agents=AGENTS,
        allowed_hosts=HOSTS,
        **kw,
    )
    client = Recorder(create_app(config), raise_server_exceptions=False)
    client.received = []
    return client


def games(client: TestClient) -> dict[str, Table]:
    return client.app.state.store.games  # type: ignore[attr-defined]


def new_game(client: TestClient, **setup: Any) -> tuple[str, dict[str, Any]]:
    r = client.post("/api/games", json={"opponents": ["random", "rule"], **setup})
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["view"]


def step(client: TestClient, gid: str, view: dict[str, Any]) -> dict[str, Any]:
    r = client.post(
        f"/api/games/{gid}/act", json={"action": view["legal"][0], "at": view["n_actions"]}
    )
    assert r.status_code == 200, r.text
    return r.json()["view"]


def play_out(client: TestClient, gid: str, view: dict[str, Any]) -> dict[str, Any]:
    for _ in range(60):  # the person has at most ~16 decisions
        if view["over"]:
            return view
        view = step(client, gid, view)
    raise AssertionError("the hand did not end within 60 moves")


def ints_and_keys(value: Any, ints: set[int], keys: set[str]) -> None:
    """Every integer and every object key anywhere in ``value`` (bounded by its size)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            ints.add(item)
        elif isinstance(item, dict):
            keys.update(str(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# --------------------------------------------------------------------------- the deals
def test_nothing_a_page_is_sent_during_a_hand_reproduces_a_hidden_hand(tmp_path: Path) -> None:
    client = make_client(tmp_path)  # the default: deals from the server's secret
    client.get("/api/config")
    gid, view = new_game(client, seat=1, mode="duplicate", bot="rule")
    game = games(client)[gid].hand.game
    hidden = {game.initial_hands[s] for s in range(4) if s != 1}
    for _ in range(8):  # a few moves into the hand: every response is kept
        view = step(client, gid, view)
        client.get(f"/api/games/{gid}")
    assert not game.is_over
    ints: set[int] = set()
    keys: set[str] = set()
    ints_and_keys(client.received, ints, keys)
    assert not {k for k in keys if "seed" in k.lower() or "secret" in k.lower()}
    # every integer as a seed, with every integer as the deal number (and a dealer given)
    candidates = sorted(i for i in ints if i >= 0)
    assert len(candidates) >= 10  # the page is sent integers: the test tries them all
    for seed, deal in itertools.product(candidates, repeat=2):
        for dealer in (None, view["dealer"]):
            assert not set(deal_for(seed, deal, dealer)[1]) & hidden
    for seed in candidates:
        assert not set(deal_cards([seed])[1]) & hidden
    # and the page got the hand it sees, the deal number, the dealer (the test's inputs)
    assert {view["deal"], view["dealer"]} <= ints


def test_each_table_deals_from_the_secret_and_records_its_own_deal_seed(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    a, view_a = new_game(client, seat=0)
    b, view_b = new_game(client, seat=0)
    table_a, table_b = games(client)[a], games(client)[b]
    assert table_a.hand.game.initial_hands != table_b.hand.game.initial_hands
    assert table_a.deal_seed != table_b.deal_seed and "secret" in repr(client.app.state.deals)
    play_out(client, a, view_a)
    (record,) = load_records(tmp_path / "games.jsonl")
    assert record["seed"] is None and record["deal"] == 0
    dealer, hands = deal_cards(record["deal_seed"], record["dealer"])
    assert [cards_of(h) for h in hands] == record["hands"]  # the record stays reproducible
    assert not set(hands) & set(table_b.hand.game.initial_hands)  # and says nothing of b's
    # a second server has a secret of its own: its first deal is another one
    other = make_client(tmp_path)
    c, _ = new_game(other, seat=0)
    assert games(other)[c].hand.game.initial_hands != table_a.hand.game.initial_hands


def test_a_match_deal_is_reproducible_from_its_record(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    gid, view = new_game(client, mode="match")
    for _ in range(3):
        view = play_out(client, gid, view)
        view = client.post(f"/api/games/{gid}/next").json()["view"]
    for record in load_records(tmp_path / "games.jsonl"):
        _, hands = deal_cards(record["deal_seed"], record["dealer"])
        assert [cards_of(h) for h in hands] == record["hands"]


def test_a_fixed_seed_is_never_sent_to_the_page(tmp_path: Path) -> None:
    client = make_client(tmp_path, seed=BIG_SEED)
    config = client.get("/api/config").json()
    assert "seed" not in config and config["fixed_deals"] is True
    gid, view = new_game(client, mode="duplicate", bot="random")
    assert "seed" not in view["setup"]
    play_out(client, gid, view)
    client.get("/api/records")
    client.get("/api/records/0")
    client.get("/api/records/1")
    ints: set[int] = set()
    keys: set[str] = set()
    ints_and_keys(client.received, ints, keys)
    assert BIG_SEED not in ints and not {k for k in keys if "seed" in k.lower()}
    assert all(str(BIG_SEED) not in str(body) for body in client.received)
    record = load_records(tmp_path / "games.jsonl")[0]  # the file keeps it: reproducible
    assert record["seed"] == BIG_SEED and record["deal_seed"] == [BIG_SEED, 0]
    assert (
        DealSource(BIG_SEED).fixed and repr(DealSource(BIG_SEED)) == f"DealSource(seed={BIG_SEED})"
    )


def test_a_record_is_not_served_while_another_table_plays_its_deal(tmp_path: Path) -> None:
    client = make_client(tmp_path, seed=5)  # fixed deals: every table plays deal 0 first
    a, view_a = new_game(client, seat=0, mode="duplicate", bot="rule")
    b, view_b = new_game(client, seat=2, mode="duplicate", bot="rule")
    assert games(client)[a].hand.game.initial_hands == games(client)[b].hand.game.initial_hands
    play_out(client, a, view_a)  # a's deal 0 is over: its two records are written
    assert len(load_records(tmp_path / "games.jsonl")) == 2
    listing = client.get("/api/records").json()
    assert listing["total"] == 2
    assert listing["records"] == [{"index": 0, "in_play": True}, {"index": 1, "in_play": True}]
    for index in (0, 1):
        r = client.get(f"/api/records/{index}")
        assert r.status_code == 409 and "still playing" in r.json()["error"]
    view_b = play_out(client, b, view_b)  # b's deal 0 ends too: now both may be seen
    assert client.get("/api/records/0").status_code == 200
    listing = client.get("/api/records").json()["records"]
    assert [r["in_play"] for r in listing] == [False] * 4 and "seed" not in listing[0]
    # b deals deal 1 while a is still between hands: a's records of deal 0 stay visible
    client.post(f"/api/games/{b}/next")
    assert client.get("/api/records/0").status_code == 200


def test_a_record_is_withheld_again_when_a_later_table_deals_the_same_cards(
    tmp_path: Path,
) -> None:
    """What is compared is the cards: a table that starts deal 0 after the record of deal 0
    was written (and served) makes it wait again until that table's hand is over."""
    client = make_client(tmp_path, seed=9)
    a, view_a = new_game(client, seat=0)
    play_out(client, a, view_a)
    client.post(f"/api/games/{a}/next")  # a now plays deal 1
    b, view_b = new_game(client, seat=3)  # b plays deal 0, whose record is on file
    assert client.get("/api/records/0").status_code == 409
    client.delete(f"/api/games/{b}")  # b is gone: nobody plays deal 0
    assert client.get("/api/records/0").status_code == 200


# --------------------------------------------------------------------------- who may post
@pytest.mark.parametrize(
    ("headers", "status", "match"),
    [
        ({"origin": "http://evil.example", "content-type": "text/plain"}, 403, "another origin"),
        ({"origin": "http://evil.example", "content-type": "application/json"}, 403, "origin"),
        ({"origin": "null", "content-type": "application/json"}, 403, "another origin"),
        ({"origin": "https://testserver", "content-type": "application/json"}, 403, "origin"),
        ({"origin": "http://testserver:8080", "content-type": "application/json"}, 403, "origin"),
        ({"sec-fetch-site": "cross-site", "content-type": "application/json"}, 403, "another site"),
        ({"sec-fetch-site": "same-site", "content-type": "application/json"}, 403, "another site"),
        ({"content-type": "text/plain"}, 415, "application/json"),
        ({"content-type": "application/x-www-form-urlencoded"}, 415, "application/json"),
        ({"content-type": "multipart/form-data; boundary=x"}, 415, "application/json"),
        ({}, 415, "application/json"),
    ],
)
def test_foreign_and_non_json_posts_create_nothing(
    tmp_path: Path, headers: dict[str, str], status: int, match: str
) -> None:
    client = make_client(tmp_path)
    r = client.post("/api/games", content=b"{}", headers=headers)
    assert r.status_code == status and match in r.json()["error"]
    assert len(games(client)) == 0


def test_foreign_pages_cannot_move_or_end_a_game(tmp_path: Path) -> None:
    client = make_client(tmp_path)
    gid, view = new_game(client)
    evil = {"origin": "http://evil.example", "content-type": "application/json"}
    move = {"action": view["legal"][0], "at": view["n_actions"]}
    assert client.post(f"/api/games/{gid}/act", json=move, headers=evil).status_code == 403
    assert client.post(f"/api/games/{gid}/next", headers=evil).status_code == 403
    assert (
        client.delete(f"/api/games/{gid}", headers={"origin": "http://evil.example"}).status_code
        == 403
    )
    assert (
        client.post(
            f"/api/games/{gid}/act",
            content=b'{"action": 1}',
            headers={"content-type": "text/plain"},
        ).status_code
        == 415
    )
    assert client.get(f"/api/games/{gid}").json()["view"] == view  # nothing changed
    own = {"origin": "http://testserver", "sec-fetch-site": "same-origin"}
    assert client.post(f"/api/games/{gid}/act", json=move, headers=own).status_code == 200
    assert (
        client.post(
            "/api/games",
            json={},
            headers={**own, "content-type": "application/json; charset=utf-8"},
        ).status_code
        == 201
    )


def test_the_servers_own_loopback_origins_are_accepted_on_its_port(tmp_path: Path) -> None:
    config = ServerConfig(records_path=str(tmp_path / "games.jsonl"), agents=AGENTS)
    with BackgroundServer(config) as srv:
        port = int(srv.url.rstrip("/").rsplit(":", 1)[1])
        with httpx.Client(base_url=srv.url, timeout=10) as http:
            for origin in (
                f"http://127.0.0.1:{port}",
                f"http://localhost:{port}",
                f"http://[::1]:{port}",
            ):
                r = http.post("/api/games", json={}, headers={"origin": origin})
                assert r.status_code == 201, (origin, r.text)
            for origin in (
                f"http://127.0.0.1:{port + 1}",
                f"https://127.0.0.1:{port}",
                "http://127.0.0.1",
                f"http://evil.example:{port}",
            ):
                r = http.post("/api/games", json={}, headers={"origin": origin})
                assert r.status_code == 403, origin
            r = http.post("/api/games", content=b"{}", headers={"content-type": "text/plain"})
            assert r.status_code == 415
        assert len(srv.app.state.store) == 3


# --------------------------------------------------------------------------- odd bodies
HUGE = "1" + "0" * 5000  # past Python's 4,300-digit limit on int()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/games", '{"seat": ' + HUGE + "}"),
        ("/api/games", '{"opponents": [' + HUGE + ", 1]}"),
        ("/api/replay", '{"record": {"dealer": ' + HUGE + "}}"),
        ("/api/replay", "[" + HUGE + "]"),
        ("ACT", '{"action": ' + HUGE + ', "at": 0}'),
        ("ACT", '{"action": 1, "at": -' + HUGE + "}"),
    ],
)
def test_huge_integers_anywhere_are_a_400_naming_the_digits(
    tmp_path: Path, path: str, body: str
) -> None:
    client = make_client(tmp_path)
    gid, view = new_game(client)
    path = f"/api/games/{gid}/act" if path == "ACT" else path
    r = client.post(path, content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert "digits" in r.json()["error"]
    assert len(games(client)) == 1 and client.get(f"/api/games/{gid}").json()["view"] == view


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("[]", "got list"),
        ("5", "got int"),
        ("null", "got NoneType"),
        ('"x"', "got str"),
        ('{"record": 5}', "got int"),
        ('{"record": null}', "got NoneType"),
        ('{"record": []}', "got list"),
        ("{}", "(empty)"),
        ('{"record": {}}', "(empty)"),
        ('{"record": {"format_version": 1}}', "missing"),
    ],
)
def test_a_replay_of_something_that_is_not_a_record_is_a_400(
    tmp_path: Path, body: str, match: str
) -> None:
    client = make_client(tmp_path)
    r = client.post(
        "/api/replay", content=body.encode(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert "record" in r.json()["error"] and match in r.json()["error"]
