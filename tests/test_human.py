"""Terminal play: parsing, explanations of illegal choices, whole scripted hands, leaving."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from agents import RandomAgent, RuleBasedAgent
from butifarra.play import explain_illegal_card, parse_choice, play, render_view
from butifarra_env.actions import BUTIFARRA, DELEGATE, DOUBLE, PASS, TRUMP_BASE
from butifarra_env.cards import parse_card
from butifarra_env.game import Game
from butifarra_env.options import Options
from butifarra_env.record import load_records, replay
from butifarra_env.rules import NO_TRUMP, random_deal
from tests.helpers import play_position

REPO = Path(__file__).resolve().parents[1]

# Answers that eventually fit any prompt: bidding words, then every card index in turn
# (illegal ones are explained and asked again, so each turn ends on a legal card).
CYCLE = "\n".join(str(k) for k in range(1, 13)) + "\n"


def script(*first: str, cycles: int = 40) -> str:
    return "".join(line + "\n" for line in first) + CYCLE * cycles


def agents_for(seat: int) -> dict[int, object]:
    return {s: (RuleBasedAgent() if s % 2 == seat % 2 else RandomAgent(s)) for s in range(4)
            if s != seat}  # fmt: skip


def fresh_game(dealer: int = 0) -> Game:
    import numpy as np

    return Game(Options(), dealer, random_deal(np.random.default_rng(1), dealer))


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
