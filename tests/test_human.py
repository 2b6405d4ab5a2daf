"""Terminal play: parsing, explanations of illegal choices, whole scripted hands, leaving."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents import Agent, RandomAgent, RuleBasedAgent
from agents.base import UnsupportedVariant
from butifarra.cli import main
from butifarra.play import (
    HELP,
    append_record,
    contract_text,
    explain_illegal_card,
    hand_record,
    help_text,
    parse_choice,
    play,
    render_view,
)
from butifarra_env.core.actions import BUTIFARRA, DELEGATE, DOUBLE, PASS, TRUMP_BASE
from butifarra_env.core.cards import SUIT_MASK, card_name, cards_of, parse_card
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import NO_TRUMP, lowest_card, random_deal
from butifarra_env.envs.replay import replay
from butifarra_env.records import load_records
from tests.helpers import play_position

REPO = Path(__file__).resolve().parents[1]

# Answers that eventually fit any prompt: bidding words, then every card index in turn
# (illegal ones are explained and asked again, so each turn ends on a legal card).
CYCLE = "\n".join(str(k) for k in range(1, 13)) + "\n"


def script(*first: str, cycles: int = 40) -> str:
    return "".join(line + "\n" for line in first) + CYCLE * cycles


def agents_for(seat: int) -> dict[int, Agent]:
    return {s: (RuleBasedAgent() if s % 2 == seat % 2 else RandomAgent(s)) for s in range(4)
            if s != seat}  # fmt: skip


def fresh_game(dealer: int = 0, options: Options | None = None) -> Game:
    return Game(options or Options(), dealer, random_deal(np.random.default_rng(1), dealer))


# --------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    ("text", "action"),
    [("oros", TRUMP_BASE), ("Copas", TRUMP_BASE + 1), (" espadas ", TRUMP_BASE + 2),
     ("bastos", TRUMP_BASE + 3), ("butifarra", BUTIFARRA), ("delegar", DELEGATE),
     ("delegate", DELEGATE), ("5", BUTIFARRA), ("6", DELEGATE)],
)  # fmt: skip
def test_bidding_words(text: str, action: int) -> None:
    assert parse_choice(fresh_game(), 0, text) == (action, "")


def test_bidding_mistakes_are_explained() -> None:
    game = fresh_game()
    action, why = parse_choice(game, 0, "trumpets")
    assert action is None and "not a choice" in why and "[6] delegar" in why
    assert "1 to 6" in parse_choice(game, 0, "9")[1]
    game.step(DELEGATE)
    action, why = parse_choice(game, 2, "delegar")
    assert action is None and "cannot" not in why and "must choose" in why


@pytest.mark.parametrize(
    ("text", "action"),
    [("contrar", DOUBLE), ("double", DOUBLE), ("doblar", DOUBLE), ("pass", PASS),
     ("bé", PASS), ("be", PASS), ("1", DOUBLE), ("2", PASS)],
)  # fmt: skip
def test_doubling_words(text: str, action: int) -> None:
    game = fresh_game()
    game.step(TRUMP_BASE)
    assert parse_choice(game, game.to_move, text) == (action, "")


def test_cards_by_name_or_index_and_illegal_ones_explained() -> None:
    # oros trump; seat 1 led the 10c, seat 2 (opponent of seat 3) is winning with the 12c
    game = play_position(0, leader=1, trick="10c 12c",
                         hands={3: "1c 2c 4o 5o 6e 7e 8e 2b 3b 4b 5b"})  # fmt: skip
    assert game.to_move == 3
    assert parse_choice(game, 3, "as de copas") == (parse_card("1c"), "")
    assert parse_choice(game, 3, "1c") == (parse_card("1c"), "")
    listing = render_view(game, 3)
    assert "[1] 5o  [2] 4o" in listing and "[3] 1c*  [4] 2c\n" in listing
    assert parse_choice(game, 3, "3") == (parse_card("1c"), "")
    action, why = parse_choice(game, 3, "2c")
    assert action is None and "must beat it with a higher copa" in why and "legal now: 1c" in why
    action, why = parse_choice(game, 3, "5o")
    assert action is None and "must follow suit" in why
    action, why = parse_choice(game, 3, "9e")
    assert action is None and "do not hold 9e" in why
    action, why = parse_choice(game, 3, "99")
    assert action is None and "no card number 99" in why
    action, why = parse_choice(game, 3, "rei of nothing")
    assert action is None and "not a card" in why


def test_must_trump_is_explained() -> None:
    game = play_position(0, leader=1, trick="10c 12c", hands={3: "4o 5o 6e 7e 8e 2b 3b 4b 5b"})
    action, why = parse_choice(game, 3, "6e")
    assert action is None and "must trump (oros)" in why
    assert explain_illegal_card(game, 3, parse_card("2b")).endswith("legal now: 5o 4o")


def test_must_over_trump_is_explained() -> None:
    # oros trump; seat 1 led the 10c, seat 2 (an opponent of seat 3) trumped with the 2o
    game = play_position(0, leader=1, trick="10c 2o", hands={3: "3o 4b 5b"})
    action, why = parse_choice(game, 3, "4b")
    assert action is None and "must over-trump" in why and why.endswith("legal now: 3o")


def test_the_partner_need_not_be_beaten_but_suit_must_be_followed() -> None:
    # seat 1 (seat 3's partner) led the 12c and wins it: any copa, never forced to beat
    game = play_position(0, leader=1, trick="12c 10c", hands={3: "2c 1c 5o"})
    assert parse_choice(game, 3, "2c") == (parse_card("2c"), "")
    action, why = parse_choice(game, 3, "5o")
    assert action is None and "must follow suit" in why and why.endswith("legal now: 1c 2c")


def test_no_trump_void_plays_anything() -> None:
    game = play_position(NO_TRUMP, leader=1, trick="10c 12c", hands={3: "4o 6e 2b"})
    assert parse_choice(game, 3, "6e") == (parse_card("6e"), "")


# --------------------------------------------------------------------------- whole hands
def test_scripted_hand_with_bad_input_saves_a_replayable_record(tmp_path: Path) -> None:
    save = tmp_path / "hands.jsonl"
    out = io.StringIO()
    text = script("hello", "9z", "help", "hand", "", "butifarra", cycles=45)
    rc = play(0, agents_for(0), seed=5, dealer=3, n_hands=2, save=save,
              inp=io.StringIO(text), out=out)  # fmt: skip
    assert rc == 0
    shown = out.getvalue()
    assert "not a choice: 'hello'" in shown
    assert "How to answer" in shown
    assert shown.count("Hand over:") == 2
    assert "Your hand (* = you may play it):" in shown and "On the table:" in shown
    records = load_records(save)
    assert len(records) == 2
    for record in records:
        assert record["players"][0] == "human" and record["seed"] == 5
        env = replay(record)
        assert env.game.is_over and env.game.scores == tuple(record["result"]["scores"])


@pytest.mark.parametrize("base", [1, 2])
def test_butifarra_multiplier_follows_the_options(base: int) -> None:
    game = fresh_game(options=Options(butifarra_base=base))
    _, why = parse_choice(game, 0, "trumpets")
    assert f"[5] butifarra (no trump, x{base})" in why
    out = io.StringIO()
    options = Options(butifarra_base=base, max_doubling_level=0)
    play(0, agents_for(0), seed=2, dealer=0, options=options,
         inp=io.StringIO(script("butifarra")), out=out)  # fmt: skip
    shown = out.getvalue()
    assert f"[5] butifarra (no trump, x{base})" in shown
    assert f"You: sings butifarra (no trump, x{base})" in shown
    assert f"butifarra (no trump) (chosen by seat 0), multiplier x{base}" in shown
    assert len(re.findall(r"no trump, x\d", shown)) == shown.count(f"no trump, x{base}")


def test_hands_follow_the_match_and_end_at_the_options_target() -> None:
    out = io.StringIO()
    rc = play(1, agents_for(1), seed=3, dealer=2, n_hands=6, options=Options(target_score=20),
              inp=io.StringIO(script("oros", "pass", cycles=200)), out=out)  # fmt: skip
    assert rc == 0
    shown = out.getvalue()
    dealers = re.findall(r"=== Hand (\d) of 6 — dealer: .*\(seat (\d)\) ===", shown)
    assert [int(d) for _, d in dealers] == [(2 + k) % 4 for k in range(len(dealers))]
    totals = re.findall(r"Running total: your team (\d+), other team (\d+)\.", shown)
    reached = [max(int(a), int(b)) >= 20 for a, b in totals]
    assert reached[-1] and not any(reached[:-1])  # stops at the hand that reaches 20
    assert len(totals) < 6 and shown.endswith("reached 20: the match is over.\n")


def finished_record(seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    game = fresh_game()
    while not game.is_over:
        legal = game.legal_actions()
        game.step(legal[int(rng.integers(len(legal)))])
    return hand_record(game, ["human", "rule", "rule", "rule"], seed)


def test_append_record_adds_lines_and_never_rewrites_the_file(tmp_path: Path) -> None:
    first, second, third = (finished_record(s) for s in (1, 2, 3))
    path = tmp_path / "new" / "hands.jsonl"
    append_record(path, first)  # a new file (and folder), created whole
    assert load_records(path) == [first]
    before = path.read_bytes()
    inode = os.stat(path).st_ino
    append_record(path, second)
    assert os.stat(path).st_ino == inode  # appended in place, not replaced
    assert path.read_bytes().startswith(before)
    # a file cut mid-line (a crash): the next record still starts on a line of its own
    with open(path, "ab") as f:
        f.write(b'{"cut')
    append_record(path, third)
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[-1]) == third
    assert load_records(path, skip_bad=True) == [first, second, third]
    assert sorted(p.name for p in path.parent.iterdir()) == ["hands.jsonl"]


def test_play_refuses_a_save_file_that_is_not_records(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my shopping list\n")
    with pytest.raises(ValueError, match="not a JSON Lines file of game records"):
        play(0, agents_for(0), save=notes, inp=io.StringIO(""), out=io.StringIO())
    assert notes.read_text() == "my shopping list\n"
    assert main(["play", "--save", str(notes)]) == 2


def test_end_of_input_leaves_cleanly() -> None:
    out = io.StringIO()
    rc = play(2, agents_for(2), seed=1, dealer=1, inp=io.StringIO("nonsense\n"), out=out)
    assert rc == 0 and "Bye" in out.getvalue()


def test_quit_word_leaves() -> None:
    out = io.StringIO()
    assert play(1, agents_for(1), seed=2, inp=io.StringIO("quit\n"), out=out) == 0
    assert "Leaving the table" in out.getvalue()


class CtrlC(io.StringIO):
    def readline(self, *args: object) -> str:
        raise KeyboardInterrupt


def test_ctrl_c_leaves_with_status_130() -> None:
    out = io.StringIO()
    assert play(0, agents_for(0), seed=3, inp=CtrlC(), out=out) == 130
    assert "Interrupted" in out.getvalue()


def test_play_rejects_bad_setup() -> None:
    with pytest.raises(ValueError, match="one agent for each seat"):
        play(0, {1: RandomAgent(0)}, inp=io.StringIO(""), out=io.StringIO())


def test_butifarra_play_command(tmp_path: Path) -> None:
    save = tmp_path / "rec.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from butifarra.cli import main; sys.exit(main())",
         "play", "--seed", "4", "--dealer", "0", "--opponents", "random", "--save", str(save)],
        input=script("¿?", "zzz", "oros"), capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Hand over:" in proc.stdout
    assert len(load_records(save)) == 1


def test_butifarra_play_bad_agent_is_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from butifarra.cli import main; sys.exit(main())",
         "play", "--partner", "grandma"],
        input="", capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "unknown agent 'grandma'" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- any line typed
def positions_for_each_phase() -> list[tuple[Game, int]]:
    bidding = fresh_game()
    doubling = fresh_game()
    doubling.step(TRUMP_BASE)
    play_game = play_position(0, leader=1, trick="10c 12c", hands={3: "1c 2c 4o 5o"})
    return [(bidding, 0), (doubling, doubling.to_move), (play_game, 3)]


@pytest.mark.parametrize(
    "line",
    ["²", "³", "½", "Ⅻ", "9" * 5000, "1" + "0" * 4400, "\x00", "\x1b[2J", "\u202e12", "z" * 5000],
)
def test_any_line_gets_an_answer_not_a_traceback(line: str) -> None:
    for game, seat in positions_for_each_phase():
        action, why = parse_choice(game, seat, line)
        assert action is None and why and len(why) < 400 and "\n" not in why


def test_numbers_in_other_scripts_are_numbers() -> None:
    game = fresh_game()
    assert parse_choice(game, 0, "٥") == (BUTIFARRA, "")  # Arabic-Indic five
    assert parse_choice(game, 0, "５") == (BUTIFARRA, "")  # full-width five
    _, why = parse_choice(game, 0, "9" * 5000)
    assert "choose a number from 1 to 6, not 99999... (5000 digits)" in why


def test_cli_play_asks_again_after_unicode_digits_and_huge_numbers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = ["²", "9" * 5000, "\x07", "", "٣x", "oros"]
    monkeypatch.setattr(sys, "stdin", io.StringIO(script(*lines, cycles=45)))
    assert main(["play", "--seed", "4", "--dealer", "0", "--opponents", "random"]) == 0
    out = capsys.readouterr().out
    assert "Hand over:" in out and "Traceback" not in out
    assert "not 99999... (5000 digits)" in out and "not a choice: '²'" in out


# --------------------------------------------------------------------------- records kept
class Sabotage(io.StringIO):
    """Scripted input that runs ``harm`` when the person is first asked (mid-game)."""

    def __init__(self, text: str, harm: Callable[[], None]) -> None:
        super().__init__(text)
        self.harm: Callable[[], None] | None = harm

    def readline(self, *args: Any) -> str:
        if self.harm is not None:
            self.harm, harm = None, self.harm
            harm()
        return super().readline(*args)


def test_a_save_folder_lost_mid_game_keeps_the_record_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "games"
    folder.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)

    def lose_the_folder() -> None:
        folder.rmdir()
        folder.write_text("a file where the folder was\n")

    out = io.StringIO()
    rc = play(0, agents_for(0), seed=5, dealer=3, n_hands=2, save=folder / "hands.jsonl",
              inp=Sabotage(script("butifarra", cycles=45), lose_the_folder), out=out)  # fmt: skip
    assert rc == 0
    [kept] = cwd.iterdir()
    assert kept.name.startswith("hands.unsaved-") and kept.suffix == ".jsonl"
    shown = out.getvalue()
    assert shown.count(f"Could not save to {folder / 'hands.jsonl'}") == 2
    assert shown.count(f"saved to {kept} instead") == 2  # both hands, in the one file
    records = load_records(kept)
    assert len(records) == 2 and all(replay(r).game.is_over for r in records)
    assert folder.read_text() == "a file where the folder was\n"


def test_a_save_file_replaced_mid_game_is_left_alone_and_the_record_kept_beside_it(
    tmp_path: Path,
) -> None:
    save = tmp_path / "hands.jsonl"

    def replace_with_notes() -> None:
        save.write_text("the person's notes, written over the file by mistake\n")

    out = io.StringIO()
    inp = Sabotage(script("oros", "pass", cycles=45), replace_with_notes)
    rc = play(0, agents_for(0), seed=6, dealer=0, save=save, inp=inp, out=out)
    assert rc == 0
    assert save.read_text() == "the person's notes, written over the file by mistake\n"
    [kept] = [p for p in tmp_path.iterdir() if p != save]
    assert kept.name.startswith("hands.unsaved-") and f"saved to {kept} instead" in out.getvalue()
    assert replay(load_records(kept)[0]).game.is_over


def test_when_no_file_takes_the_record_it_is_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("butifarra.play.append_record", fail)
    monkeypatch.setattr("butifarra.play.new_file_near", fail)
    out = io.StringIO()
    play(0, agents_for(0), seed=7, save=tmp_path / "h.jsonl",
         inp=io.StringIO(script("oros", "pass", cycles=45)), out=out)  # fmt: skip
    shown = out.getvalue()
    assert "No space left on device" in shown and "copy it to keep it:" in shown
    record = json.loads(shown.split("copy it to keep it:\n")[1].splitlines()[0])
    assert replay(record).game.is_over
    assert list(tmp_path.iterdir()) == []


def test_leaving_mid_hand_saves_the_hand_so_far(tmp_path: Path) -> None:
    save = tmp_path / "hands.jsonl"
    out = io.StringIO()
    assert play(0, agents_for(0), seed=2, dealer=0, save=save,
                inp=io.StringIO("oros\npass\n1\n2\nquit\n"), out=out) == 0  # fmt: skip
    assert f"Unfinished hand saved to {save}" in out.getvalue()
    [record] = load_records(save)
    game = replay(record).game
    assert record["result"] is None and not game.is_over
    assert [s for s, _ in record["actions"]].count(0) >= 2  # the person's moves are in it


def test_leaving_before_any_move_of_ones_own_saves_nothing(tmp_path: Path) -> None:
    save = tmp_path / "hands.jsonl"
    assert play(1, agents_for(1), seed=2, dealer=0, save=save,
                inp=io.StringIO(""), out=io.StringIO()) == 0  # fmt: skip
    assert not save.exists()


class Broken(RandomAgent):
    name = "broken"

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return 55 if action_mask[48] else super().act(observation, action_mask)


def test_a_failing_agent_ends_the_game_with_a_message_not_a_traceback(tmp_path: Path) -> None:
    agents = agents_for(0)
    agents[1] = Broken(1)
    out = io.StringIO()
    rc = play(0, agents, seed=1, dealer=1, save=tmp_path / "h.jsonl",
              inp=io.StringIO(script(cycles=2)), out=out)  # fmt: skip
    assert rc == 1
    shown = out.getvalue()
    assert "! agent 'broken' chose an illegal action in hand 0, move 0: " in shown
    assert "illegal action 55 (pass) for seat 1" in shown and "The hand cannot go on." in shown


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"), ({"dealer": 4}, "dealer"),
     ({"n_hands": 0}, "n_hands"), ({"save": 5}, "save"), ({"options": {}}, "options")],
)  # fmt: skip
def test_play_arguments_are_checked_by_name(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        play(0, agents_for(0), inp=io.StringIO(""), out=io.StringIO(), **kwargs)
    with pytest.raises(ValueError, match="human_seat"):
        play(True, agents_for(1), inp=io.StringIO(""), out=io.StringIO())  # type: ignore[arg-type]


def test_an_ascii_terminal_and_stray_bytes_give_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from butifarra.cli import main; sys.exit(main())",
         "play", "--seed", "4", "--dealer", "0", "--opponents", "random"],
        input=b"\xff\xfe\n\xc3\n" + script("oros").encode(), capture_output=True, cwd=REPO,
        timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr and b"Hand over:" in proc.stdout


# --------------------------------------------------------------------------- variants
VARIANTS = Options(obligada=True, linear_doubling=True, butifarra_max_doubling_level=2)


def test_under_obligada_the_lowest_card_of_the_led_suit_is_explained() -> None:
    """A position (found by random play) where the mover follows suit under an opponent's
    card it cannot beat: the other cards of the suit are refused, naming the lowest one."""
    for seed in range(60):
        rng = np.random.default_rng(seed)
        game = Game(Options(obligada=True), 0, random_deal(rng, 0))
        while not game.is_over:
            seat = game.to_move
            led = game.led_suit if game.cards_in_trick else None
            follow = game.hands[seat] & SUIT_MASK[led] if led is not None else 0
            if follow.bit_count() > 1 and game.legal == lowest_card(follow):
                low = game.legal.bit_length() - 1
                other = max(cards_of(follow & ~game.legal))
                action, why = parse_choice(game, seat, card_name(other))
                assert action is None
                forced = "under obligada you must play your lowest card of the led suit"
                assert f"{forced}, {card_name(low)}" in why
                assert why.endswith(f"legal now: {card_name(low)}")
                return
            legal = cards_of(game.legal)
            game.step(legal[int(rng.integers(len(legal)))])
    raise AssertionError("no forced obligada play in 60 random hands")


def test_the_contract_and_the_help_say_the_variants() -> None:
    game = fresh_game(options=VARIANTS)
    rules = "rules: obligada, linear doubling, butifarra: no Sant Vicenç"
    assert contract_text(game) == f"trump not chosen yet ({rules})"
    game.step(TRUMP_BASE)  # oros
    game.step(DOUBLE)
    game.step(DOUBLE)  # recontrar: x3 with linear doubling
    assert contract_text(game).endswith(
        f"recontrar, multiplier x3 (1 x 3, linear doubling); {rules}"
    )
    help_lines = help_text(VARIANTS)
    assert "play your lowest card of the led suit" in help_lines
    assert "x1 x2 x3 x4 x5" in help_lines and "at most recontrar" in help_lines
    assert help_text(Options()) == HELP
    assert "rules" not in contract_text(fresh_game())


def test_butifarra_play_command_with_variant_flags(tmp_path: Path) -> None:
    save = tmp_path / "rec.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from butifarra.cli import main; sys.exit(main())",
         "play", "--seed", "4", "--dealer", "0", "--opponents", "random", "--save", str(save),
         "--obligada", "--linear-doubling", "--butifarra-max-doubling", "2"],
        input=script("oros"), capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Variants: obligada, linear doubling, butifarra: no Sant Vicenç" in proc.stdout
    (record,) = load_records(save)
    assert Options.from_dict(record["options"]) == VARIANTS
    assert replay(record).game.options == VARIANTS
    bad = subprocess.run(
        [sys.executable, "-c", "import sys; from butifarra.cli import main; sys.exit(main())",
         "play", "--butifarra-max-doubling", "5"],
        input="", capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert (
        bad.returncode == 2
        and "--butifarra-max-doubling: expected an integer from 0 to 4" in bad.stderr
    )


def test_an_agent_that_cannot_play_a_variant_refuses_before_the_first_hand() -> None:
    class DefaultRulesOnly(RandomAgent):
        supported_variants = frozenset()

    agents: dict[int, Agent] = {1: DefaultRulesOnly(1), 2: RuleBasedAgent(), 3: RandomAgent(3)}
    out = io.StringIO()
    with pytest.raises(UnsupportedVariant, match="agent 'random' cannot play obligada"):
        play(0, agents, options=Options(obligada=True), inp=io.StringIO(""), out=out)
    assert out.getvalue() == ""  # refused before anything was dealt or said
