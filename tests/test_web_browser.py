"""The web table in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed by ``.ci/install_browser.sh``) driven by Selenium against the
server on a free loopback port.

A whole hand is played by clicking (trump, doubling, every card of the person's), an illegal
card cannot be played, a reload mid-hand continues the same game, the records land on disk;
two browsers do not see each other's cards; the replay viewer steps through a record, on the
server's page and as the self-contained Jupyter HTML.

``BUTIFARRA_SCREENSHOTS=docs/images python -m pytest tests/test_web_browser.py`` also writes
the screenshots the docs show (web_play.png, web_replay.png).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.browser import (  # first: it skips this module without Chromium
    By,
    Keys,
    Select,
    WebDriver,
    WebElement,
    animations_done,
    new_browser,
    table_attr,
    wait,
)

# isort: split
from agents.registry import make_agent  # noqa: E402
from butifarra.web.app import ServerConfig  # noqa: E402
from butifarra.web.replay import ReplayView, replay_data  # noqa: E402
from butifarra.web.serve import BackgroundServer  # noqa: E402
from butifarra.web.tables import Table, deal_for, parse_setup  # noqa: E402
from butifarra_env import butifarra_v0  # noqa: E402
from butifarra_env.core.actions import DOUBLE, PASS, TRUMP_BASE  # noqa: E402
from butifarra_env.core.cards import cards_of, sort_key  # noqa: E402
from butifarra_env.core.options import Options  # noqa: E402
from butifarra_env.records import append_records, load_records  # noqa: E402

AGENTS = ["rule", "random"]
SHOTS = os.environ.get("BUTIFARRA_SCREENSHOTS")
WINDOW = (1440, 1000)
SETUP = {"mode": "duplicate", "partner": "rule", "opponents": ["random", "random"], "bot": "rule"}


def scripted_choice(view: dict[str, Any], doubled: bool) -> int:
    """What the test clicks: trump oros, double once then pass, the first legal card."""
    legal = view["legal"]
    if view["phase"] == "doubling":
        return PASS if doubled else DOUBLE
    if TRUMP_BASE in legal:
        return TRUMP_BASE
    return min(legal, key=sort_key)


def find_seed() -> tuple[int, int]:
    """A seed (and the dealer's seat, the person's) whose first deal asks the person to choose
    trump and then to double, and holds a turn with an illegal card: the test's script,
    played in Python first on the same tables the server runs."""
    for seed in range(200):
        seat = deal_for(seed, 0)[0]
        table = Table(parse_setup({**SETUP, "seat": seat}, AGENTS, seed), make_agent)
        doubled, asked, restricted = False, False, False
        while not table.hand.game.is_over:
            view = table.view()
            asked |= view["phase"] == "doubling"
            restricted |= view["phase"] == "play" and len(view["legal"]) < len(view["hand"])
            action = scripted_choice(view, doubled)
            doubled |= action == DOUBLE
            table.act(action, view["n_actions"])
        if asked and restricted:
            return seed, seat
    raise AssertionError("no seed in 0-199 fits the scripted hand")


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def seeded() -> tuple[int, int]:
    return find_seed()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, seeded) -> Iterator[BackgroundServer]:
    records = tmp_path_factory.mktemp("web") / "games.jsonl"
    config = ServerConfig(records_path=str(records), seed=seeded[0], agents=AGENTS)
    with BackgroundServer(config) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    driver = new_browser(*WINDOW)
    try:
        yield driver
    finally:
        driver.quit()


def wait_idle(driver: WebDriver) -> None:
    """Until the page has shown every move and waits for the person (or the hand is over)."""
    wait(
        driver,
        lambda d: d.find_element(By.ID, "game").is_displayed() and table_attr(d, "busy") == "0",
        "the page did not settle",
    )


def n_records(server: BackgroundServer) -> int:
    path = Path(server.app.state.records.path)
    return len(load_records(path)) if path.exists() else 0


def cards_in(driver: WebDriver, selector: str, root: WebElement | None = None) -> list[int]:
    """The card ids of the elements ``selector`` finds, in page order (one browser call)."""
    return driver.execute_script(
        "return Array.from((arguments[1] || document).querySelectorAll(arguments[0]))"
        ".map(e => Number(e.dataset.card))",
        selector,
        root,
    )


def hand_cards(driver: WebDriver, which: str = "") -> list[int]:
    return cards_in(driver, f"#hand button.bt-card{which}")


def game_id(driver: WebDriver) -> str:
    return driver.execute_script("return window.localStorage.getItem('butifarra.game')")


def server_table(server: BackgroundServer, gid: str) -> Table:
    return server.app.state.store.games[gid]


def choose_variants(driver: WebDriver, variants: dict[str, Any]) -> None:
    """Set the setup form's rules: each checkbox on or off, the butifarra cap ("" = none)."""
    for name in ("obligada", "linear_doubling"):
        box = driver.find_element(By.NAME, name)
        if box.is_selected() != bool(variants.get(name, False)):
            box.click()
    cap = variants.get("butifarra_max_doubling_level")
    Select(driver.find_element(By.NAME, "butifarra_max_doubling_level")).select_by_value(
        "" if cap is None else str(cap)
    )


def start_game(
    driver: WebDriver,
    server: BackgroundServer,
    seat: int,
    setup=SETUP,
    variants: dict[str, Any] | None = None,
) -> str:
    driver.get(server.url + "?pause=0")
    shown = wait(
        driver,
        lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, "#setup,#game") if e.is_displayed()],
        "neither the setup form nor a game",
    )
    if shown[0].get_attribute("id") == "game":  # this browser has a game: start another
        driver.find_element(By.ID, "new-game").click()
    wait(driver, lambda d: d.find_element(By.ID, "setup").is_displayed(), "no setup form")
    driver.find_element(By.CSS_SELECTOR, f'input[name="mode"][value="{setup["mode"]}"]').click()
    Select(driver.find_element(By.NAME, "seat")).select_by_value(str(seat))
    Select(driver.find_element(By.NAME, "partner")).select_by_value(setup["partner"])
    Select(driver.find_element(By.NAME, "right")).select_by_value(setup["opponents"][0])
    Select(driver.find_element(By.NAME, "left")).select_by_value(setup["opponents"][1])
    Select(driver.find_element(By.NAME, "bot")).select_by_value(setup["bot"])
    choose_variants(driver, variants or {})
    driver.find_element(By.ID, "start").click()
    wait_idle(driver)
    return game_id(driver)


def settle_tasks(driver: WebDriver) -> None:
    """Return once the page has run every task queued so far: two animation frames, then a
    task after them (whatever a click scheduled has run by then)."""
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 0)));"
    )


def shot(driver: WebDriver, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.execute_script("window.scrollTo(0, 0)")
        wait(driver, animations_done, "the page kept animating")
        driver.save_screenshot(str(Path(SHOTS) / name))


# --------------------------------------------------------------------------- play
def test_a_whole_hand_by_clicking_with_a_reload_in_the_middle(
    browser: WebDriver, server: BackgroundServer, seeded: tuple[int, int]
) -> None:
    seed, seat = seeded
    records_before = n_records(server)
    gid = start_game(browser, server, seat)
    table = server_table(server, gid)
    game = table.hand.game
    doubled = refused = reloaded = False
    clicked: list[int] = []
    for _ in range(100):  # bounded: the person has at most ~16 decisions
        wait_idle(browser)
        if table_attr(browser, "over") == "1":
            break
        view = table.view()
        assert int(table_attr(browser, "n-actions")) == len(game.actions)
        assert hand_cards(browser) == view["hand"]  # the page shows the server's hand
        bids = browser.find_elements(By.CSS_SELECTOR, "#bids button")
        action = scripted_choice(view, doubled)
        if view["phase"] != "play":
            assert sorted(int(b.get_attribute("data-action")) for b in bids) == view["legal"]
            browser.find_element(By.CSS_SELECTOR, f'#bids button[data-action="{action}"]').click()
            doubled |= action == DOUBLE
            clicked.append(action)
            continue
        assert not bids
        assert hand_cards(browser, ":not([disabled])") == sorted(view["legal"], key=sort_key)
        illegal = browser.find_elements(By.CSS_SELECTOR, "#hand button.bt-card[disabled]")
        if illegal and not refused:  # an illegal card does nothing, however it is clicked
            browser.execute_script(  # count the page's requests from here on
                "window.__sent = 0; const f = window.fetch; window.__fetch = f;"
                "window.fetch = function () { window.__sent++; return f.apply(this, arguments); };"
            )
            browser.execute_script("arguments[0].click()", illegal[0])
            illegal[0].click()
            settle_tasks(browser)  # a handler the clicks ran (or queued) has run by now
            assert browser.execute_script("return window.__sent") == 0  # nothing was sent
            browser.execute_script("window.fetch = window.__fetch")
            assert table_attr(browser, "busy") == "0"
            assert int(table_attr(browser, "n-actions")) == len(game.actions) == view["n_actions"]
            refused = True
        if sum(a < 48 for a in clicked) == 4 and not reloaded:
            shot(browser, "web_play.png")
            browser.refresh()
            wait_idle(browser)
            assert game_id(browser) == gid
            assert hand_cards(browser) == view["hand"]  # the same game, where it was
            reloaded = True
        if sum(a < 48 for a in clicked) == 1:  # the keyboard works too: Enter on the card
            focused = browser.switch_to.active_element
            assert focused.get_attribute("data-card") == str(action)
            focused.send_keys(Keys.ENTER)
        else:
            browser.find_element(By.CSS_SELECTOR, f'#hand button[data-card="{action}"]').click()
        clicked.append(action)
    assert game.is_over and doubled and refused and reloaded
    result = browser.find_element(By.ID, "result")
    assert result.is_displayed() and "you − bot" in result.text
    assert browser.find_element(By.ID, "next-hand").is_displayed()
    mine = [a for s, a in game.actions if s == seat]
    assert mine == clicked and TRUMP_BASE in mine and DOUBLE in mine
    records = load_records(server.app.state.records.path)[records_before:]
    human, bot = records
    assert human["actions"] == [[s, a] for s, a in game.actions]
    assert sum(a < 48 for _, a in human["actions"]) == 48
    assert human["players"][seat] == "human" and bot["players"][seat] == "rule"
    assert bot["hands"] == human["hands"] and human["seed"] == seed
    delta = table.view()["duplicate"]["last"]["delta"]
    assert delta == human["result"]["rewards"][seat] - bot["result"]["rewards"][seat]
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    if SHOTS:
        docs_play_screenshot(browser, server, gid)


def docs_play_screenshot(browser: WebDriver, server: BackgroundServer, gid: str) -> None:
    """For the docs: a few more deals through the API, then the page mid-trick."""
    table = server_table(server, gid)
    for _ in range(5):
        table.next_hand()
        while not table.hand.game.is_over:
            view = table.view()
            table.act(scripted_choice(view, True), view["n_actions"])
    table.next_hand()
    for _ in range(40):
        view = table.view()
        if view["phase"] == "play" and len(view["hand"]) == 9 and any(view["trick"]):
            break
        table.act(scripted_choice(view, True), view["n_actions"])
    browser.refresh()
    wait_idle(browser)
    browser.execute_script("document.activeElement.blur()")
    shot(browser, "web_play.png")


def test_two_browsers_do_not_see_each_other(
    browser: WebDriver, server: BackgroundServer, seeded: tuple[int, int]
) -> None:
    seed, seat = seeded
    a = start_game(browser, server, seat)
    other = new_browser(*WINDOW)
    try:
        b = start_game(other, server, (seat + 1) % 4)
        assert a != b and len(b) >= 32
        table_a, table_b = server_table(server, a), server_table(server, b)
        cards_a = set(cards_of(table_a.hand.game.initial_hands[seat]))
        shown_b = set(hand_cards(other))
        assert shown_b == set(cards_of(table_b.hand.game.hands[(seat + 1) % 4]))
        assert not shown_b & cards_a  # the same deal, another seat: no card of a's hand
        browser.refresh()
        wait_idle(browser)
        assert game_id(browser) == a
        assert hand_cards(browser) == table_a.view()["hand"]
        page_b = other.page_source
        assert a not in page_b and a not in other.execute_script(
            "return JSON.stringify(window.localStorage)"
        )
    finally:
        other.quit()


def test_variants_chosen_on_the_page_are_shown_in_the_contract_panel(
    browser: WebDriver, server: BackgroundServer, seeded: tuple[int, int]
) -> None:
    """Obligada and linear doubling (and no Sant Vicenç in butifarra) ticked on the form:
    the server's table plays them, the contract panel names them, the multiplier follows
    them, and the next setup form remembers them."""
    _, seat = seeded
    chosen: dict[str, Any] = {
        "obligada": True,
        "linear_doubling": True,
        "butifarra_max_doubling_level": 2,
    }
    gid = start_game(browser, server, seat, variants=chosen)
    table = server_table(server, gid)
    assert table.options == Options(**chosen) == table.hand.game.options
    contract = browser.find_element(By.ID, "contract")
    wait(browser, lambda d: "Rules" in contract.text, "no rules in the contract panel")
    assert "obligada, linear doubling, butifarra: no Sant Vicenç" in contract.text
    for _ in range(40):  # the person's bids until the contract has a multiplier
        wait_idle(browser)
        view = table.view()
        if view["trump"] is not None or view["over"]:
            break
        if view["phase"] == "doubling":  # the raise is priced by the linear chain
            raise_button = browser.find_element(By.CSS_SELECTOR, f'#bids [data-action="{DOUBLE}"]')
            assert f"(x{view['next_multiplier']})" in raise_button.text
        action = scripted_choice(view, True)
        browser.find_element(By.CSS_SELECTOR, f'#bids button[data-action="{action}"]').click()
    wait_idle(browser)
    view = table.view()
    assert f"Multiplier\n{view['multiplier_text']}" in contract.text
    browser.find_element(By.ID, "new-game").click()  # the form keeps the rules chosen
    assert browser.find_element(By.NAME, "obligada").is_selected()
    assert browser.find_element(By.NAME, "linear_doubling").is_selected()
    cap = browser.find_element(By.NAME, "butifarra_max_doubling_level")
    assert Select(cap).first_selected_option.get_attribute("value") == "2"
    choose_variants(browser, {})
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


# --------------------------------------------------------------------------- replay
def record_with_probs(seed: int) -> dict[str, Any]:
    """A hand from the environment whose decisions carry (uniform) probabilities."""
    env = butifarra_v0.raw_env()
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    probs = []
    while not all(env.terminations.values()):
        legal = env.legal_actions()
        probs.append({str(a): round(1 / len(legal), 6) for a in legal})
        env.step(legal[rng.integers(len(legal))])
    record = env.game_record()
    record.update(players=["ppo", "rule", "random", "rule"], probs=probs, source="arena")
    return record


def check_viewer(driver: WebDriver, viewer: WebElement, data: dict[str, Any]) -> None:
    """Step the viewer with its buttons and keys, checking what each frame shows."""
    n = len(data["frames"]) - 1

    def at(step: int) -> None:
        wait(driver, lambda d: viewer.get_attribute("data-step") == str(step), f"not at {step}")
        frame = data["frames"][step]
        hands = [f'.bt-rp-hand[data-seat="{s}"] .bt-card' for s in range(4)]
        shown = [sorted(cards_in(driver, hand, viewer)) for hand in hands]
        assert shown == [sorted(h) for h in frame["hands"]]  # all four hands
        on_table = cards_in(driver, ".bt-trick .bt-card", viewer)
        assert sorted(on_table) == sorted(c for c in frame["trick"] if c is not None)
        if step < n:
            rows = driver.execute_script(
                "return Array.from(arguments[0].querySelectorAll('.bt-probs li'))"
                ".map(li => [Number(li.dataset.action), li.querySelector('.bt-p').textContent])",
                viewer,
            )
            assert sorted(a for a, _ in rows) == frame["legal"]  # the legal moves, each shown
            if frame["probs"]:  # with its probability beside it
                assert all(text == f"{frame['probs'][str(a)]:.3f}" for a, text in rows)

    at(0)
    for step in range(1, 6):
        viewer.find_element(By.CSS_SELECTOR, 'button[data-step="next"]').click()
        at(step)
    viewer.send_keys(Keys.ARROW_RIGHT)
    at(6)
    viewer.send_keys(Keys.ARROW_LEFT)
    viewer.send_keys(Keys.ARROW_LEFT)
    at(4)
    viewer.send_keys(Keys.END)
    at(n)
    scores = data["result"]["scores"]
    assert f"Score: seats 0+2: {scores[0]}, seats 1+3: {scores[1]}" in viewer.text
    viewer.find_element(By.CSS_SELECTOR, 'button[data-step="first"]').click()
    at(0)
    assert not viewer.find_element(By.CSS_SELECTOR, 'button[data-step="prev"]').is_enabled()


def test_the_replay_page_steps_through_a_saved_record(
    browser: WebDriver, server: BackgroundServer
) -> None:
    path = server.app.state.records.path
    index = n_records(server)
    record = record_with_probs(21)
    append_records(path, [record])
    browser.get(server.url + "replay")
    entry = wait(
        browser,
        lambda d: d.find_element(By.CSS_SELECTOR, f'#list button[data-index="{index}"]'),
        "the record is not listed",
    )
    entry.click()
    viewer = browser.find_element(By.ID, "viewer")
    check_viewer(browser, viewer, replay_data(record))
    for _ in range(18):
        viewer.send_keys(Keys.ARROW_RIGHT)
    wait(browser, lambda d: viewer.get_attribute("data-step") == "18", "not at 18")
    browser.execute_script("arguments[0].blur()", viewer)
    shot(browser, "web_replay.png")


def test_the_notebook_view_works_without_a_server(browser: WebDriver, tmp_path: Path) -> None:
    record = record_with_probs(22)
    page = ReplayView(record).save(tmp_path / "replay.html")
    browser.get(page.as_uri())
    viewer = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".bt-replay[data-step]"), "")
    check_viewer(browser, viewer, replay_data(record))
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
