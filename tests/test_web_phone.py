"""The web table's layout at desktop (1280x800) and phone (390x844) sizes, in headless
Chromium (Debian's ``chromium`` and ``chromium-driver``, ``.ci/install_browser.sh``).

At every stage of a hand (choosing trump, doubling, play, the hand-over dialog) the page is
no wider than the viewport, every visible button lies inside the viewport (scrolled to, not
covered by anything) and the dialog fits; a full-page screenshot, saved under pytest's
``tmp_path``, is no wider than the viewport either. In the replay viewer the trick's cards
do not overlap the seats, and the keys work at both ends (Home/End/←/→ after End and after
Home, however the end was reached).

``BUTIFARRA_LAYOUT_SHOTS=DIR`` also copies the screenshots to DIR (to look at them).
"""

from __future__ import annotations

import base64
import os
import shutil
import struct
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
    animations_done,
    new_browser,
    table_attr,
    wait,
)

# isort: split
from agents.registry import make_agent  # noqa: E402
from butifarra.web.app import ServerConfig  # noqa: E402
from butifarra.web.serve import BackgroundServer  # noqa: E402
from butifarra.web.tables import Table, deal_for, parse_setup  # noqa: E402
from butifarra_env import butifarra_v0  # noqa: E402
from butifarra_env.core.actions import PASS, TRUMP_BASE  # noqa: E402
from butifarra_env.core.cards import sort_key  # noqa: E402
from butifarra_env.records import append_records  # noqa: E402

pytestmark = pytest.mark.browser

AGENTS = ["rule", "random"]
SETUP = {"mode": "duplicate", "partner": "rule", "opponents": ["random", "random"], "bot": "rule"}
SIZES = {"desktop": (1280, 800, False), "phone": (390, 844, True)}
COPY_TO = os.environ.get("BUTIFARRA_LAYOUT_SHOTS")


def scripted_choice(view: dict[str, Any]) -> int:
    """What the test clicks: trump oros, pass when asked to double, the first legal card."""
    legal = view["legal"]
    if view["phase"] == "doubling":
        return PASS
    if TRUMP_BASE in legal:
        return TRUMP_BASE
    return min(legal, key=sort_key)


def find_seed() -> tuple[int, int]:
    """A fixed seed (and the person's seat: the first dealer) whose first deal asks the
    person to choose trump and then whether to double, played first on the server's tables."""
    for seed in range(300):
        seat = deal_for(seed, 0)[0]
        table = Table(parse_setup({**SETUP, "seat": seat}, AGENTS, seed), make_agent)
        phases = set()
        for _ in range(60):
            if table.hand.game.is_over:
                break
            view = table.view()
            phases.add(view["phase"])
            table.act(scripted_choice(view), view["n_actions"])
        if {"choose_trump", "doubling"} <= phases:
            return seed, seat
    raise AssertionError("no seed in 0-299 asks the person to choose trump and to double")


# --------------------------------------------------------------------------- browser
class Browser:
    """A driver and the size it emulates."""

    def __init__(self, size: str) -> None:
        self.size = size
        self.width, self.height, mobile = SIZES[size]
        self.driver = new_browser(self.width, self.height, emulate=mobile, hide_scrollbars=True)


@pytest.fixture(params=list(SIZES))
def browser(request: pytest.FixtureRequest) -> Iterator[Browser]:
    b = Browser(request.param)
    try:
        yield b
    finally:
        b.driver.quit()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[BackgroundServer, int, int]]:
    seed, seat = find_seed()
    config = ServerConfig(records_path=str(tmp_path / "games.jsonl"), seed=seed, agents=AGENTS)
    with BackgroundServer(config) as srv:
        yield srv, seed, seat


def wait_idle(driver: WebDriver) -> None:
    wait(
        driver,
        lambda d: d.find_element(By.ID, "game").is_displayed() and table_attr(d, "busy") == "0",
        "the page did not settle",
    )
    wait(driver, animations_done, "the page kept animating")


# --------------------------------------------------------------------------- layout checks
LAYOUT = """
const vw = arguments[1], vh = arguments[2];
const out = {vw, vh, innerWidth: window.innerWidth, problems: [],
             scrollWidth: document.documentElement.scrollWidth,
             bodyWidth: document.body.scrollWidth};
const shown = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
for (const b of document.querySelectorAll(arguments[0])) {
  if (!shown(b)) continue;
  b.scrollIntoView({block: 'center', inline: 'center'});
  const r = b.getBoundingClientRect();
  const label = (b.id || b.dataset.action || b.dataset.card || b.dataset.step || b.textContent)
    .toString().trim().slice(0, 30);
  if (r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5) {
    out.problems.push(`${label}: box ${Math.round(r.left)},${Math.round(r.top)}-` +
                      `${Math.round(r.right)},${Math.round(r.bottom)} outside ${vw}x${vh}`);
    continue;
  }
  const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
  if (!hit || !(hit === b || b.contains(hit))) {
    const what = hit ? hit.tagName + '.' + hit.className : 'nothing';
    out.problems.push(`${label}: covered by ${what}`);
  }
}
window.scrollTo(0, 0);
return out;
"""


def check_layout(b: Browser, buttons: str = "button") -> dict[str, Any]:
    """No horizontal overflow; every visible button (``buttons``) inside the viewport once
    scrolled to, and the topmost element at its centre. (A phone zooms out to show a page
    that is too wide, which makes ``innerWidth`` grow: it is checked against the size.)"""
    out = b.driver.execute_script(LAYOUT, buttons, b.width, b.height)
    assert out["innerWidth"] == b.width, out  # not zoomed out to fit a wider page
    assert out["scrollWidth"] <= b.width and out["bodyWidth"] <= b.width, out
    assert not out["problems"], out["problems"]
    return out


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def full_page_shot(driver: WebDriver, path: Path) -> tuple[int, int]:
    """A screenshot of the whole page (beyond the viewport, both ways), saved at ``path``:
    its width is the page's width."""
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    content = metrics.get("cssContentSize") or metrics["contentSize"]
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {
                "x": 0,
                "y": 0,
                "width": content["width"],
                "height": content["height"],
                "scale": 1,
            },
        },
    )
    data = base64.b64decode(shot["data"])
    path.write_bytes(data)
    if COPY_TO:
        Path(COPY_TO).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(COPY_TO) / path.name)
    return png_size(data)


def check_shot(b: Browser, tmp_path: Path, name: str) -> None:
    shot_w, shot_h = full_page_shot(b.driver, tmp_path / f"{b.size}-{name}.png")
    assert shot_w <= b.width, f"{name}: the page is {shot_w} px wide in a {b.width} px viewport"
    assert shot_h >= b.height // 2


def boxes_overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["left"] < b["right"] - 1
        and b["left"] < a["right"] - 1
        and a["top"] < b["bottom"] - 1
        and b["top"] < a["bottom"] - 1
    )


def trick_cards_clear_of_seats(driver: WebDriver, root: str) -> None:
    """No card in the trick overlaps a seat's name plate or cards."""
    boxes = driver.execute_script(
        "const box = e => { const r = e.getBoundingClientRect();"
        " return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };"
        "const root = document.querySelector(arguments[0]);"
        "return {cards: Array.from(root.querySelectorAll('.bt-trick .bt-card')).map(box),"
        " seats: Array.from(root.querySelectorAll('.bt-seat > .bt-plate, .bt-seat .bt-card'))"
        ".map(box)};",
        root,
    )
    assert boxes["cards"], "no card on the table"
    for card in boxes["cards"]:
        for seat in boxes["seats"]:
            assert not boxes_overlap(card, seat), (card, seat)


# --------------------------------------------------------------------------- the play page
def start_game(
    b: Browser, srv: BackgroundServer, seat: int, variants: tuple[str, ...] = ()
) -> None:
    """Fill in the setup form (the checkboxes named in ``variants`` ticked) and deal."""
    driver = b.driver
    driver.get(srv.url + "?pause=0")
    wait(driver, lambda d: d.find_element(By.ID, "setup").is_displayed(), "no setup form")
    check_layout(b)
    driver.find_element(By.CSS_SELECTOR, 'input[name="mode"][value="duplicate"]').click()
    Select(driver.find_element(By.NAME, "seat")).select_by_value(str(seat))
    Select(driver.find_element(By.NAME, "partner")).select_by_value(SETUP["partner"])
    Select(driver.find_element(By.NAME, "right")).select_by_value(SETUP["opponents"][0])
    Select(driver.find_element(By.NAME, "left")).select_by_value(SETUP["opponents"][1])
    Select(driver.find_element(By.NAME, "bot")).select_by_value(SETUP["bot"])
    for name in variants:
        box = driver.find_element(By.NAME, name)
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
        box.click()
    if variants:
        check_layout(b)  # the rules ticked: the form still fits
    start = driver.find_element(By.ID, "start")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", start)
    start.click()
    wait_idle(driver)


def test_every_stage_of_a_hand_fits_the_screen(
    browser: Browser, server: tuple[BackgroundServer, int, int], tmp_path: Path
) -> None:
    srv, _, seat = server
    b, driver = browser, browser.driver
    start_game(b, srv, seat)
    seen: set[str] = set()
    for _ in range(80):  # bounded: the person has at most ~16 decisions
        wait_idle(driver)
        if table_attr(driver, "over") == "1":
            break
        table = srv.app.state.store.games[
            driver.execute_script("return window.localStorage.getItem('butifarra.game')")
        ]
        view = table.view()
        phase = view["phase"]
        if phase not in seen:  # the first time at each stage: the whole page is checked
            seen.add(phase)
            check_layout(b)
            check_shot(b, tmp_path, f"{phase}")
            if phase == "doubling":
                pass_button = driver.find_element(By.CSS_SELECTOR, f'#bids [data-action="{PASS}"]')
                assert pass_button.is_displayed() and "Pass" in pass_button.text
            if phase == "play" and any(c is not None for c in view["trick"]):
                trick_cards_clear_of_seats(driver, "#table")
        action = scripted_choice(view)
        if phase == "play":
            target = driver.find_element(By.CSS_SELECTOR, f'#hand button[data-card="{action}"]')
        else:
            target = driver.find_element(By.CSS_SELECTOR, f'#bids button[data-action="{action}"]')
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", target)
        target.click()
    assert {"choose_trump", "doubling", "play"} <= seen
    wait_idle(driver)
    result = driver.find_element(By.ID, "result")
    assert result.is_displayed() and driver.find_element(By.ID, "next-hand").is_displayed()
    check_layout(b)
    box = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return {top: r.top + window.scrollY, left: r.left, right: r.right, height: r.height,"
        " vh: window.innerHeight, vw: window.innerWidth};",
        result,
    )
    assert box["top"] >= 0 and box["left"] >= 0 and box["right"] <= box["vw"], box
    assert box["height"] <= box["vh"], box  # the whole dialog fits on the screen at once
    check_shot(b, tmp_path, "hand-over")
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_the_rules_fit_in_the_contract_panel(
    browser: Browser, server: tuple[BackgroundServer, int, int], tmp_path: Path
) -> None:
    """Obligada and linear doubling chosen on the form: the contract panel says so, and the
    page (the longer contract text included) still fits the screen."""
    srv, _, seat = server
    b, driver = browser, browser.driver
    start_game(b, srv, seat, variants=("obligada", "linear_doubling"))
    contract = driver.find_element(By.ID, "contract")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", contract)
    assert "obligada, linear doubling" in contract.text
    check_layout(b)
    check_shot(b, tmp_path, "rules")
    box = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return {l: r.left, r: r.right};", contract
    )
    assert box["l"] >= 0 and box["r"] <= b.width, box


# --------------------------------------------------------------------------- the replay viewer
def a_record(seed: int) -> dict[str, Any]:
    env = butifarra_v0.raw_env()
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while not all(env.terminations.values()):
        legal = env.legal_actions()
        env.step(legal[rng.integers(len(legal))])
    record = env.game_record()
    record.update(players=["ppo", "rule", "random", "rule"], source="arena")
    return record


def test_the_replay_viewer_fits_and_its_keys_work_at_both_ends(
    browser: Browser, tmp_path: Path
) -> None:
    b, driver = browser, browser.driver
    records = tmp_path / "games.jsonl"
    append_records(records, [a_record(31)])
    config = ServerConfig(records_path=str(records), agents=AGENTS)
    with BackgroundServer(config) as srv:
        driver.get(srv.url + "replay#record=0")
        viewer = wait(
            driver,
            lambda d: d.find_element(By.CSS_SELECTOR, "#viewer[data-step]"),
            "the record did not open",
        )
        n = int(
            driver.execute_script(
                "return arguments[0].querySelector('input[type=range]').max", viewer
            )
        )

        def at(step: int) -> None:
            wait(driver, lambda d: viewer.get_attribute("data-step") == str(step), f"not at {step}")

        def keys(*sequence: str) -> None:  # typed where the focus is, as a person would
            for key in sequence:
                driver.switch_to.active_element.send_keys(key)

        def click(name: str) -> None:
            button = viewer.find_element(By.CSS_SELECTOR, f'button[data-step="{name}"]')
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
            button.click()

        at(0)
        check_layout(b)
        for _ in range(7):  # into the first trick: a card on the table, maybe east's
            click("next")
        at(7)
        wait(driver, animations_done, "the page kept animating")
        trick_cards_clear_of_seats(driver, "#viewer")
        check_layout(b)
        check_shot(b, tmp_path, "replay")
        # the end, by the button: the focus stays in the viewer, the keys keep working
        click("last")
        at(n)
        keys(Keys.HOME)
        at(0)
        keys(Keys.END)
        at(n)
        keys(Keys.ARROW_LEFT)
        at(n - 1)
        keys(Keys.ARROW_RIGHT)
        at(n)
        keys(Keys.ARROW_RIGHT)  # past the end: stays
        at(n)
        # the start, by the button
        click("first")
        at(0)
        keys(Keys.END)
        at(n)
        keys(Keys.HOME, Keys.ARROW_LEFT)
        at(0)
        keys(Keys.ARROW_RIGHT)
        at(1)
        click("prev")  # back to the start by one step: the button is disabled there
        at(0)
        keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
        at(2)
        for _ in range(n - 2):
            keys(Keys.ARROW_RIGHT)
        at(n)
        click("prev")
        click("next")  # the last step by one: the next button is disabled there
        at(n)
        keys(Keys.ARROW_LEFT)
        at(n - 1)
        wait(driver, animations_done, "the page kept animating")
        check_layout(b)
        assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
