"""The evaluation protocol: fixed deals in the arena, result cards, ``butifarra eval``, the
leaderboard script. Small deal counts and the cheap panel members (random, rule) only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import butifarra_env
from agents import RandomAgent, RuleBasedAgent
from agents.base import Agent
from agents.evaluation import protocol as evaluation
from agents.evaluation.arena import CHUNK_DEALS, HAND_FIELDS, DuelResult, duel
from agents.evaluation.deal_sets import DEAL_SETS, Deal, load_deal_set
from agents.evaluation.protocol import (
    PROTOCOL_VERSION,
    SITUATIONS,
    ResultCard,
    evaluate,
    load_card,
    opponent_figures,
)
from agents.registry import AGENT_FACTORIES
from butifarra import leaderboard
from butifarra.cli import main
from butifarra_env.core.observation import field
from butifarra_env.core.rules import PHASE_NAMES
from butifarra_env.records import load_records

CHEAP = ["random", "rule"]
PLAY = PHASE_NAMES.index("play")
WHERE = r"deal \d+ \(agent A's team at seats [0-3] and [0-3]\), hand 0, move \d+"


@pytest.fixture(scope="module")
def dev() -> list[Deal]:
    return load_deal_set("dev")


def small_eval(agent: object = "rule", **kw: object) -> ResultCard:
    args: dict = {"deal_set": "dev", "n_deals": 8, "workers": 1, "progress": False}
    args["panel"] = CHEAP
    args.update(kw)
    return evaluate(agent, **args)


# --------------------------------------------------------------------------- fixed deals
def test_duel_plays_the_fixed_deals_in_order(dev: list[Deal], tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    res = duel(RuleBasedAgent(), RandomAgent(), 5, seed=2, deals=dev[10:], records_path=path)
    assert res.hands["dealer"].tolist() == [d for d, _ in dev[10:15] for _ in (0, 1)]
    for record in load_records(path):
        dealer, hands = dev[10 + record["deal"]]
        assert record["dealer"] == dealer
        assert [sum(1 << c for c in h) for h in record["hands"]] == hands


def test_duel_refuses_bad_fixed_deals(dev: list[Deal]) -> None:
    with pytest.raises(ValueError, match=r"n_deals must be at most len\(deals\) = 3, got 4"):
        duel("rule", "random", 4, deals=dev[:3])
    dealer, hands = dev[0]
    with pytest.raises(ValueError, match=r"deals\[1\]: hands: the four hands must hold each"):
        duel("rule", "random", 2, deals=[dev[0], (dealer, [hands[0]] * 4)])
    with pytest.raises(ValueError, match=r"deals\[0\]: dealer must be an int 0-3, got 4"):
        duel("rule", "random", 1, deals=[(4, hands)])
    with pytest.raises(ValueError, match=r"deals\[0\] must be \(dealer, four hand bitmasks\)"):
        duel("rule", "random", 1, deals=[dealer])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="deals or n_matches, not both"):
        duel("rule", "random", 1, n_matches=1, deals=dev)
    with pytest.raises(ValueError, match="deals must be a list"):
        duel("rule", "random", 1, deals="dev")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the card
def test_card_names_what_was_played_and_matches_the_duels(dev: list[Deal]) -> None:
    card = small_eval("rule", seed=3)
    d = json.loads(card.to_json())
    assert d["protocol_version"] == PROTOCOL_VERSION == 1
    assert d["package_version"] == butifarra_env.__version__
    assert d["deal_set"] == "dev_v1" and d["deal_set_sha256"] == DEAL_SETS["dev"].sha256
    assert (d["agent"], d["n_deals"], d["seed"]) == ("rule", 8, 3)
    assert d["panel"] == {"random": "random", "rule": "rule"}
    assert d["errors"] == {} and list(d["results"]) == CHEAP and not card.failed
    # timed: the agent's decisions in 4 deals x 2 seatings, the first 5 left out: its team's
    # 24 cards a hand, plus its bids (a trump choice, a delegation, doubling answers)
    timing = d["timing"]
    assert 8 * 24 - 5 <= timing["decisions"] <= 8 * (24 + 6) - 5 and "act()" in timing["method"]
    assert timing["median_ms"] > 0 and timing["worst_ms"] > 0
    # the figures are those of a plain duel on the set's first deals (what the figures mean
    # is checked on hand-built hands below), with the member's variance-reduced estimate
    # (tests/test_variance.py)
    res = duel(
        RuleBasedAgent(),
        RandomAgent(),
        8,
        seed=3,
        deals=dev,
        variance_reduction="random",
        deals_uniform=True,
    )
    r = d["results"]["random"]
    assert r == json.loads(json.dumps(opponent_figures("random", res)))
    assert r["n_deals"] == 8 and r["points_per_hand"] == round(res.mean, 6)
    # the same deterministic agent on both sides: every deal cancels exactly
    mirror = d["results"]["rule"]
    assert mirror["points_per_hand"] == 0 and mirror["hands_won"] == mirror["hands_lost"]
    assert mirror["doubles"]["hands"] == mirror["doubled"]["hands"]
    assert ResultCard.from_dict(d).to_json() == card.to_json()
    text = card.render()
    assert "result card: rule" in text and f"butifarra-rl {butifarra_env.__version__}" in text
    assert "dev_v1" in text and "decision time: median" in text
    for s in SITUATIONS:
        assert s in text


# Seven hand-built hands, from the agent's (side A's) side. Doubling levels: 1 is the
# defenders' contrar, 2 the declarers' recontrar, 3 the defenders' Sant Vicenç.
#   hand  A's team   trump      delegated  level  A doubled?  A was doubled?  score A-B
#   0     declares   oros       no         0      no          no              +6
#   1     declares   butifarra  yes        1      no          yes             -8
#   2     declares   copas      yes        1      no          yes             0 (36-36)
#   3     declares   butifarra  no         2      yes         yes             +48
#   4     defends    espases    -          0      no          no              -10
#   5     defends    bastos     -          1      yes         no              +4
#   6     defends    butifarra  -          3      yes         yes             -64
HANDS = {
    "chooser_team": [0, 0, 0, 0, 1, 1, 1],
    "trump": [0, 4, 1, 4, 2, 3, 4],
    "delegated": [0, 1, 1, 0, 0, 0, 0],
    "doubling_level": [0, 1, 1, 2, 0, 1, 3],
    "multiplier": [1, 4, 2, 8, 1, 2, 16],
    "score_a": [6, 0, 0, 48, 0, 4, 0],
    "score_b": [0, 8, 0, 0, 10, 0, 64],
}


def test_figures_of_hand_built_hands() -> None:
    hands = {f: np.zeros(7, np.int64) for f in HAND_FIELDS}
    hands.update({k: np.array(v) for k, v in HANDS.items()})
    hands["diff_a"] = hands["score_a"] - hands["score_b"]
    res = DuelResult("a", "b", 7, 0, hands, np.zeros(7), -3.5, -9.0, 2.0)
    f = opponent_figures("b-spec", res)
    assert (f["spec"], f["n_deals"]) == ("b-spec", 7)
    assert (f["points_per_hand"], f["ci_low"], f["ci_high"]) == (-3.5, -9.0, 2.0)  # the duel's
    assert f["hands_won"] == round(3 / 7, 6) and f["hands_lost"] == round(3 / 7, 6)
    assert f["mean_multiplier"] == round(34 / 7, 6)
    assert f["declares"] == {"hands": 4, "share": round(4 / 7, 6), "points_per_hand": 11.5}
    assert f["delegates"] == {"hands": 2, "share": 0.5, "points_per_hand": -4.0}  # of 4 declared
    assert f["butifarra"] == {"hands": 2, "share": 0.5, "points_per_hand": 20.0}
    assert f["doubles"] == {"hands": 3, "share": round(3 / 7, 6), "points_per_hand": -4.0}
    assert f["doubled"] == {"hands": 4, "share": round(4 / 7, 6), "points_per_hand": -6.0}
    none = {k: np.array(v) for k, v in hands.items()}
    none["doubling_level"][:] = 0
    none["chooser_team"][:] = 1
    f = opponent_figures("b", DuelResult("a", "b", 7, 0, none, np.zeros(7), 0.0, 0.0, 0.0))
    assert f["declares"] == {"hands": 0, "share": 0.0, "points_per_hand": None}
    assert f["delegates"] == {"hands": 0, "share": 0.0, "points_per_hand": None}
    assert f["doubles"]["hands"] == f["doubled"]["hands"] == 0


def without_timing(card: ResultCard) -> dict:
    d = card.to_dict()
    d.pop("timing")
    return d


def test_results_do_not_depend_on_the_number_of_workers() -> None:
    n = CHUNK_DEALS + 8  # two chunks, so two workers really split the work
    one = small_eval("random", n_deals=n, workers=1, seed=5)
    two = small_eval("random", n_deals=n, workers=2, seed=5)
    assert json.dumps(without_timing(one)) == json.dumps(without_timing(two))
    other = small_eval("random", n_deals=n, workers=1, seed=6)
    assert without_timing(other)["results"] != without_timing(one)["results"]


def test_evaluate_checks_its_arguments_before_playing() -> None:
    with pytest.raises(ValueError, match="n_deals must be an int 1-2000, got 2001"):
        small_eval(n_deals=2001)
    with pytest.raises(ValueError, match="n_deals must be an int 1-2000, got 0"):
        small_eval(n_deals=0)
    with pytest.raises(ValueError, match="deal_set must be one of"):
        small_eval(deal_set="train")
    with pytest.raises(ValueError, match="panel: unknown member 'rules'"):
        small_eval(panel=["random", "rules"])
    with pytest.raises(ValueError, match="spec must name the agent"):
        small_eval(lambda obs, mask: int(np.flatnonzero(mask)[0]))


def test_an_outside_callable_is_evaluated_under_its_spec() -> None:
    card = small_eval(lambda obs, mask: int(np.flatnonzero(mask)[0]), spec="first-legal v1")
    assert card.agent == "first-legal v1" and list(card.results) == CHEAP


# --------------------------------------------------------------------------- failures
class BreaksInOneDuel(Agent):
    """Plays the first legal action; in its ``fail_at``-th duel (counted by the arena's
    reset, once per duel of up to 64 deals with one worker) it fails mid-hand: raises, or
    returns an illegal action."""

    def __init__(self, fail_at: int, illegal: bool = False) -> None:
        self.name = "breaks"
        self.fail_at, self.illegal, self.resets = fail_at, illegal, 0

    def reset(self, seed: int | None = None) -> None:
        self.resets += 1

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        mid_hand = field(observation, "phase")[PLAY] and field(observation, "played").sum() >= 8
        if self.resets == self.fail_at and mid_hand:
            if not self.illegal:
                raise RuntimeError("lost my cards")
            return int(np.flatnonzero(action_mask == 0)[0])
        return int(np.flatnonzero(action_mask)[0])


def test_an_agent_that_raises_costs_only_that_opponent() -> None:
    card = small_eval(BreaksInOneDuel(fail_at=1), spec="breaks")  # fails against random
    assert list(card.errors) == ["random"] and list(card.results) == ["rule"]
    message = card.errors["random"]
    assert "agent 'breaks' raised RuntimeError: lost my cards" in message
    assert re.search(WHERE + r": seat [0-3] to move in phase 'play'; legal actions: \[", message)
    assert card.failed and "vs random: FAILED: agent 'breaks' raised" in card.render()
    assert json.loads(card.to_json())["errors"] == card.errors


def test_an_illegal_action_costs_only_that_opponent() -> None:
    card = small_eval(BreaksInOneDuel(fail_at=2, illegal=True), spec="breaks")  # vs rule
    assert list(card.errors) == ["rule"] and list(card.results) == ["random"]
    assert re.search(r"agent 'breaks' chose an illegal action in " + WHERE, card.errors["rule"])


class CtrlCInSecondDuel(BreaksInOneDuel):
    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        if self.resets == 2:
            raise KeyboardInterrupt
        return super().act(observation, action_mask)


def test_ctrl_c_keeps_the_opponents_finished(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(KeyboardInterrupt) as e:  # still a KeyboardInterrupt for callers
        small_eval(CtrlCInSecondDuel(0), spec="ctrl-c")
    assert isinstance(e.value, evaluation.Interrupted)
    assert list(e.value.card.results) == ["random"]
    assert e.value.card.errors == {"rule": "not played: interrupted (Ctrl-C)"}
    monkeypatch.setitem(AGENT_FACTORIES, "ctrl-c", lambda arg, seed: CtrlCInSecondDuel(0))
    path = tmp_path / "card.json"
    status, out, err = run_cli(
        capsys, "eval", "ctrl-c", "--deal-set", "dev", "--deals", "4", "--panel", "random,rule",
        "--workers", "1", "--no-progress", "--json", str(path),
    )  # fmt: skip
    assert status == 130 and "interrupted" in err and "| random" in out
    assert list(load_card(path).results) == ["random"]


def test_a_panel_member_that_cannot_be_built_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(evaluation.PANEL, "ppo", "ppo:no/such/checkpoint.pt")
    card = small_eval(panel=["rule", "ppo"])
    assert list(card.results) == ["rule"]
    assert card.errors["ppo"].startswith("could not build the panel agent 'ppo:no/such/")


# --------------------------------------------------------------------------- the command
def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_exit_status_1_when_an_opponent_failed_and_the_card_is_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(AGENT_FACTORIES, "breaks", lambda arg, seed: BreaksInOneDuel(1))
    path = tmp_path / "card.json"
    status, out, err = run_cli(
        capsys, "eval", "breaks", "--deal-set", "dev", "--deals", "4", "--panel", "random,rule",
        "--workers", "1", "--no-progress", "--json", str(path),
    )  # fmt: skip
    assert status == 1
    assert "vs random: FAILED: agent 'breaks' raised RuntimeError" in out
    assert re.search(r"\| rule +\| [+-]\d", out)  # the other opponent's row
    assert err.count("\n") == 1 and "failed against random" in err
    card = load_card(path)
    assert list(card.errors) == ["random"] and list(card.results) == ["rule"]
    assert card.agent == "breaks" and card.n_deals == 4


def test_cli_card_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "out" / "rule.json"
    status, out, _ = run_cli(
        capsys, "eval", "rule", "--deal-set", "dev", "--deals", "4", "--panel", "rule",
        "--workers", "1", "--no-progress", "--json", str(path),
    )  # fmt: skip
    assert status == 0 and f"wrote {path}" in out and "| rule" in out
    assert json.loads(path.read_text())["panel"] == {"rule": "rule"}


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"butifarra {butifarra_env.__version__}\n"


def test_cli_never_overwrites_a_json_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "card.json"
    path.write_text("mine")
    status, out, err = run_cli(capsys, "eval", "rule", "--deals", "2", "--json", str(path))
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "--json" in err and "not overwriting it" in err
    assert path.read_text() == "mine"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--deals", "0"], "--deals: the test_v1 deal set has 10000 deals; expected an integer"),
        (["--deals", "10001"], "--deals: the test_v1 deal set has 10000 deals"),
        (["--deal-set", "dev", "--deals", "2001"], "--deals: the dev_v1 deal set has 2000"),
        (["--deal-set", "train"], "--deal-set: expected one of dev, test, got 'train'"),
        (["--panel", "random,random"], "--panel: expected panel members from random, rule"),
        (["--panel", "ppo,nobody"], "--panel: expected panel members"),
    ],
)
def test_cli_bad_deal_counts_and_panels_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    status, out, err = run_cli(capsys, "eval", "rule", *argv)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("butifarra eval: error: argument ") and expected in err


# --------------------------------------------------------------------------- leaderboard
def fake_card(agent: str, points: dict[str, float], **kw: object) -> ResultCard:
    panel = {m: evaluation.PANEL[m] for m in points}
    results = {
        m: {"spec": panel[m], "points_per_hand": p, "ci_low": p - 1.5, "ci_high": p + 1.5}
        for m, p in points.items()
    }
    fields: dict = {"results": results, "errors": {}, "timing": {}}
    fields.update(kw)
    return ResultCard(agent, "test_v1", DEAL_SETS["test"].sha256, 10000, 0, panel, **fields)


INTRO = "# Title\n\nthe `<!-- leaderboard:start -->` line is not a marker\n\n"
PAGE = INTRO + "<!-- leaderboard:start -->\nold table\n<!-- leaderboard:end -->\n\nend\n"


def test_leaderboard_rewrites_only_its_block(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "a.json").write_text(fake_card("rule", {"random": 63.08, "rule": 0.0}).to_json())
    weaker = fake_card("random", {"random": 0.0}, errors={"rule": "agent raised"})
    (results / "b.json").write_text(weaker.to_json())
    readme, doc = tmp_path / "README.md", tmp_path / "evaluation.md"
    readme.write_text(PAGE)
    doc.write_text(PAGE.replace("# Title", "# Other"))
    argv = ["--results", str(results), "--files", str(readme), str(doc)]
    assert leaderboard.main(argv) == 0
    text = readme.read_text()
    head, rest = text.split("\n<!-- leaderboard:start -->\n")
    block, tail = rest.split("<!-- leaderboard:end -->")
    assert head + "\n" == INTRO and tail == "\n\nend\n"
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    assert rows[0].startswith("| `rule` | +63.08 ± 1.50 | +0.00 ± 1.50 |  |  | 10,000 | test_v1")
    assert rows[1].startswith("| `random` | +0.00 ± 1.50 | failed |  |  |")
    assert "old table" not in text and doc.read_text().startswith("# Other")
    assert leaderboard.main([*argv, "--check"]) == 0  # current now
    (results / "c.json").write_text(fake_card("ppo", {"random": 73.7}).to_json())
    assert leaderboard.main([*argv, "--check"]) == 1
    assert readme.read_text() == text  # --check changes nothing


def test_leaderboard_ranks_by_the_panel_members_other_than_random() -> None:
    """Margins against random (tens of points) do not decide the order: the agent ahead of
    the other against every other member ranks first even when it scores less against
    random; a card that played only random is ranked by it."""
    exploiter = fake_card("exploiter", {"random": 80.0, "rule": 4.4, "ppo": 4.1, "search": 4.7})
    stronger = fake_card("stronger", {"random": 50.0, "rule": 4.6, "ppo": 4.2, "search": 5.1})
    rows = [r for r in leaderboard.table([exploiter, stronger]).splitlines() if r[:3] == "| `"]
    assert [r.split("`")[1] for r in rows] == ["stronger", "exploiter"]
    only = [fake_card("low", {"random": 10.0}), fake_card("high", {"random": 60.0})]
    rows = [r for r in leaderboard.table(only).splitlines() if r[:3] == "| `"]
    assert [r.split("`")[1] for r in rows] == ["high", "low"]


def test_leaderboard_without_cards_and_with_bad_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "README.md"
    page.write_text(PAGE)
    argv = ["--results", str(tmp_path / "missing"), "--files", str(page)]
    assert leaderboard.main(argv) == 0
    assert "No result cards yet" in page.read_text()
    results = tmp_path / "results"
    results.mkdir()
    old = fake_card("rule", {"rule": 0.0}, protocol_version=0)
    (results / "old.json").write_text(old.to_json())
    assert leaderboard.main(["--results", str(results), "--files", str(page)]) == 0
    assert "protocol version 0, not 1; left out" in capsys.readouterr().err
    before = page.read_text()
    (results / "bad.json").write_text('{"agent": "x"}')
    assert leaderboard.main(["--results", str(results), "--files", str(page)]) == 2
    assert "bad.json: not a readable result card" in capsys.readouterr().err
    (results / "bad.json").unlink()
    no_markers = tmp_path / "plain.md"
    no_markers.write_text("no block here\n")
    assert leaderboard.main(["--results", str(results), "--files", str(page), str(no_markers)]) == 2
    assert page.read_text() == before and no_markers.read_text() == "no block here\n"
