"""Arena: duplicate deals, reproducibility, statistics, round robin, CLI errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agents import RandomAgent, RuleBasedAgent
from agents.evaluation import arena, stats
from agents.evaluation.arena import (
    CHUNK_DEALS,
    MATCH_HAND_FIELDS,
    AgentError,
    MatchStats,
    duel,
    round_robin,
)
from agents.evaluation.stats import mean_ci, t_quantile
from agents.registry import AGENT_FACTORIES
from butifarra.cli import main
from butifarra_env.core.options import Options
from butifarra_env.core.rules import deal
from butifarra_env.envs.replay import iter_replay, replay
from butifarra_env.records import load_records

REPO = Path(__file__).resolve().parents[1]


def test_duplicate_deals_swap_the_teams_on_the_same_cards() -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 40, seed=3)
    h = res.hands
    assert len(h["deal"]) == 80
    assert np.array_equal(h["deal"], np.repeat(np.arange(40), 2))
    assert np.array_equal(h["swapped"], np.tile([0, 1], 40))
    assert np.array_equal(h["dealer"][0::2], h["dealer"][1::2])  # same dealer both times
    assert np.all(h["points_a"] + h["points_b"] == 72)
    assert np.array_equal(h["diff_a"], h["score_a"] - h["score_b"])
    assert np.all((h["score_a"] == 0) | (h["score_b"] == 0))  # only one team scores
    won = h["points_a"] > 36
    assert np.array_equal(h["score_a"][won], (h["points_a"][won] - 36) * h["multiplier"][won])
    assert np.allclose(res.pair_means, h["diff_a"].reshape(40, 2).mean(axis=1))
    assert res.mean == pytest.approx(h["diff_a"].mean())
    assert res.win_share + res.loss_share + res.draw_share == pytest.approx(1.0)
    records = res.records()
    assert len(records) == 80 and set(records[0]) == set(h)


def test_identical_deterministic_agents_cancel_exactly() -> None:
    res = duel(RuleBasedAgent(), RuleBasedAgent(), 30, seed=1)
    assert np.all(res.pair_means == 0)  # each deal is the mirror image of the other play
    assert res.mean == 0


def test_results_depend_on_the_seed_not_on_the_worker_count() -> None:
    n = CHUNK_DEALS * 2 + 5  # three chunks, the last one partial
    one = duel("rule", "random", n, seed=11, workers=1)
    two = duel("rule", "random", n, seed=11, workers=2)
    again = duel("rule", "random", n, seed=11)
    for k in one.hands:
        assert np.array_equal(one.hands[k], two.hands[k])
        assert np.array_equal(one.hands[k], again.hands[k])
    other = duel("rule", "random", n, seed=12)
    assert not np.array_equal(one.hands["diff_a"], other.hands["diff_a"])


def test_match_results_do_not_depend_on_the_worker_count() -> None:
    n = CHUNK_DEALS + 3  # two chunks of matches
    one = duel("rule", "random", 1, seed=5, n_matches=n, target_score=40, workers=1)
    two = duel("rule", "random", 1, seed=5, n_matches=n, target_score=40, workers=2)
    assert one.matches is not None and two.matches is not None
    assert np.array_equal(one.matches.rows, two.matches.rows)
    for k in MATCH_HAND_FIELDS:
        assert np.array_equal(one.matches.hands[k], two.matches.hands[k])


def fixed_deal(rng: np.random.Generator) -> tuple[int, list[int]]:
    """Pluggable dealing: every deal the same (cards in id order from seat 1)."""
    return 0, deal(np.arange(48), 0)


def test_pluggable_dealing() -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 6, seed=0, deal_fn=fixed_deal)
    assert np.all(res.hands["dealer"] == 0)
    # the rule-based side bids the same way on the same cards every time
    rule_first = res.hands["swapped"] == 0
    assert len(set(res.hands["trump"][rule_first].tolist())) == 1


def test_options_reach_the_games() -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 30, seed=0, options=Options(max_doubling_level=0))
    assert np.all(res.hands["doubling_level"] == 0)


def test_mean_ci_matches_a_t_interval() -> None:
    assert arena.mean_ci is stats.mean_ci  # one function, re-exported for older imports
    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    m, lo, hi = mean_ci(x)
    half = 2.776445 * x.std(ddof=1) / np.sqrt(5)  # t(0.975, 4)
    assert m == pytest.approx(4.0)
    assert (hi - lo) / 2 == pytest.approx(half, rel=1e-3)
    assert (lo + hi) / 2 == pytest.approx(4.0)
    assert t_quantile(0.975, 10) == pytest.approx(2.228139, rel=1e-4)
    assert t_quantile(0.975, 30) == pytest.approx(2.042272, rel=1e-5)
    assert t_quantile(0.975, 10**9) == pytest.approx(1.959964, rel=1e-6)


def test_rule_beats_random_in_duplicate_matches_to_101() -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 4, seed=2, n_matches=8, target_score=101)
    m = res.matches
    assert m is not None and len(m.rows) == 16  # each match played with both seatings
    assert m.won_a >= 13, m.rows  # far above the 8 of equal players
    assert m.share_a == m.won_a / 16
    assert f"matches to 101: rule won {m.won_a}/16" in res.summary()


def match_plays(m: MatchStats) -> list[tuple[int, int, int, int, dict[str, np.ndarray]]]:
    """(match, swapped, a_won, hands, that play's per-hand columns) for each match played."""
    out = []
    for match, swapped, a_won, n_hands in m.rows.tolist():
        sel = (m.hands["deal"] == match) & (m.hands["swapped"] == swapped)
        out.append((match, swapped, a_won, n_hands, {k: v[sel] for k, v in m.hands.items()}))
    return out


@pytest.mark.parametrize("target", [40, 101])
def test_match_hands_rotate_the_dealer_and_stop_exactly_at_the_target(target: int) -> None:
    res = duel(RuleBasedAgent(), RandomAgent(), 1, seed=4, n_matches=6, target_score=target)
    m = res.matches
    assert m is not None and len(m.hands["deal"]) == m.rows[:, 3].sum()
    first_dealer = {}
    for match, _swapped, a_won, n_hands, h in match_plays(m):
        assert n_hands >= 1 and h["hand_number"].tolist() == list(range(n_hands))
        # the deal passes to the next player every hand
        assert h["dealer"].tolist() == [(h["dealer"][0] + k) % 4 for k in range(n_hands)]
        # both seatings of a match start with the same dealer
        assert first_dealer.setdefault(match, h["dealer"][0]) == h["dealer"][0]
        # each hand starts from the running totals of the hands before it...
        totals_a = np.cumsum(h["score_a"])
        totals_b = np.cumsum(h["score_b"])
        assert h["match_score_a"].tolist() == [0, *totals_a[:-1].tolist()]
        assert h["match_score_b"].tolist() == [0, *totals_b[:-1].tolist()]
        # ...no team had reached the target before the last hand, and one has after it
        assert np.all(np.maximum(totals_a, totals_b)[:-1] < target)
        assert max(totals_a[-1], totals_b[-1]) >= target
        assert a_won == int(totals_a[-1] >= target)
    assert m.won_a == m.rows[:, 2].sum()


def test_bad_counts_and_agents_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="n_deals must be an int >= 1"):
        duel("rule", "random", -5)
    with pytest.raises(ValueError, match="unknown agent 'nobody'; allowed:"):
        duel("rule", "nobody", 5)
    with pytest.raises(ValueError, match="at least two agents"):
        round_robin({"rule": "rule"}, 5)


def test_round_robin_rates_and_writes_files_atomically(tmp_path: Path) -> None:
    rr = round_robin({"rule": "rule", "random": "random", "random2": RandomAgent(5)}, 40, seed=4)
    assert [r["agent"] for r in rr.ratings][0] == "rule"
    assert rr.matrix.shape == (3, 3)
    assert rr.matrix[0, 1] == pytest.approx(-rr.matrix[1, 0])
    assert "ordinal" in rr.table() and "rule" in rr.table()
    csv_path, json_path = rr.save(tmp_path / "sub" / "rr")
    assert csv_path.read_text().splitlines()[0].startswith("agent,mu,sigma")
    data = json.loads(json_path.read_text())
    assert len(data["duels"]) == 3 and data["n_deals"] == 40
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["rr.csv", "rr.json"]


# --------------------------------------------------------------------------- CLI
def test_cli_duel_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "duel"
    rc = main(["arena", "rule", "random", "-n", "20", "--no-progress", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "rule vs random: 20 duplicate deals" in text and "95% CI" in text
    assert json.loads(out.with_suffix(".json").read_text())["n_deals"] == 20
    assert len(out.with_suffix(".csv").read_text().splitlines()) == 41
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    # a second run to the same prefix is refused before playing: results are never overwritten
    assert main(["arena", "rule", "random", "-n", "12", "--no-progress", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"'{out}.json' exists" in err and "choose another --out prefix" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # another prefix writes two new files and leaves no temporary file behind
    again = tmp_path / "duel2"
    assert main(["arena", "rule", "random", "-n", "12", "--no-progress", "--out", str(again)]) == 0
    assert json.loads(again.with_suffix(".json").read_text())["n_deals"] == 12
    assert len(again.with_suffix(".csv").read_text().splitlines()) == 25
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "duel.csv",
        "duel.json",
        "duel2.csv",
        "duel2.json",
    ]


def test_cli_round_robin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arena", "rule", "random", "random", "-n", "10", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "random#2" in text and "rank" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["arena", "rule", "nobody"],
            "unknown agent 'nobody'; allowed: ppo, ppo-r1, ppo-r5, ppo-r6, ppo-r7, ppo-r8, ppo-r9,"
            " ppo-r10, ppo-r11, random, rule",
        ),
        (["arena", "rule", "ppo:/no/such/ckpt.pt"], "PPO checkpoint not found"),
        (["arena", "rule"], "at least two agents"),
        (["arena", "rule", "random", "random", "--matches", "2"], "--matches is for two"),
    ],
)
def test_cli_errors_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_rejects_negative_counts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["arena", "rule", "random", "-n", "-3"])
    assert e.value.code == 2
    assert "argument -n/--deals: expected an integer from 1 to 10000000, got -3" in (
        capsys.readouterr().err
    )


def test_console_script_exit_status_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "broken.pt"
    bad.write_bytes(b"not a checkpoint")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from butifarra.cli import main; sys.exit(main())",
         "arena", "rule", f"ppo:{bad}", "-n", "5"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "ppo" in proc.stderr.lower() and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- failing agents
class RaisesInPlay(RandomAgent):
    """Plays like random until the card play, then raises (a bug in someone's agent)."""

    name = "raises"

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        if np.asarray(action_masks)[:, :48].any():
            raise KeyError("boom")
        return super().act_batch(observations, action_masks)


class AlwaysPasses(RandomAgent):
    """Answers 'pass' (55) to everything: illegal whenever passing is not allowed."""

    name = "passer"

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        return np.full(len(action_masks), 55, dtype=np.int64)


class ReturnsFloats(RandomAgent):
    name = "floats"

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        return super().act_batch(observations, action_masks).astype(np.float64)


@pytest.mark.parametrize("workers", [1, 2])
def test_an_agent_that_raises_is_named_with_the_deal_and_the_decision(workers: int) -> None:
    with pytest.raises(AgentError) as e:
        duel(RuleBasedAgent(), RaisesInPlay(0), CHUNK_DEALS + 1, seed=1, workers=workers)
    text = str(e.value)
    assert "agent 'raises' raised KeyError: 'boom'" in text
    assert re.search(r"deal \d+ \(agent A's team at seats [0-3] and [0-3]\), hand 0", text)
    assert re.search(r"seat [0-3] to move in phase 'play'; legal actions: \[\d+ \(play ", text)


def test_an_illegal_action_is_named_with_the_deal_and_the_legal_actions() -> None:
    with pytest.raises(AgentError) as e:
        duel(AlwaysPasses(0), RuleBasedAgent(), 3, seed=0)
    text = str(e.value)
    assert "agent 'passer' chose an illegal action in deal " in text
    assert "illegal action 55 (pass) for seat" in text and "legal actions: [" in text
    with pytest.raises(AgentError, match="'floats' act_batch returned float64"):
        duel(ReturnsFloats(0), RuleBasedAgent(), 2, seed=0)


class BadProbs(RandomAgent):
    name = "badprobs"

    def action_probs_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        return np.full(np.shape(action_masks), 2.0)  # not probabilities


class NoProbsMethod(RuleBasedAgent):
    """An agent class that does not have the method at all (older third-party code)."""

    def __getattribute__(self, name: str) -> object:
        if name == "action_probs_batch":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_probabilities_that_are_not_are_refused_and_a_missing_method_is_null(
    tmp_path: Path,
) -> None:
    with pytest.raises(AgentError, match="'badprobs' action_probs_batch returned .* 0-1"):
        duel(BadProbs(0), RuleBasedAgent(), 1, records_path=tmp_path / "a.jsonl")
    assert duel(BadProbs(0), RuleBasedAgent(), 1).n_deals == 1  # only asked when logging
    duel(NoProbsMethod(), RandomAgent(1), 1, records_path=tmp_path / "b.jsonl")
    [first, _] = load_records(tmp_path / "b.jsonl")
    for (seat, _action), probs in zip(first["actions"], first["probs"], strict=True):
        assert (probs is None) == (seat % 2 == 0)  # the rule agent sits at seats 0 and 2


def test_cli_reports_a_failing_agent_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(AGENT_FACTORIES, "raises", lambda arg, seed: RaisesInPlay(seed))
    assert main(["arena", "rule", "raises", "-n", "3", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("butifarra arena: error: agent 'raises' raised KeyError")


# --------------------------------------------------------------------------- game records
def test_records_replay_with_the_probabilities_of_each_decision(tmp_path: Path) -> None:
    path = tmp_path / "games.jsonl"
    res = duel("random", "rule", 5, seed=2, n_matches=2, target_score=30, records_path=path)
    records = load_records(path)
    assert res.matches is not None
    assert len(records) == 10 + len(res.matches.hands["deal"])  # both seatings, and matches
    deals = [r for r in records if "deal" in r]
    assert [(r["deal"], r["swapped"]) for r in deals] == [(d, s) for d in range(5) for s in (0, 1)]
    assert all(r["seed"] == 2 for r in records)
    for r in records:
        env = replay(r)
        assert env.game.is_over and env.game.result() == r["result"]
        assert len(r["probs"]) == len(r["actions"])
        for (seat, action), probs, legal in zip(
            r["actions"], r["probs"], _legal_before_each_action(r), strict=True
        ):
            if r["players"][seat] == "random":  # uniform over exactly the legal actions
                assert probs == {str(a): round(1 / len(legal), 6) for a in legal}
                assert str(action) in probs
            else:
                assert probs is None  # the rule-based agent has no distribution
        a_seats = (1, 3) if r["swapped"] else (0, 2)
        assert [r["players"][s] for s in a_seats] == ["random", "random"]
    # the per-hand columns are the records' results
    assert [r["result"]["trump"] for r in deals] == res.hands["trump"].tolist()


def _legal_before_each_action(record: dict) -> list[list[int]]:
    return [env.game.legal_actions() for env in iter_replay(record)][:-1]


def test_logging_changes_no_result_and_the_file_does_not_depend_on_workers(
    tmp_path: Path,
) -> None:
    n = CHUNK_DEALS + 6  # two chunks
    plain = duel("random", "rule", n, seed=9)
    one = duel("random", "rule", n, seed=9, workers=1, records_path=tmp_path / "one.jsonl")
    two = duel("random", "rule", n, seed=9, workers=2, records_path=tmp_path / "two.jsonl")
    for k in plain.hands:
        assert np.array_equal(plain.hands[k], one.hands[k])
        assert np.array_equal(plain.hands[k], two.hands[k])
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    assert len(load_records(tmp_path / "one.jsonl")) == 2 * n


def test_records_are_appended_and_a_bad_records_file_is_refused_before_playing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "games.jsonl"
    duel("rule", "random", 2, seed=0, records_path=path)
    first = path.read_bytes()
    duel("rule", "random", 3, seed=1, records_path=str(path))
    assert path.read_bytes().startswith(first) and len(load_records(path)) == 10
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    calls = []

    def counting_deal(rng: np.random.Generator) -> tuple[int, list[int]]:
        calls.append(1)
        return arena.uniform_deal(rng)

    for bad in (notes, tmp_path, notes / "games.jsonl"):
        with pytest.raises(ValueError, match="records_path"):
            duel("rule", "random", 2, seed=0, records_path=bad, deal_fn=counting_deal)
    assert calls == [] and notes.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["games.jsonl", "notes.txt"]


def test_cli_records_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "games.jsonl"
    args = ["arena", "random", "random", "-n", "4", "--no-progress", "--records", str(path)]
    assert main(args) == 0
    assert f"game records appended to {path}" in capsys.readouterr().out
    records = load_records(path)
    assert [r["players"] for r in records] == [
        ["random", "random#2"] * 2,
        ["random#2", "random"] * 2,
    ] * 4
    assert all(p is not None for r in records for p in r["probs"])


# --------------------------------------------------------------------------- output files
def test_cli_checks_the_output_files_before_playing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_play(*args: object, **kwargs: object) -> None:
        raise AssertionError("played although the output could not be written")

    monkeypatch.setattr(arena, "duel", no_play)
    monkeypatch.setattr(arena, "round_robin", no_play)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    (tmp_path / "taken.csv").write_text("old results\n")
    (tmp_path / "folder.json").mkdir()
    cases = {
        str(notes / "results"): "is a file, not a folder",
        str(tmp_path / "taken"): "taken.csv' exists (a file); not overwriting it",
        str(tmp_path / "folder"): "folder.json' exists (a folder)",
        str(tmp_path) + "/": "expected a file prefix",
        "": "expected a file prefix",
        str(tmp_path / ("x" * 300)): "cannot use",
    }
    before = sorted(tmp_path.rglob("*"))
    for agents in (["rule", "random"], ["rule", "random", "random"]):
        for prefix, message in cases.items():
            assert main(["arena", *agents, "-n", "5", "--out", prefix]) == 2, prefix
            err = capsys.readouterr().err
            assert "argument --out: " in err and message in err, err
            assert err.count("\n") == 1
    # an unwritable folder (os.access stands in: the tests may run as root)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert main(["arena", "rule", "random", "--out", str(tmp_path / "new" / "r")]) == 2
    assert f"the folder '{tmp_path}' is not writable" in capsys.readouterr().err
    assert sorted(tmp_path.rglob("*")) == before
    assert notes.read_text() == "mine\n" and (tmp_path / "taken.csv").read_text() == "old results\n"


def test_results_are_kept_when_the_folder_fails_after_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "results"
    out_dir.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    real_duel = arena.duel

    def duel_then_lose_the_folder(*args: object, **kwargs: object) -> arena.DuelResult:
        res = real_duel(*args, **kwargs)  # type: ignore[arg-type]
        out_dir.rmdir()
        out_dir.write_text("a file where the folder was\n")
        return res

    monkeypatch.setattr(arena, "duel", duel_then_lose_the_folder)
    rc = main(["arena", "rule", "random", "-n", "6", "--no-progress", "--out", str(out_dir / "r")])
    assert rc == 0
    captured = capsys.readouterr()
    kept = {p.suffix: p for p in cwd.iterdir()}  # the names' middles are random
    assert sorted(kept) == [".csv", ".json"] and len(list(cwd.iterdir())) == 2
    assert all(p.name.startswith("r.unsaved-") for p in kept.values())
    assert f"could not write {out_dir / 'r'}.json" in captured.err
    assert f"wrote {kept['.json']} instead" in captured.err
    assert json.loads(kept[".json"].read_text())["n_deals"] == 6
    assert len(kept[".csv"].read_text().splitlines()) == 13
    assert out_dir.read_text() == "a file where the folder was\n"


def test_round_robin_save_never_overwrites(tmp_path: Path) -> None:
    rr = round_robin({"rule": "rule", "random": "random"}, 3, seed=0)
    rr.save(tmp_path / "rr")
    before = (tmp_path / "rr.json").read_bytes()
    with pytest.raises(FileExistsError, match="not overwriting"):
        rr.save(tmp_path / "rr")
    assert (tmp_path / "rr.json").read_bytes() == before
