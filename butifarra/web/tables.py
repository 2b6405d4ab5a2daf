"""One browser's table: a person at one seat, registry agents at the others.

A :class:`Table` plays :class:`~butifarra_env.core.game.Game` hands (and a
:class:`~butifarra_env.core.rules.Match` to 101 in match mode) at the table driver
(:class:`agents.table.Table`), as terminal play does: the bots act from their own observation
and the legal-action mask, the person's seat waits for the next request. Nothing here decides
what is legal: the engine's ``Game.legal`` does. Moves are worded by
:mod:`butifarra_env.core.narration`.

What goes to the browser is :meth:`Table.view`: the person's own hand, the public table
and the person's legal actions, never another seat's cards (the hands are only public once
every card has been played, i.e. never during a hand).

Deals come from a :class:`DealSource`. By default it holds a per-server secret
(``secrets.token_bytes``) that is mixed with the table's number and the deal's number, so no
one outside the server can compute a hand, and no two tables share one. With a fixed seed
(``butifarra serve --seed``, for reproducible testing) deal *d* is :func:`deal_for` ``(seed,
d)`` at every table. Either way the page is never sent the secret, the seed or anything
else that determines the hidden hands; a finished hand's record carries its own
``deal_seed`` (:func:`deal_cards` reproduces that hand, and only that one). The agents are
reseeded per deal from the same numbers. In duplicate mode the chosen bot plays the
person's seat on the same deal, against the same partner and opponents (fresh agents, same
seeds), and the page gets the difference.

The regional variants of RULES.md (obligada, linear doubling, a doubling cap in butifarra)
are chosen with the setup (:func:`parse_setup`, checked by
:class:`~butifarra_env.core.options.Options`), told to every agent when the table is made
(:meth:`~agents.base.Agent.set_options`: one that cannot play them refuses then, before any
card is dealt) and shown with the contract (:func:`~butifarra.web.replay.contract_state`).
"""

from __future__ import annotations

import copy
import hashlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.base import Agent
from agents.evaluation.stats import mean_ci
from agents.table import Table as DriverTable
from agents.table import table_record
from butifarra.web.replay import contract_state
from butifarra_env.core.actions import DOUBLING_NAMES, N_ACTIONS
from butifarra_env.core.cards import N_CARDS, POINTS, cards_of, sort_key
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.game import Game
from butifarra_env.core.narration import narrate
from butifarra_env.core.options import VARIANT_DEFAULTS, Options
from butifarra_env.core.rules import (
    N_SEATS,
    NO_TRUMP,
    PHASE_DOUBLING,
    PHASE_NAMES,
    Match,
    draw_dealer,
    multiplier,
    random_deal,
)
from butifarra_env.core.validate import check_int, is_int
from butifarra_env.records import append_records, check_record_file

MODES = ("hand", "match", "duplicate")
"""``hand``: independent hands; ``match``: hands to :data:`MATCH_TARGET`; ``duplicate``:
independent hands, each also played by a bot from the person's seat."""
MATCH_TARGET = 101
MAX_SEED = 2**63 - 1
MAX_DELTAS_SHOWN = 200
"""The per-deal differences sent to the page (the mean and CI cover all of them)."""

AgentMaker = Callable[[str, int | None], Agent]


class Conflict(ValueError):
    """A well-formed request that does not fit the position (not your turn, illegal card,
    stale page): HTTP 409."""


# --------------------------------------------------------------------------- setup
@dataclass(frozen=True)
class TableSetup:
    """Who sits where and what is played; checked by :func:`parse_setup`."""

    mode: str
    seat: int
    partner: str
    opponents: tuple[str, str]  # (the seat after the person's, the seat before it)
    bot: str  # duplicate mode: the agent that plays the person's seat on the same deal
    seed: int | None
    """Fixed deals (:func:`deal_for`), or None: deals from a secret (:class:`DealSource`)."""
    variants: Options = Options()
    """The regional variants chosen (only those fields of it count: the mode sets the
    target)."""

    def options(self) -> Options:
        """The options of every hand at this table: the variants, and the match target in
        match mode."""
        target = MATCH_TARGET if self.mode == "match" else None
        chosen = {k: getattr(self.variants, k) for k in VARIANT_DEFAULTS}
        return Options(target_score=target, **chosen)

    def bot_specs(self) -> dict[int, str]:
        """The agent spec of each seat but the person's."""
        me = self.seat
        right, partner, left = (me + 1) % 4, (me + 2) % 4, (me + 3) % 4
        return {right: self.opponents[0], partner: self.partner, left: self.opponents[1]}

    def to_dict(self) -> dict[str, Any]:
        """The setup as the page sees it: who sits where, never the deals' seed."""
        return {
            "mode": self.mode,
            "seat": self.seat,
            "partner": self.partner,
            "opponents": list(self.opponents),
            "bot": self.bot,
            "variants": {k: getattr(self.variants, k) for k in VARIANT_DEFAULTS},
        }


_SETUP_KEYS = {"mode", "seat", "partner", "opponents", "bot", "seed", *VARIANT_DEFAULTS}


def parse_setup(
    data: object,
    allowed_agents: Sequence[str],
    default_seed: int | None,
    *,
    seed_allowed: bool = True,
) -> TableSetup:
    """A :class:`TableSetup` from a request body; ValueError naming the field otherwise.

    Agents are limited to ``allowed_agents`` (the server's list): a browser never names a
    file to load. With ``seed_allowed=False`` (the web server) a ``"seed"`` field is refused:
    whoever chooses the seed knows every hand. The variants (``"obligada"``,
    ``"linear_doubling"``: true or false; ``"butifarra_max_doubling_level"``: 0-4 or null)
    are checked by :class:`~butifarra_env.core.options.Options`, the one options layer.
    """
    if not isinstance(data, dict):
        raise ValueError(f"the game setup must be a JSON object, got {type(data).__name__}")
    unknown = set(data) - _SETUP_KEYS
    if unknown:
        raise ValueError(
            f"unknown setup field(s) {sorted(unknown)}; allowed: {sorted(_SETUP_KEYS)}"
        )
    mode = data.get("mode", "hand")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    seat = check_int("seat", data.get("seat", 0), 0, N_SEATS - 1)
    default = "rule" if "rule" in allowed_agents else allowed_agents[0]

    def agent(name: str, value: object) -> str:
        if value not in allowed_agents:
            raise ValueError(f"{name} must be one of {list(allowed_agents)}, got {value!r}")
        return str(value)

    partner = agent("partner", data.get("partner", default))
    opponents = data.get("opponents", [default, default])
    if not isinstance(opponents, list) or len(opponents) != 2:
        raise ValueError(f"opponents must be a list of two agents, got {opponents!r:.80}")
    opp = (agent("opponents[0]", opponents[0]), agent("opponents[1]", opponents[1]))
    bot = agent("bot", data.get("bot", default))
    seed = data.get("seed")
    if seed is not None and not seed_allowed:
        raise ValueError(
            "seed: a page cannot choose the deals (whoever knows the seed knows every hand); "
            "the server deals from its own secret, or from `butifarra serve --seed N`"
        )
    seed = default_seed if seed is None else check_int("seed", seed, 0, MAX_SEED)
    variants = Options(**{k: data[k] for k in VARIANT_DEFAULTS if k in data})
    return TableSetup(mode, seat, partner, opp, bot, seed, variants)


DealSeed = list[int]
"""A deal's seed: the entropy of a :class:`numpy.random.SeedSequence` (JSON: a list of ints)."""


def deal_cards(deal_seed: Sequence[int], dealer: int | None = None) -> tuple[int, list[int]]:
    """The deal of ``deal_seed``: the dealer (drawn, unless a match fixes it) and the four
    hands (bitmasks). The dealer is drawn either way, so the cards depend on the seed alone:
    ``deal_cards(record["deal_seed"], record["dealer"])`` gives a web record's hands."""
    rng = np.random.default_rng([int(x) for x in deal_seed])
    drawn = draw_dealer(rng, None)
    dealer = drawn if dealer is None else dealer
    return dealer, random_deal(rng, dealer)


def deal_for(seed: int, deal: int, dealer: int | None = None) -> tuple[int, list[int]]:
    """Deal number ``deal`` of a fixed ``seed`` (``butifarra serve --seed``): the deal of
    seed ``[seed, deal]`` (:func:`deal_cards`)."""
    return deal_cards([seed, deal], dealer)


def agent_seed(seed: int, deal: int, seat: int) -> int:
    """The seed an agent at ``seat`` is reset with for deal ``deal`` of a fixed ``seed``."""
    return agent_seed_for([seed, deal], seat)


def agent_seed_for(deal_seed: Sequence[int], seat: int) -> int:
    """The seed an agent at ``seat`` is reset with for the deal of ``deal_seed`` (both tables
    of a duplicate deal use the same one)."""
    entropy = [int(x) for x in deal_seed] + [seat, 1]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


class DealSource:
    """Where a server's deals come from.

    ``DealSource()`` holds a secret of its own (32 bytes of ``secrets.token_bytes``, never
    written or sent anywhere): the seed of table ``t``'s deal ``d`` is a keyed BLAKE2b hash of
    ``(t, d)``, a 128-bit number no one without the secret can compute or invert, different
    for every table. ``DealSource(seed)`` gives the fixed deals of :func:`deal_for`, the same
    at every table (reproducible testing: whoever knows the seed knows every hand).
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = None if seed is None else check_int("seed", seed, 0, MAX_SEED)
        self._secret = secrets.token_bytes(32) if seed is None else b""

    @property
    def fixed(self) -> bool:
        """True when the deals come from a known seed rather than the secret."""
        return self.seed is not None

    def deal_seed(self, table: int, deal: int) -> DealSeed:
        """The seed of deal ``deal`` at table number ``table``."""
        if self.seed is not None:
            return [self.seed, deal]
        message = f"butifarra web deal: table {table}, deal {deal}".encode()
        digest = hashlib.blake2b(message, key=self._secret, digest_size=16).digest()
        return [int.from_bytes(digest, "big")]

    def __repr__(self) -> str:  # never the secret
        return f"DealSource(seed={self.seed})" if self.fixed else "DealSource(<secret>)"


class AgentPool:
    """Agents by spec, each built once (a PPO checkpoint loads in seconds) and handed out as
    copies: every table gets agents of its own, reseeded per deal before they act."""

    def __init__(self, specs: Sequence[str], make: AgentMaker) -> None:
        self.make = make
        self.prototypes = {spec: make(spec, 0) for spec in specs}  # ValueError: unusable spec

    def __call__(self, spec: str, seed: int | None) -> Agent:
        prototype = self.prototypes.get(spec)
        if prototype is None:
            raise ValueError(f"agent {spec!r} is not offered; offered: {list(self.prototypes)}")
        try:
            agent = copy.deepcopy(prototype)
        except Exception:  # an agent that cannot be copied is built afresh
            return self.make(spec, seed)
        agent.reset(seed)
        return agent


# --------------------------------------------------------------------------- records
class RecordLog:
    """The server's JSON Lines file of hands: checked at start, only ever appended to."""

    def __init__(self, path: str) -> None:
        self.path = check_record_file(path)
        self.lock = threading.Lock()
        self.written = 0

    def append(self, records: Sequence[dict[str, Any]]) -> None:
        with self.lock:
            self.written += append_records(self.path, records)


# --------------------------------------------------------------------------- text
def public_state(game: Game) -> dict[str, Any]:
    """Everything about ``game`` that every seat may see (no hands)."""
    trick = [c if c >= 0 else None for c in game.trick_cards]
    return {
        "phase": PHASE_NAMES[game.phase],
        "to_move": game.to_move,
        "dealer": game.dealer,
        **contract_state(game),
        "counts": [bin(h).count("1") for h in game.hands],
        "trick": trick,
        "trick_leader": game.trick_leader if game.trick_leader >= 0 else None,
        "n_actions": len(game.actions),
    }


def _trick_summary(trick: tuple[int, tuple[int, ...], int]) -> dict[str, Any]:
    leader, cards, winner = trick
    return {
        "leader": leader,
        "cards": list(cards),
        "winner": winner,
        "points": sum(POINTS[c] for c in cards) + 1,
    }


# --------------------------------------------------------------------------- hands
class _Hand:
    """One hand at the table driver (:class:`agents.table.Table`: the bots move from their
    own observation and mask, every move is checked by the engine, each bot decision's
    probabilities are kept) and whether it has been booked."""

    def __init__(self, game: Game, agents: dict[int, Agent], label: str) -> None:
        self.game = game
        self.agents = [agents.get(s) for s in range(N_SEATS)]  # the person's seat: None
        self.table = DriverTable([s if s in agents else None for s in range(N_SEATS)], label)
        self.table.start(game, self.agents)  # each agent is told the options
        self.booked = False  # the finished hand has been scored and saved

    def bot_moves(self) -> Iterator[tuple[int, int]]:
        """The bots' moves, ``(seat, action)`` one by one, until the person's turn or the end
        (a probability display is never worth losing the hand over: a failing one is None)."""
        return self.table.moves(self.agents, log_probs=True, probs_errors="ignore")

    def record(self, extra: dict[str, Any]) -> dict[str, Any]:
        probs = self.table.probs
        return table_record(self.game, extra, probs if any(p is not None for p in probs) else None)


# --------------------------------------------------------------------------- table
class Table:
    """A person's table: hands one after another, with the view and moves the page uses.

    Not thread-safe by itself: the server holds :attr:`lock` around every call.
    """

    def __init__(
        self,
        setup: TableSetup,
        make_agent: AgentMaker,
        records: RecordLog | None = None,
        table_id: str | None = None,
        *,
        deals: DealSource | None = None,
        number: int = 0,
    ) -> None:
        self.setup = setup
        self.records = records
        self.table_id = table_id or secrets.token_hex(6)
        """A public label written in the records (not the browser's secret id)."""
        self.deals = deals if deals is not None else DealSource(setup.seed)
        """The deals (the server's, shared by its tables; else the setup's seed or a secret)."""
        self.number = number
        """The table's number at its server (mixed into its deals' seeds)."""
        self.deal_seed: DealSeed = []
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        specs = setup.bot_specs()
        base = setup.seed or 0
        self.agents = {s: make_agent(spec, base + s) for s, spec in specs.items()}
        self.players = ["human" if s == setup.seat else specs[s] for s in range(N_SEATS)]
        self.shadow_agents: dict[int, Agent] = {}
        if setup.mode == "duplicate":
            shadow = {**specs, setup.seat: setup.bot}
            self.shadow_agents = {s: make_agent(sp, base + s) for s, sp in shadow.items()}
        self.options = setup.options()
        for agent in [*self.agents.values(), *self.shadow_agents.values()]:
            agent.set_options(self.options)  # UnsupportedVariant: refused before any deal
        self.deal = -1
        self.match: Match | None = None
        self.deltas: list[int] = []
        self.last_duplicate: dict[str, Any] | None = None
        self.saved = 0
        self.log: list[dict[str, Any]] = []
        self.hand = self._new_hand()
        self.opening = self.advance()
        """The bots' moves before the person's first turn, for the page to show."""

    # ------------------------------------------------------------ hands
    def _new_hand(self) -> _Hand:
        self.deal += 1
        self.deal_seed = self.deals.deal_seed(self.number, self.deal)
        dealer, hands = deal_cards(self.deal_seed)
        hand_number, match_scores = 0, (0, 0)
        if self.setup.mode == "match":
            if self.match is None or self.match.winner is not None:
                self.match = Match(MATCH_TARGET, dealer)
            dealer, hands = deal_cards(self.deal_seed, self.match.dealer)
            hand_number, match_scores = self.match.hand_number, self.match.scores
        game = Game(self.options, dealer, hands, hand_number, match_scores)
        for s, agent in self.agents.items():
            agent.reset(agent_seed_for(self.deal_seed, s))
        self.log = []
        return _Hand(game, dict(self.agents), self._label())

    def _label(self) -> str:
        return f"web table {self.table_id}, deal {self.deal}"

    def advance(self) -> list[dict[str, Any]]:
        """Let the bots move until it is the person's turn or the hand is over; the moves,
        each with the public state after it, for the page to show one by one."""
        events = []
        game = self.hand.game
        for seat, action in self.hand.bot_moves():
            events.append(self._event(seat, action))
        if game.is_over and not self.hand.booked:
            self._finish_hand()
        return events

    def _event(self, seat: int, action: int) -> dict[str, Any]:
        game = self.hand.game
        event: dict[str, Any] = {
            "seat": seat,
            "action": action,
            "text": narrate(game, action),
            "state": public_state(game),
            "trick_done": None,
        }
        if action < N_CARDS and game.cards_in_trick == 0:  # this card closed a trick
            done = _trick_summary(game.tricks[-1])
            event["trick_done"] = done
            event["state"]["trick"] = done["cards"]  # keep the four cards on the table
            event["state"]["trick_leader"] = done["leader"]
        self.log.append({"seat": seat, "action": action, "text": event["text"]})
        return event

    def _finish_hand(self) -> None:
        """Book the finished hand: the match score, the duplicate bot's hand, the records."""
        hand = self.hand
        hand.booked = True
        game = hand.game
        scores = game.scores or (0, 0)
        setup = self.setup
        extra = {
            "players": list(self.players),
            "seed": self.deals.seed,
            "deal": self.deal,
            "deal_seed": list(self.deal_seed),
            "source": "web",
            "mode": setup.mode,
            "table": self.table_id,
            "human_seat": setup.seat,
        }
        records = [hand.record(extra)]
        if self.match is not None:
            self.match.add_hand(scores)
        if setup.mode == "duplicate":
            shadow = self._play_shadow(game)
            me = setup.seat
            human, bot = (game.rewards or (0,) * 4)[me], (shadow.game.rewards or (0,) * 4)[me]
            self.deltas.append(human - bot)
            self.last_duplicate = {
                "deal": self.deal,
                "human": human,
                "bot": bot,
                "delta": human - bot,
                "bot_result": shadow.game.result(),
            }
            players = list(self.players)
            players[me] = setup.bot
            records.append(
                shadow.record({**extra, "players": players, "human_seat": None, "role": "bot"})
            )
            records[0]["role"] = "human"
        if self.records is not None:
            self.records.append(records)
            self.saved += len(records)

    def _play_shadow(self, game: Game) -> _Hand:
        """The same deal, the bot in the person's seat, everyone else as before."""
        twin = Game(self.options, game.dealer, list(game.initial_hands))
        for s, agent in self.shadow_agents.items():
            agent.reset(agent_seed_for(self.deal_seed, s))
        shadow = _Hand(twin, dict(self.shadow_agents), f"{self._label()} (the bot's hand)")
        for _ in shadow.bot_moves():  # every seat is a bot: the hand is played out
            pass
        return shadow

    def deal_in_play(self) -> tuple[int, ...] | None:
        """The four hands (bitmasks) of the deal being played here, None between hands."""
        game = self.hand.game
        return None if game.is_over else tuple(game.initial_hands)

    # ------------------------------------------------------------ requests
    def act(self, action: object, at: object) -> dict[str, Any]:
        """The person's move. ``at`` is the number of moves the page has seen in this hand
        (a stale page or a double click is refused rather than played twice)."""
        if not is_int(action) or not 0 <= action < N_ACTIONS:  # type: ignore[operator]
            raise ValueError(
                f"action must be an int action id 0-{N_ACTIONS - 1}, got {action!r:.40}"
            )
        if at is not None and not is_int(at):
            raise ValueError(f"at must be an int (the moves seen so far), got {at!r:.40}")
        game = self.hand.game
        if at is not None and at != len(game.actions):
            raise Conflict(
                f"the page is out of date: it saw {at} moves, the hand has {len(game.actions)}; "
                "reload to continue"
            )
        if game.is_over:
            raise Conflict("the hand is over; ask for the next hand")
        if game.to_move != self.setup.seat:
            raise Conflict(f"it is seat {game.to_move}'s turn, not yours")
        seat = game.to_move
        try:
            played = self.hand.table.outside_move(action)
        except IllegalActionError as e:  # the engine's message: the move, the legal ones
            raise Conflict(str(e)) from None
        events = [self._event(seat, played)]
        events += self.advance()
        return {"events": events, "view": self.view()}

    def next_hand(self) -> dict[str, Any]:
        """Deal the next hand (a new match after a finished one)."""
        if not self.hand.game.is_over:
            raise Conflict("the hand is still being played")
        self.hand = self._new_hand()
        events = self.advance()
        return {"events": events, "view": self.view()}

    def view(self) -> dict[str, Any]:
        """What the person may see now (their hand, the public table, their legal moves)."""
        game = self.hand.game
        me = self.setup.seat
        view = public_state(game)
        my_turn = game.to_move == me and not game.is_over
        view.update(
            {
                "setup": self.setup.to_dict(),
                "players": list(self.players),
                "deal": self.deal,
                "hand_number": game.hand_number,
                "match_scores": list(game.match_scores),
                "target": self.options.target_score,
                "hand": sorted(cards_of(game.hands[me]), key=sort_key),
                "legal": game.legal_actions() if my_turn else [],
                "next_double": (
                    DOUBLING_NAMES[game.level + 1] if game.level + 1 < len(DOUBLING_NAMES) else None
                ),
                "butifarra_multiplier": multiplier(NO_TRUMP, 0, game.options.butifarra_base),
                "next_multiplier": (  # what a double would make it
                    game.options.multiplier(game.trump, game.level + 1)
                    if game.phase == PHASE_DOUBLING
                    else None
                ),
                "tricks": [_trick_summary(t) for t in game.tricks],
                "log": self.log[-80:],
                "over": game.is_over,
                "result": game.result(),
                "saved": self.saved,
                "duplicate": self._duplicate_view(),
                "match": self._match_view(),
            }
        )
        return view

    def _match_view(self) -> dict[str, Any] | None:
        if self.match is None:
            return None
        return {
            "scores": list(self.match.scores),
            "target": MATCH_TARGET,
            "winner": self.match.winner,
        }

    def _duplicate_view(self) -> dict[str, Any] | None:
        if self.setup.mode != "duplicate":
            return None
        mean, lo, hi = mean_ci(np.asarray(self.deltas, dtype=np.float64))
        return {
            "bot": self.setup.bot,
            "n": len(self.deltas),
            "deltas": self.deltas[-MAX_DELTAS_SHOWN:],
            "mean": None if np.isnan(mean) else round(mean, 3),
            "lo": None if np.isnan(lo) else round(lo, 3),
            "hi": None if np.isnan(hi) else round(hi, 3),
            "last": self.last_duplicate,
        }


__all__ = [
    "MATCH_TARGET",
    "MODES",
    "AgentPool",
    "Conflict",
    "DealSource",
    "RecordLog",
    "Table",
    "TableSetup",
    "agent_seed",
    "agent_seed_for",
    "deal_cards",
    "deal_for",
    "parse_setup",
    "public_state",
]
