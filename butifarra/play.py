"""Play Butifarra in the terminal: one person at one seat, agents at the other three.

The person sees only their own seat's information: their hand (sorted by suit, legal
cards marked and numbered), the trick as it forms, trump, doubling, multiplier and
points. They answer with a card name (``9o``, ``1c``, ``rey de bastos``) or the card's
number in the listing, and with words in the bidding (``oros``, ``butifarra``,
``delegar``, ``contrar``/``double``, ``pass``/``bé``). Anything unreadable or illegal is
explained and asked again; end of input or Ctrl-C leaves cleanly. The hand runs on the
table driver (:class:`agents.table.Table`, the person's seat played from outside) and every
move is said in the words of :mod:`butifarra_env.core.narration`.

Input and output are plain text streams so tests can drive a whole hand with scripted
lines (``play(..., inp=io.StringIO(...), out=io.StringIO())``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from agents.base import Agent
from agents.table import AgentError, Table, table_record
from butifarra.arguments import multiplier_text, variant_labels
from butifarra_env.core.actions import (
    BUTIFARRA,
    DELEGATE,
    DOUBLE,
    DOUBLING_NAMES,
    PASS,
    TRUMP_BASE,
)
from butifarra_env.core.cards import (
    N_CARDS,
    POINTS,
    SUIT,
    SUIT_MASK,
    SUIT_NAMES,
    card_long_name,
    card_name,
    cards_of,
    parse_card,
    sort_key,
)
from butifarra_env.core.game import Game
from butifarra_env.core.narration import narrate
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_PLAY,
    TRUMP_UNSET,
    Match,
    draw_dealer,
    legal_card_rule,
    lowest_card,
    multiplier,
    random_deal,
)
from butifarra_env.core.validate import check_int
from butifarra_env.records import append_records, check_record_file, save_records

EXIT_INTERRUPTED = 130
EXIT_AGENT_FAILED = 1
UNREACHABLE_TARGET = sys.maxsize
"""The match target when the options set none: the hands then go on until ``n_hands``."""

_TRUMP_WORDS = {
    "oros": 0, "oro": 0, "ors": 0, "o": 0,
    "copas": 1, "copa": 1, "copes": 1, "c": 1,
    "espadas": 2, "espada": 2, "espases": 2, "e": 2,
    "bastos": 3, "basto": 3, "b": 3,
}  # fmt: skip
_BUTIFARRA_WORDS = {"butifarra", "butifarra!", "no trump", "notrump", "nt", "sin triunfo"}
_DELEGATE_WORDS = {"delegar", "delegate", "delego", "delega", "d", "partner"}
_DOUBLE_WORDS = {
    "double", "doblar", "doblo", "contrar", "contro", "contra", "redoble", "redoblar",
    "recontrar", "recontro", "sant vicenç", "sant vicens", "san vicente", "verraca",
    "barraca", "x", "raise",
}  # fmt: skip
_PASS_WORDS = {"pass", "paso", "passo", "bé", "be", "bien", "p", "no", "n"}
_QUIT_WORDS = {"quit", "exit", "q", "salir", "sortir"}
_HELP_WORDS = {"help", "?", "h", "ayuda", "ajuda"}


class QuitGame(Exception):
    """The person asked to leave (or the input ended)."""


class Console:
    """Line-based text input/output (a terminal, or string streams in tests)."""

    def __init__(self, inp: TextIO, out: TextIO) -> None:
        self.inp = inp
        self.out = out

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def ask(self, prompt: str) -> str:
        """One line of input; end of input means the person has gone (QuitGame)."""
        self.out.write(prompt)
        self.out.flush()
        line = self.inp.readline()
        if not line:
            raise QuitGame
        return line


def _normalise(text: str) -> str:
    """Lower-case, trimmed, single-spaced (accents kept: 'bé' and 'be' are both listed)."""
    return " ".join(unicodedata.normalize("NFC", text).strip().lower().split())


def seat_label(seat: int, me: int) -> str:
    """How the person sees another seat: 'you', 'partner', 'right' (next) or 'left'."""
    rel = (seat - me) % 4
    return ("you", "right opponent", "partner", "left opponent")[rel] + f" (seat {seat})"


def rules_text(options: Options) -> str:
    """The variants played, for the contract line ("" for the rules of RULES.md)."""
    labels = variant_labels(options)
    return f"rules: {', '.join(labels)}" if labels else ""


def contract_text(game: Game) -> str:
    rules = rules_text(game.options)
    if game.trump == TRUMP_UNSET:
        return "trump not chosen yet" + (f" ({rules})" if rules else "")
    what = "butifarra (no trump)" if game.trump == NO_TRUMP else f"trump {SUIT_NAMES[game.trump]}"
    dbl = f", {DOUBLING_NAMES[game.level]}" if game.level else ""
    deleg = ", delegated" if game.delegated else ""
    mult = multiplier_text(game.options, game.trump, game.level)
    text = f"{what} (chosen by seat {game.chooser}{deleg}){dbl}, multiplier {mult}"
    return f"{text}; {rules}" if rules else text


def _tricks(n: int) -> str:
    return f"{n} trick" if n == 1 else f"{n} tricks"


def render_view(game: Game, seat: int) -> str:
    """What ``seat`` may see now: contract, points, the trick so far and the hand."""
    mine, theirs = seat & 1, 1 - (seat & 1)
    pts, tricks = game.team_points, game.team_tricks
    lines = [
        f"Dealer: {seat_label(game.dealer, seat)}.  {contract_text(game)}",
        f"Points: your team {pts[mine]} ({_tricks(tricks[mine])}), other team {pts[theirs]} "
        f"({_tricks(tricks[theirs])}); trick {len(game.tricks) + 1} of 12",
    ]
    if game.phase == PHASE_PLAY and game.trick_leader >= 0:
        played = []
        for k in range(4):
            s = (game.trick_leader + k) % 4
            c = game.trick_cards[s]
            if c < 0:
                break
            played.append(f"{seat_label(s, seat)}: {card_name(c)}")
        lines.append("On the table: " + ", ".join(played))
    elif game.phase == PHASE_PLAY:
        lines.append("You lead this trick." if game.to_move == seat else "The table is empty.")
    lines.append("Your hand (* = you may play it):")
    lines.extend(_hand_lines(game, seat))
    return "\n".join(lines)


def hand_order(game: Game, seat: int) -> list[int]:
    """The hand as listed to the person (suit order, strongest first): index i+1 = card i."""
    return sorted(cards_of(game.hands[seat]), key=sort_key)


def _hand_lines(game: Game, seat: int) -> list[str]:
    legal = game.legal if (game.phase == PHASE_PLAY and game.to_move == seat) else 0
    cards = hand_order(game, seat)
    out = []
    for s in range(4):
        items = [
            f"[{i + 1}] {card_name(c)}{'*' if (legal >> c) & 1 else ''}"
            for i, c in enumerate(cards)
            if SUIT[c] == s
        ]
        if items:
            out.append(f"  {SUIT_NAMES[s]:<8} " + "  ".join(items))
    return out


def explain_illegal_card(game: Game, seat: int, card: int) -> str:
    """Why ``card`` cannot be played now, in the words of the RULES.md legal-card rule
    (1-5, :func:`~butifarra_env.core.rules.legal_card_rule`) that decides this trick."""
    legal_txt = "legal now: " + " ".join(
        card_name(c) for c in sorted(cards_of(game.legal), key=sort_key)
    )
    hand = game.hands[seat]
    if not (hand >> card) & 1:
        return f"you do not hold {card_name(card)} ({card_long_name(card)}); {legal_txt}"
    led, win, trump = game.led_suit, game.win_card, game.trump
    rule = legal_card_rule(hand, led, win, game.partner_winning(seat), trump)
    if rule in (2, 3) and SUIT[card] != led:  # rules 2 and 3: follow suit when able
        return f"you must follow suit: {SUIT_NAMES[led]} was led and you hold some; {legal_txt}"
    if rule == 3 and game.options.obligada and not (game.legal >> card) & 1:
        lowest = lowest_card(hand & SUIT_MASK[led])
        if game.legal == lowest:  # nothing of the suit beats it: obligada forces the lowest
            low = lowest.bit_length() - 1
            return (
                f"an opponent is winning with {card_name(win)} and you cannot beat it: under "
                f"obligada you must play your lowest card of the led suit, {card_name(low)} "
                f"({card_long_name(low)}); {legal_txt}"
            )
    if rule == 3:  # a card of the led suit that does not beat the opponent's
        return (
            f"an opponent is winning with {card_name(win)}: you must beat it with a higher "
            f"{SUIT_NAMES[led][:-1]} when you can ('matar'); {legal_txt}"
        )
    if rule == 4 and SUIT[win] == trump:
        return (
            f"you have no {SUIT_NAMES[led]} and an opponent is winning with the trump "
            f"{card_name(win)}: you must over-trump when you can; {legal_txt}"
        )
    if rule == 4:
        return (
            f"you have no {SUIT_NAMES[led]} and an opponent is winning: you must "
            f"trump ({SUIT_NAMES[trump]}) when you can; {legal_txt}"
        )
    return f"{card_name(card)} is not legal now; {legal_txt}"  # rules 1 and 5 allow any card


ECHO_LIMIT = 40
"""How much of a line the person typed is quoted back in a message."""
NUMBER_DIGITS = 4
"""Longer numbers are beyond any list shown, and are not converted (a 5,000-digit line)."""


def _echo(text: str) -> str:
    """What the person typed, quoted (control characters escaped) and cut short."""
    t = text.strip()
    return repr(t if len(t) <= ECHO_LIMIT else t[: ECHO_LIMIT - 3] + "...")


def _short(number_text: str) -> str:
    """A typed number as shown back: whole up to 8 digits, else its start and its length."""
    if len(number_text) <= 8:
        return number_text
    return f"{number_text[:5]}... ({len(number_text)} digits)"


def _typed_number(t: str) -> int | None:
    """The number in ``t`` (decimal digits of any script: '3', '٣', '３'), or None when it is
    not one ('²' is a superscript, not a digit here). A number too long to be any option
    reads as 10**NUMBER_DIGITS, beyond every list."""
    if not t.isdecimal():
        return None
    return int(t) if len(t) <= NUMBER_DIGITS else 10**NUMBER_DIGITS


def parse_choice(game: Game, seat: int, text: str) -> tuple[int | None, str]:
    """Read the person's answer for the current phase: (action, "") or (None, why not).

    Any text is answered, never raised on: unreadable input gets the reason and the forms
    accepted."""
    t = _normalise(text)
    phase = game.phase
    number = _typed_number(t)
    if phase != PHASE_PLAY:
        options = _bid_options(game)
        if number is not None:
            if 1 <= number <= len(options):
                return options[number - 1][0], ""
            return None, f"choose a number from 1 to {len(options)}, not {_short(t)}"
    if phase in (PHASE_CHOOSE_TRUMP, PHASE_CHOOSE_TRUMP_DELEGATED):
        if t in _TRUMP_WORDS:
            return TRUMP_BASE + _TRUMP_WORDS[t], ""
        if t in _BUTIFARRA_WORDS:
            return BUTIFARRA, ""
        if t in _DELEGATE_WORDS:
            if phase == PHASE_CHOOSE_TRUMP_DELEGATED:
                return None, "your partner delegated to you: you must choose, not delegate back"
            return DELEGATE, ""
        return None, f"not a choice: {_echo(text)}; say " + _options_text(options)
    if phase == PHASE_DOUBLING:
        if t in _DOUBLE_WORDS:
            return DOUBLE, ""
        if t in _PASS_WORDS:
            return PASS, ""
        return None, f"not a choice: {_echo(text)}; say " + _options_text(options)
    # card play
    cards = hand_order(game, seat)
    if number is not None:
        if not 1 <= number <= len(cards):
            return None, f"no card number {_short(t)}: your cards are numbered 1 to {len(cards)}"
        card = cards[number - 1]
    else:
        try:
            card = parse_card(t)
        except ValueError as e:
            why = str(e) if len(t) <= ECHO_LIMIT else f"not a card: {_echo(text)}"
            return None, f"{why}; or type the card's number from the list"
    if not (game.legal >> card) & 1:
        return None, explain_illegal_card(game, seat, card)
    return card, ""


def butifarra_multiplier(game: Game) -> int:
    """What butifarra multiplies the hand's score by before any doubling (the options'
    ``butifarra_base``: x2 by default, x1 in that variant)."""
    return multiplier(NO_TRUMP, 0, game.options.butifarra_base)


def _bid_options(game: Game) -> list[tuple[int, str]]:
    if game.phase == PHASE_DOUBLING:
        raise_name = DOUBLING_NAMES[game.level + 1]
        raised = multiplier_text(game.options, game.trump, game.level + 1)
        return [(DOUBLE, f"{raise_name} (double, {raised})"), (PASS, "pass (bé)")]
    choices = [(TRUMP_BASE + s, SUIT_NAMES[s]) for s in range(4)]
    choices.append((BUTIFARRA, f"butifarra (no trump, x{butifarra_multiplier(game)})"))
    if game.phase == PHASE_CHOOSE_TRUMP:
        choices.append((DELEGATE, "delegar (your partner chooses)"))
    return choices


def _options_text(options: list[tuple[int, str]]) -> str:
    return ", ".join(f"[{i + 1}] {name}" for i, (_, name) in enumerate(options))


def hand_record(game: Game, players: Sequence[str], seed: int | None) -> dict[str, Any]:
    """The hand's record (:func:`butifarra_env.records.files.game_record`, replayable with
    :func:`~butifarra_env.envs.replay.replay`) plus who sat where and the deal's seed."""
    return table_record(game, {"players": list(players), "seed": seed})


def append_record(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Add one record to a JSON Lines file, never rewriting what is there: a new file is
    created whole and atomically (:func:`~butifarra_env.records.files.save_records`), an existing
    one gets one line at its end (:func:`~butifarra_env.records.files.append_records`)."""
    try:
        save_records(path, [record])
    except FileExistsError:
        append_records(path, [record])


FALLBACK_MARK = ".unsaved-"
"""In the name of a file made when the file asked for could not be written."""


def new_file_near(path: str | os.PathLike[str]) -> Path:
    """A new, empty file named after ``path`` (``NAME.unsaved-XXXXXXXX.SUFFIX``) in the first
    folder that takes one: ``path``'s own, the current folder, the temp folder. It never
    replaces anything (:func:`tempfile.mkstemp`); OSError when no folder takes one."""
    path = Path(path)
    folders = [path.parent]
    with contextlib.suppress(OSError):  # the current folder may have been removed
        folders.append(Path.cwd())
    folders.append(Path(tempfile.gettempdir()))
    errors = []
    for folder in dict.fromkeys(folders):
        try:
            fd, name = tempfile.mkstemp(
                prefix=path.stem[:80] + FALLBACK_MARK, suffix=path.suffix[:20], dir=folder
            )
        except (OSError, ValueError) as e:
            errors.append(f"{folder}: {_reason(e)}")
            continue
        os.close(fd)
        return Path(name)
    raise OSError("no folder takes a new file (" + "; ".join(errors) + ")")


def _reason(error: BaseException) -> str:
    """An OSError as its plain reason ('No space left on device'), anything else as is."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


class RecordSaver:
    """Where ``--save`` puts each hand's record: the file asked for, and when writing it fails
    mid-game (disk full, folder removed, permissions changed, the file replaced), a new file
    beside it, in the current folder or the temp folder (:func:`new_file_near`), which the
    person is told about. A record is never dropped: if no file takes it, it is printed."""

    def __init__(self, path: str | os.PathLike[str], say: Callable[[str], None]) -> None:
        self.path = path
        self.say = say
        self.fallback: Path | None = None
        """The file records went to instead, once one was needed."""

    def save(self, record: dict[str, Any], what: str = "Record") -> Path | None:
        """Save ``record`` and say where; returns the file it went to (None: printed)."""
        try:
            append_record(self.path, record)
        except (OSError, ValueError) as e:
            problem = _reason(e)
        else:
            self.say(f"{what} saved to {self.path}")
            return Path(self.path)
        for _ in range(2):  # the fallback file of an earlier hand, else a new one
            try:
                if self.fallback is None:
                    self.fallback = new_file_near(self.path)
                append_records(self.fallback, [record])
            except (OSError, ValueError) as e:
                self.fallback, last = None, _reason(e)
                continue
            self.say(
                f"! Could not save to {self.path} ({problem}); {what.lower()} saved to "
                f"{self.fallback} instead"
            )
            return self.fallback
        self.say(
            f"! Could not save to {self.path} ({problem}) nor to a new file ({last}). "
            "Here is the record as one line of JSON; copy it to keep it:"
        )
        self.say(json.dumps(record, separators=(",", ":")))
        return None


HELP = """How to answer:
  cards:    9o  1c  12b  10e  'rey de bastos'  'manilla de oros'  or the number in [ ]
  trump:    oros copas espadas bastos | butifarra | delegar   (or the option number)
  doubling: contrar / double (raise the stake) | pass / bé
  help: this text   hand: show the table again   quit: leave"""

RULES_HELP = {
    "obligada": "obligada: when you follow suit under an opponent's card and cannot beat it, "
    "you must play your lowest card of the led suit",
    "linear doubling": "linear doubling: each raise multiplies by x1 x2 x3 x4 x5 along the "
    "chain (not x1 x2 x4 x8 x16)",
}
"""A line of :func:`help_text` per variant label that needs explaining."""


def help_text(options: Options) -> str:
    """:data:`HELP`, then the variants played and what they change (docs/RULES.md)."""
    lines = [HELP]
    labels = variant_labels(options)
    if labels:
        lines.append(f"  rules of this game: {', '.join(labels)}")
        for label in labels:
            cap = options.butifarra_max_doubling_level
            top = "no doubling" if cap == 0 else f"at most {DOUBLING_NAMES[cap or 0]}"
            lines.append("    " + RULES_HELP.get(label, f"{label}: a butifarra hand has {top}"))
    return "\n".join(lines)


def play(
    human_seat: int,
    agents: dict[int, Agent],
    seed: int = 0,
    dealer: int | None = None,
    n_hands: int = 1,
    save: str | os.PathLike[str] | None = None,
    options: Options | None = None,
    inp: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    """Run ``n_hands`` hands of a match (:class:`~butifarra_env.core.rules.Match`: dealer
    rotating, scores adding up) with a person at ``human_seat``. When ``options`` set a
    ``target_score``, the match also ends as soon as a team reaches it.

    Every argument is checked first (ValueError naming it), the ``save`` file too
    (:func:`~butifarra_env.records.files.check_record_file`), so a bad one fails before the first
    hand; so does an agent that cannot play the ``options``' variants
    (:class:`~agents.base.UnsupportedVariant`, from :meth:`~agents.base.Agent.set_options`).
    Each hand's record goes to ``save`` (:class:`RecordSaver`: elsewhere, said where, when
    that file fails mid-game); leaving mid-hand saves the hand so far.

    Returns the process exit status: 0 when the hands were played or the person left,
    130 after Ctrl-C, 1 when an agent failed.
    """
    human_seat = check_int("human_seat", human_seat, 0, 3)
    if not isinstance(agents, dict) or set(agents) != {0, 1, 2, 3} - {human_seat}:
        raise ValueError(
            f"agents must be a dict with one agent for each seat but the human's "
            f"({sorted({0, 1, 2, 3} - {human_seat})}), got {_keys(agents)}"
        )
    for s, agent in agents.items():
        if not isinstance(agent, Agent):
            raise ValueError(f"agents[{s}] must be an Agent, got {type(agent).__name__}")
    seed = check_int("seed", seed, 0)
    dealer = check_int("dealer", dealer, 0, 3, none_ok=True)
    n_hands = check_int("n_hands", n_hands, 1)
    if options is not None and not isinstance(options, Options):
        raise ValueError(f"options must be an Options or None, got {type(options).__name__}")
    if save is not None:
        if not isinstance(save, (str, os.PathLike)) or not str(save):
            raise ValueError(f"save must be a file name or None, got {save!r}")
        try:  # before the first hand: a bad path fails now, not after it
            check_record_file(save)
        except (OSError, ValueError) as e:
            raise ValueError(f"save: {_reason(e)}") from None
    options = options or Options()
    for agent in agents.values():  # an agent that cannot play the variants refuses now
        agent.set_options(options)
    console = Console(inp or _lenient(sys.stdin), out or _lenient(sys.stdout))
    say = console.say
    saver = None if save is None else RecordSaver(save, say)
    rng = np.random.default_rng(seed)
    drawn = draw_dealer(rng, None)  # drawn either way, so the cards depend on the seed alone
    match = Match(options.target_score or UNREACHABLE_TARGET, drawn if dealer is None else dealer)
    players = ["human" if s == human_seat else agents[s].name for s in range(4)]
    for s, agent in agents.items():
        agent.reset(seed * 4 + s)
    mine, theirs = human_seat & 1, 1 - (human_seat & 1)
    partner, right, left = (human_seat + 2) % 4, (human_seat + 1) % 4, (human_seat + 3) % 4
    game: Game | None = None
    table = Table([None if s == human_seat else s for s in range(4)])

    def save_unfinished() -> None:
        if (
            saver is not None
            and game is not None
            and not game.is_over
            and any(s == human_seat for s, _ in game.actions)  # the person's moves
        ):
            saver.save(hand_record(game, players, seed), "Unfinished hand")

    try:
        say(
            f"Butifarra: you are seat {human_seat}; your partner is seat {partner} "
            f"({players[partner]}); opponents: seat {right} ({players[right]}) and seat "
            f"{left} ({players[left]}). Type 'help' for how to answer."
        )
        say(f"Deal seed {seed} (--seed {seed} deals these cards again).")
        if variant_labels(options):
            labels = ", ".join(variant_labels(options))
            say(f"Variants: {labels} (type 'help' for what they change).")
        for _ in range(n_hands):
            hand_dealer = match.dealer
            game = Game(
                options,
                hand_dealer,
                random_deal(rng, hand_dealer),
                hand_number=match.hand_number,
                match_scores=match.scores,
            )
            say(
                f"\n=== Hand {match.hand_number + 1} of {n_hands} — dealer: "
                f"{seat_label(hand_dealer, human_seat)} ==="
            )
            _play_hand(game, human_seat, agents, table, console)
            scores = game.scores or (0, 0)
            match_goes_on = match.add_hand(scores)
            totals = match.scores
            say(
                f"Hand over: your team {game.team_points[mine]} points, other team "
                f"{game.team_points[theirs]}; {contract_text(game)}."
            )
            say(
                f"Score for this hand: your team {scores[mine]}, other team {scores[theirs]}. "
                f"Running total: your team {totals[mine]}, other team {totals[theirs]}."
            )
            if saver is not None:
                saver.save(hand_record(game, players, seed))
            if not match_goes_on:
                winner = "Your team" if match.winner == mine else "The other team"
                say(f"{winner} reached {match.target}: the match is over.")
                break
    except QuitGame:
        say("\nLeaving the table. Bye!")
        save_unfinished()
        return 0
    except KeyboardInterrupt:
        say("\nInterrupted. Bye!")
        save_unfinished()
        return EXIT_INTERRUPTED
    except AgentError as e:
        say(f"\n! {e}. The hand cannot go on.")
        save_unfinished()
        return EXIT_AGENT_FAILED
    return 0


def _keys(agents: object) -> str:
    if isinstance(agents, dict):
        return f"seats {sorted(agents, key=repr)}"
    return type(agents).__name__


def _lenient(stream: TextIO) -> TextIO:
    """The terminal's stream, made to replace what it cannot decode or encode (a stray byte
    typed, an ASCII-only terminal) instead of stopping the game with a traceback."""
    if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
        stream.reconfigure(errors="replace")
    return stream


def _play_hand(
    game: Game, human: int, agents: dict[int, Agent], table: Table, console: Console
) -> None:
    """The hand at the table driver: the agents move from their own observation, the
    person's seat waits for a line typed (:func:`_ask`); each move is said as it is made."""
    say = console.say
    roster = [agents.get(s) for s in range(4)]
    table.start(game, roster)  # the agents are told the options (a refusal: before any move)
    shown_hand = False

    def ask_person(_table: Table) -> int:
        nonlocal shown_hand
        if not shown_hand or game.phase == PHASE_PLAY:
            say("")
            say(render_view(game, human))
            shown_hand = True
        return _ask(game, human, console)

    for seat, action in table.moves(roster, outside=ask_person):
        who = "You" if seat == human else seat_label(seat, human).capitalize()
        say(f"{who}: {narrate(game, action)}")
        if action < N_CARDS and game.cards_in_trick == 0:  # this card closed a trick
            _leader, cards, winner = game.tricks[-1]
            points = sum(POINTS[c] for c in cards) + 1
            team = "your team" if (winner ^ human) & 1 == 0 else "the other team"
            say(
                f"  -> trick {len(game.tricks)} to {seat_label(winner, human)}: "
                f"{points} points for {team}"
            )


def _ask(game: Game, seat: int, console: Console) -> int:
    say = console.say
    if game.phase == PHASE_PLAY:
        prompt = "Your card (name like 9o / 'rey de bastos', or its number): "
    else:
        if game.phase == PHASE_DOUBLING:
            say(f"{contract_text(game)}. Do you raise?")
        elif game.phase == PHASE_CHOOSE_TRUMP_DELEGATED:
            say("Your partner delegated: you must choose.")
        else:
            say("You deal: choose trump.")
        prompt = _options_text(_bid_options(game)) + ": "
    while True:
        line = console.ask(prompt)
        t = _normalise(line)
        if not t:
            continue
        if t in _QUIT_WORDS:
            raise QuitGame
        if t in _HELP_WORDS:
            say(help_text(game.options))
            continue
        if t in ("hand", "show", "table"):
            say(render_view(game, seat))
            continue
        action, why = parse_choice(game, seat, line)
        if action is not None:
            return action
        say(f"  ! {why}")


__all__ = [
    "HELP",
    "contract_text",
    "help_text",
    "RecordSaver",
    "append_record",
    "butifarra_multiplier",
    "explain_illegal_card",
    "hand_record",
    "new_file_near",
    "parse_choice",
    "play",
    "render_view",
]
