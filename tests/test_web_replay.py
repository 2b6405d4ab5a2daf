"""Records as replay frames, and the self-contained replay view for Jupyter (no server)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from butifarra.web.replay import ReplayView, record_summary, replay_data
from butifarra_env import butifarra_v0
from butifarra_env.core.cards import POINTS, card_name, cards_of, sort_key
from butifarra_env.core.errors import RecordError
from butifarra_env.records import save_records


def played_record(seed: int = 0, probs: bool = True) -> dict[str, Any]:
    """A random hand through the environment, with each decision's (uniform) probabilities."""
    env = butifarra_v0.raw_env()
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    entries: list[dict[str, float] | None] = []
    while not all(env.terminations.values()):
        legal = env.legal_actions()
        entries.append(
            {str(a): round(1 / len(legal), 6) for a in legal} if len(entries) % 3 else None
        )
        env.step(legal[rng.integers(len(legal))])
    record = env.game_record()
    record["players"] = ["ppo", "rule", "random", "rule"]
    if probs:
        record["probs"] = entries
    return record


def test_frames_follow_the_hand_from_the_deal_to_the_result() -> None:
    record = played_record(3)
    data = replay_data(record)
    frames = data["frames"]
    assert len(frames) == len(record["actions"]) + 1
    assert frames[0]["hands"] == [sorted(h, key=sort_key) for h in record["hands"]]
    assert frames[0]["last"] is None and frames[0]["to_move"] == record["dealer"]
    assert frames[-1]["hands"] == [[], [], [], []] and frames[-1]["to_move"] is None
    assert data["result"] == record["result"]
    assert frames[-1]["team_points"] == record["result"]["team_points"]
    for i, (seat, action) in enumerate(record["actions"]):
        before, after = frames[i], frames[i + 1]
        assert before["to_move"] == seat and action in before["legal"]
        text = after["last"].pop("text")  # the move in words, as the play table says it
        assert after["last"] == {"seat": seat, "action": action}
        assert text.startswith(f"plays {card_name(action)} (") if action < 48 else text
        if action < 48:  # the card left the hand and lies on the table
            assert action in before["hands"][seat] and action not in after["hands"][seat]
            assert after["trick"][seat] == action
        else:
            assert after["hands"] == before["hands"]


def test_a_closed_trick_stays_on_the_table_in_its_frame() -> None:
    record = played_record(4)
    frames = replay_data(record)["frames"]
    closed = [f for f in frames if f["trick_done"]]
    assert len(closed) == 12
    for f in closed:
        cards = f["trick"]
        assert None not in cards
        assert f["trick_done"]["points"] == sum(POINTS[c] for c in cards) + 1
    assert sum(f["trick_done"]["points"] for f in closed) == 72


def test_probabilities_ride_with_the_decision_they_belong_to() -> None:
    record = played_record(5)
    data = replay_data(record)
    assert data["has_probs"]
    for frame, entry in zip(data["frames"], record["probs"], strict=False):
        assert frame["probs"] == entry
        if entry is not None:
            assert sorted(int(a) for a in entry) == frame["legal"]
    assert data["frames"][-1]["probs"] is None
    plain = replay_data(played_record(5, probs=False))
    assert not plain["has_probs"] and all(f["probs"] is None for f in plain["frames"])


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda r: r.update(probs=r["probs"][:-1]), "one per action"),
        (lambda r: r.update(probs={"0": 1}), "one per action"),
        (lambda r: r["probs"].__setitem__(1, [0.5, 0.5]), r"probs\[1\] must be a dict"),
        (lambda r: r["probs"].__setitem__(1, {"56": 1.0}), r"probs\[1\] has '56'"),
        (lambda r: r["probs"].__setitem__(1, {"x": 1.0}), r"probs\[1\] has 'x'"),
        (lambda r: r["probs"].__setitem__(2, {"48": 1.5}), r"probs\[2\] has '48': 1.5"),
        (lambda r: r["probs"].__setitem__(2, {"48": "high"}), r"probs\[2\]"),
        (lambda r: r["probs"].__setitem__(2, {"48": True}), r"probs\[2\]"),
    ],
)
def test_malformed_probabilities_are_refused_naming_the_entry(mutate, match: str) -> None:
    record = played_record(6)
    mutate(record)
    with pytest.raises(RecordError, match=match):
        replay_data(record)


def _decision(record: dict[str, Any]) -> tuple[int, list[int]]:
    """The first decision with probabilities and at least three legal moves, and its legal set."""
    frames = replay_data(record)["frames"]
    for i, entry in enumerate(record["probs"]):
        if entry is not None and len(frames[i]["legal"]) >= 3:
            return i, frames[i]["legal"]
    raise AssertionError("no decision with three legal moves")


def _illegal_mass(record: dict[str, Any]) -> None:
    i, legal = _decision(record)
    illegal = next(a for a in range(56) if a not in legal)
    record["probs"][i] = {str(legal[0]): 0.5, str(illegal): 0.5}


def _sums_to_two(record: dict[str, Any]) -> None:
    i, legal = _decision(record)
    record["probs"][i] = {str(a): 1.0 for a in legal[:2]}


def _sums_to_half(record: dict[str, Any]) -> None:
    i, legal = _decision(record)
    record["probs"][i] = {str(legal[0]): 0.5}


def _negative(record: dict[str, Any]) -> None:
    i, legal = _decision(record)
    record["probs"][i] = {str(legal[0]): 1.2, str(legal[1]): -0.2}


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (_illegal_mass, r"gives 0\.5 to action \d+ \(.*\), which is not legal there; legal: \["),
        (_sums_to_two, r"sums to 2; a decision's probabilities sum to 1"),
        (_sums_to_half, r"sums to 0\.5"),
        (_negative, r"probabilities 0-1"),
    ],
)
def test_probabilities_must_be_a_distribution_over_the_legal_moves(mutate, match: str) -> None:
    record = played_record(15)
    mutate(record)
    with pytest.raises(RecordError, match=match) as refused:
        replay_data(record)
    assert re.search(r"record entry probs\[\d+\] ", str(refused.value))  # names the entry


def test_zero_on_an_illegal_move_and_rounding_are_accepted() -> None:
    record = played_record(16)
    i, legal = _decision(record)
    illegal = next(a for a in range(56) if a not in legal)
    share = round(1 / len(legal), 6)
    record["probs"][i] = {**{str(a): share for a in legal}, str(illegal): 0.0}
    assert replay_data(record)["frames"][i]["probs"][str(illegal)] == 0.0


@pytest.mark.parametrize("record", [[], 5, None, "x", 1.5])
def test_a_record_that_is_not_an_object_is_refused(record: object) -> None:
    with pytest.raises(RecordError, match="a record must be a JSON object"):
        replay_data(record)


def test_an_illegal_move_is_refused_by_the_engine() -> None:
    record = played_record(7)
    legal = replay_data(record)["frames"][10]["legal"]
    seat, _ = record["actions"][10]
    record["actions"][10] = [seat, next(a for a in range(56) if a not in legal)]
    with pytest.raises(RecordError, match=r"actions\[10\]"):
        replay_data(record)


def test_a_partial_record_replays_up_to_where_it_stops() -> None:
    record = played_record(8)
    partial = {**record, "actions": record["actions"][:20], "result": None}
    partial.pop("probs")
    data = replay_data(partial)
    assert len(data["frames"]) == 21 and data["result"] is None
    assert sum(len(h) for h in data["frames"][-1]["hands"]) == 48 - sum(
        1 for _, a in partial["actions"] if a < 48
    )


def test_summaries_read_what_is_there_and_tolerate_what_is_not() -> None:
    record = played_record(9)
    s = record_summary(4, record)
    assert s["index"] == 4 and s["players"] == record["players"] and s["has_probs"]
    assert s["scores"] == record["result"]["scores"] and s["n_actions"] == len(record["actions"])
    bare = record_summary(0, {"format_version": 1, "actions": "x", "players": 3})
    assert bare["players"] is None and bare["n_actions"] == 0 and bare["scores"] is None


# --------------------------------------------------------------------------- the view
def test_the_jupyter_view_is_self_contained_html() -> None:
    view = ReplayView(played_record(10))
    html = view._repr_html_()
    assert html.count("<script>") == 1 and html.count("</script>") == 1
    assert "<style>" in html and ".bt-card" in html  # the CSS is inlined
    assert "ButifarraReplay.mount" in html and "ButifarraCards" in html  # and the scripts
    assert not re.search(r"""(src|href)\s*=""", html)  # nothing to fetch
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    data = json.loads(re.search(r"getElementById\(\"[^\"]+\"\), (.*)\);</script>", html).group(1))
    assert data == json.loads(json.dumps(view.data))
    assert view._repr_html_() != html  # each display gets its own element id


def test_record_text_cannot_break_out_of_the_script() -> None:
    record = played_record(11)
    record["players"] = ["</script><script>alert(1)</script>", "<!--", "b", "c"]
    html = ReplayView(record).to_html()
    assert html.count("</script>") == 1 and "<!--" not in html
    assert "\\u003c/script\\u003e" in html


def test_from_file_save_and_its_refusals(tmp_path: Path) -> None:
    path = tmp_path / "games.jsonl"
    records = [played_record(12), played_record(13, probs=False)]
    save_records(path, records)
    view = ReplayView.from_file(path, 1)
    assert view.record == records[1]
    assert repr(view).startswith(f"ReplayView({len(records[1]['actions'])} moves")
    with pytest.raises(ValueError, match=r"has 2 records \(fewer than 3\), got index 2"):
        ReplayView.from_file(path, 2)
    for bad in (-1, "0", 1.0, True, None):  # an int >= 0, nothing else
        with pytest.raises(ValueError, match=r"index must be an int >= 0 \(below the number"):
            ReplayView.from_file(path, bad)  # type: ignore[arg-type]
    page = tmp_path / "replay.html"
    view.save(page)
    assert page.read_text().startswith("<!doctype html>")
    with pytest.raises(FileExistsError):
        view.save(page)
    broken = copy.deepcopy(records[0])
    broken["hands"][0] = broken["hands"][1]
    with pytest.raises(RecordError):
        ReplayView(broken)


def test_the_frames_show_every_card_exactly_once() -> None:
    frames = replay_data(played_record(14))["frames"]
    for f in frames:
        held = [c for h in f["hands"] for c in h]
        assert len(held) == len(set(held))
    first = frames[0]["hands"]
    assert sorted(c for h in first for c in h) == list(range(48))
    assert cards_of(sum(1 << c for c in first[0])) == sorted(first[0])
