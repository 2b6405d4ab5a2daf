"""Duplicate-deal arena: compare agents with the luck of the cards cancelled out.

Every deal is played twice, with the same cards at the same seats and the same dealer,
once with agent A's team at seats {0, 2} and once at seats {1, 3}. The per-deal mean of
A's team score difference (RULES.md rewards) is the unit of measurement, so the 95%
confidence interval is over independent deals.

Hands run on the table driver (:func:`agents.table.play_tables`: the reference engine,
many games in lockstep so that every agent is called with
:meth:`~agents.base.Agent.act_batch`, one network forward for a whole batch). Deals are cut
into fixed chunks; each chunk's deals and agent seeds derive from ``(seed, chunk)`` alone,
so results do not depend on the number of workers.

Python API: :func:`duel` -> :class:`DuelResult`, :func:`round_robin` ->
:class:`RoundRobinResult` (ratings: :mod:`agents.evaluation.ratings`); the CLI is
``butifarra arena`` (:mod:`butifarra.cli`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import multiprocessing as mp
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from agents.adapters import as_agent
from agents.base import Agent
from agents.evaluation.deal_sets import Deal
from agents.evaluation.ratings import openskill_model, openskill_ratings
from agents.evaluation.stats import mean_ci, t_quantile
from agents.evaluation.variance import (
    Coefficients,
    ReducedEstimate,
    deal_features,
    load_coefficients,
    reduce,
    table_corrections,
)
from agents.registry import make_agent
from agents.table import AgentError, Table, play_tables, table_record
from butifarra_env.core.cards import ALL_CARDS, N_CARDS, N_TRICKS, cards_of
from butifarra_env.core.fileio import atomic_write_text
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import PHASE_PLAY, Match, draw_dealer, random_deal
from butifarra_env.core.validate import check_deal, check_int, is_int
from butifarra_env.records import append_records, check_record_file

CHUNK_DEALS = 64
"""Deals per unit of work. Results depend on it (agent reseeding), never on ``workers``."""

HAND_FIELDS = (
    "deal",  # deal index (match index for the hands of matches)
    "swapped",  # 0: A's team sits at seats {0, 2}; 1: at seats {1, 3}
    "dealer",
    "trump",  # 0-3 suit, 4 butifarra
    "chooser_team",  # 0: A's team declared, 1: B's team
    "delegated",
    "doubling_level",
    "multiplier",
    "points_a",  # card points + tricks of A's team (0-72)
    "points_b",
    "score_a",  # RULES.md hand score of A's team
    "score_b",
)
"""Columns of :attr:`DuelResult.hands` (one row per hand played)."""
MATCH_HAND_FIELDS = (*HAND_FIELDS, "hand_number", "match_score_a", "match_score_b")
"""Columns of :attr:`MatchStats.hands`: :data:`HAND_FIELDS` (``deal`` is the match index)
plus the hand's number in its match and the match scores before it, from A's side."""

DealFn = Callable[[np.random.Generator], Deal]
"""``deal_fn(rng) -> (dealer, four hand bitmasks)``; must be a module-level function
(picklable) when ``workers > 1``."""


def uniform_deal(rng: np.random.Generator) -> tuple[int, list[int]]:
    """The default dealing: a uniform dealer and a uniformly shuffled deck."""
    dealer = draw_dealer(rng, None)
    return dealer, random_deal(rng, dealer)


# --------------------------------------------------------------------------- engine
class _Table(Table):
    """One seating of one deal (or match) at the table driver (:class:`agents.table.Table`),
    with what the arena keys its rows and records by."""

    __slots__ = ("key", "kind", "match")

    match: Match

    def __init__(
        self, seat_agent: tuple[int, int, int, int], key: tuple[int, int], kind: str = "deal"
    ) -> None:
        index, swapped = key
        seats = "1 and 3" if swapped else "0 and 2"
        super().__init__(seat_agent, f"{kind} {index} (agent A's team at seats {seats})")
        self.key = key  # (deal or match index, swapped)
        self.kind = kind  # "deal" or "match": what key[0] counts


def _seatings(swapped: int) -> tuple[int, int, int, int]:
    return (1, 0, 1, 0) if swapped else (0, 1, 0, 1)


def _hand_row(key: int, swapped: int, g: Game) -> list[int]:
    a_team = swapped  # A's team index: 0 (seats 0, 2) or 1 (seats 1, 3)
    b_team = 1 - a_team
    scores = g.scores or (0, 0)
    return [
        key,
        swapped,
        g.dealer,
        g.trump,
        0 if g.declaring_team == a_team else 1,
        int(g.delegated),
        g.level,
        g.multiplier,
        g.team_points[a_team],
        g.team_points[b_team],
        scores[a_team],
        scores[b_team],
    ]


def _match_hand_row(key: int, swapped: int, g: Game) -> list[int]:
    before = g.match_scores
    return [*_hand_row(key, swapped, g), g.hand_number, before[swapped], before[1 - swapped]]


def _chunk_seed(seed: int, kind: int, chunk: int, who: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([seed, kind, chunk, who])


def arena_deal(seed: int, index: int, deal_fn: DealFn = uniform_deal) -> Deal:
    """Deal ``index`` of an arena run with this seed and ``deal_fn`` (when no fixed deals
    are given): it comes from its own generator, so any deal can be made alone."""
    return deal_fn(np.random.default_rng(_chunk_seed(seed, 0, index, 0)))


LogNames = tuple[str, str] | None
"""The two sides' names when the chunk logs game records (None: no records)."""


def _hand_records(tables: list[_Table], names: tuple[str, str], seed: int) -> list[dict[str, Any]]:
    """Each hand the tables played as a game record (:func:`agents.table.table_record`,
    replayable) with who sat where, the deal (or match) index, the seating, the arena seed
    and ``probs``: one entry per action, aligned with ``actions``."""
    out = []
    for t in tables:
        players = [names[i] for i in t.seat_agent]  # type: ignore[index]
        for g, probs in zip(t.hands_done, t.probs_done, strict=True):
            extra = {"players": players, t.kind: t.key[0], "swapped": t.key[1], "seed": seed}
            out.append(table_record(g, extra, probs))
    return out


ChunkCV = tuple[np.ndarray, np.ndarray, int] | None
"""A chunk's variance-reduction data: per hand, the decision corrections from A's side
(:func:`agents.evaluation.variance.table_corrections`); per deal, the deal features; the
number of decisions corrected. None when not asked for."""


def _play_deal_chunk(
    agents: Sequence[Agent],
    seed: int,
    chunk: int,
    n_deals: int,
    deal_fn: DealFn,
    options: Options,
    log_names: LogNames = None,
    fixed: Sequence[Deal] | None = None,
    cv_offset: float | None = None,
    bidding_only: bool = False,
) -> tuple[np.ndarray, list[dict[str, Any]], ChunkCV]:
    """Play deals [chunk*CHUNK_DEALS, ...) twice each; one row per hand (HAND_FIELDS), and
    the hands' game records when ``log_names`` are given. ``fixed``: this chunk's deals, in
    order (instead of ``deal_fn``). ``cv_offset``: compute the variance-reduction data, with
    the value function's offset for A's team (None: do not). ``bidding_only``: stop each hand
    when the card play starts (its row then has the final trump, doubling and multiplier,
    and no points or scores)."""
    for i, agent in enumerate(agents):
        agent.reset(int(_chunk_seed(seed, 0, chunk, 1 + i).generate_state(1)[0]))
    first = chunk * CHUNK_DEALS
    indices = range(first, min(first + CHUNK_DEALS, n_deals))
    if fixed is not None:
        deals = {d: fixed[d - first] for d in indices}
    else:
        deals = {d: arena_deal(seed, d, deal_fn) for d in indices}
    tables = [_Table(_seatings(swapped), (d, swapped)) for d in deals for swapped in (0, 1)]

    def next_game(t: _Table) -> Game | None:
        if t.hands_done:  # one hand per table
            return None
        dealer, hands = deals[t.key[0]]
        return Game(options, dealer, list(hands))

    until = (lambda g: g.phase == PHASE_PLAY) if bidding_only else None
    play_tables(tables, agents, next_game, log_probs=log_names is not None, until=until)
    rows = [_hand_row(t.key[0], t.key[1], t.hands_done[0]) for t in tables]
    records = [] if log_names is None else _hand_records(tables, log_names, seed)
    cv: ChunkCV = None
    if cv_offset is not None:  # A's team is team `swapped`: its side is team 0's, signed
        signs = np.array([-1.0 if t.key[1] else 1.0 for t in tables])
        played = [(t.hands_done[0], t.seat_agent) for t in tables]
        corrections, decisions = table_corrections(played, agents, signs * cv_offset)
        features = np.stack([deal_features(*deals[d]) for d in deals])
        cv = (signs * corrections, features, decisions)
    return np.asarray(rows, dtype=np.int32).reshape(-1, len(HAND_FIELDS)), records, cv


def _play_match_chunk(
    agents: Sequence[Agent],
    seed: int,
    chunk: int,
    n_matches: int,
    target: int,
    deal_fn: DealFn,
    options: Options,
    log_names: LogNames = None,
) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Duplicate matches to ``target`` (:class:`~butifarra_env.core.rules.Match`: hand after
    hand, dealer rotating, until a team reaches the target). Returns one row per match
    played (match, swapped, a_won, hands), one row per hand (:data:`MATCH_HAND_FIELDS`) and
    the hands' game records when ``log_names`` are given.

    The first dealer and each hand's cards derive from ``(seed, match, hand number)``, so
    both seatings of a match get the same cards as long as they last; ``deal_fn``'s dealer
    is unused.
    """
    for i, agent in enumerate(agents):
        agent.reset(int(_chunk_seed(seed, 1, chunk, 1 + i).generate_state(1)[0]))
    match_options = Options(**{**options.to_dict(), "target_score": target})
    first = chunk * CHUNK_DEALS
    tables = [
        _Table(_seatings(swapped), (m, swapped), "match")
        for m in range(first, min(first + CHUNK_DEALS, n_matches))
        for swapped in (0, 1)
    ]

    def next_game(t: _Table) -> Game | None:
        match_index = t.key[0]
        if not t.hands_done:
            rng = np.random.default_rng(_chunk_seed(seed, 1, match_index, 0))
            t.match = Match(target, draw_dealer(rng, None))
        elif not t.match.add_hand(t.hands_done[-1].scores or (0, 0)):
            return None
        m = t.match
        rng = np.random.default_rng(_chunk_seed(seed, 1, match_index, 1 + m.hand_number))
        _, hands = deal_fn(rng)
        return Game(match_options, m.dealer, list(hands), m.hand_number, m.scores)

    play_tables(tables, agents, next_game, log_probs=log_names is not None)
    rows = [
        [t.key[0], t.key[1], int(t.match.winner == t.key[1]), len(t.hands_done)] for t in tables
    ]
    hand_rows = [_match_hand_row(t.key[0], t.key[1], g) for t in tables for g in t.hands_done]
    records = [] if log_names is None else _hand_records(tables, log_names, seed)
    return (
        np.asarray(rows, dtype=np.int32).reshape(-1, 4),
        np.asarray(hand_rows, dtype=np.int32).reshape(-1, len(MATCH_HAND_FIELDS)),
        records,
    )


# Worker-process state: the agents are sent once per worker, not once per chunk.
_WORKER_AGENTS: list[Agent] = []


def _init_worker(agents: list[Agent]) -> None:
    global _WORKER_AGENTS
    _WORKER_AGENTS = agents
    torch = sys.modules.get("torch")
    if torch is not None:  # one thread per process: the processes are the parallelism
        torch.set_num_threads(1)


def _worker_deals(args: tuple[Any, ...]) -> tuple[np.ndarray, list[dict[str, Any]], ChunkCV]:
    return _play_deal_chunk(_WORKER_AGENTS, *args)


def _worker_matches(
    args: tuple[Any, ...],
) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    return _play_match_chunk(_WORKER_AGENTS, *args)


ChunkResult = TypeVar("ChunkResult")


def _map_chunks(
    fn: Callable[..., ChunkResult],
    worker_fn: Callable[[tuple[Any, ...]], ChunkResult],
    agents: list[Agent],
    jobs: list[tuple[Any, ...]],
    units: list[int],
    workers: int,
    progress: bool,
    desc: str,
    on_result: Callable[[ChunkResult], None] | None = None,
) -> list[ChunkResult]:
    """Run the chunk jobs in order (in-process or on a pool), with a progress bar;
    ``on_result`` sees each chunk's result as it arrives, in chunk order."""
    bar = _progress(sum(units), desc, progress)
    out: list[ChunkResult] = []
    try:
        if workers <= 1 or len(jobs) <= 1:
            results: Iterable[ChunkResult] = (fn(agents, *job) for job in jobs)
            for res, n in zip(results, units, strict=True):
                _collect(out, res, on_result)
                bar.update(n)
        else:
            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
            with ctx.Pool(min(workers, len(jobs)), _init_worker, (agents,)) as pool:
                for res, n in zip(pool.imap(worker_fn, jobs), units, strict=True):
                    _collect(out, res, on_result)
                    bar.update(n)
    finally:
        bar.close()
    return out


def _collect(
    out: list[ChunkResult], res: ChunkResult, on_result: Callable[[ChunkResult], None] | None
) -> None:
    if on_result is not None:
        on_result(res)
    out.append(res)


class ProgressBar(Protocol):
    """What the arena needs of a progress bar (tqdm has it)."""

    def update(self, n: int) -> object: ...

    def close(self) -> None: ...


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, desc: str, enabled: bool) -> ProgressBar:
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    bar: ProgressBar = tqdm(total=total, desc=desc, unit="deal", leave=False, file=sys.stderr)
    return bar


# --------------------------------------------------------------------------- duel
@dataclass
class MatchStats:
    """Duplicate matches to a target: each match sequence played with both seatings."""

    target: int
    n_matches: int
    won_a: int
    """Matches (of ``2 * n_matches`` played) won by agent A's team."""
    rows: np.ndarray
    """(match, swapped, a_won, hands) per match played."""
    hands: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-hand columns named in :data:`MATCH_HAND_FIELDS`, match by match (the unswapped
    play, then the swapped one), hands in order."""

    @property
    def share_a(self) -> float:
        return self.won_a / max(1, len(self.rows))

    @property
    def mean_hands(self) -> float:
        return float(self.rows[:, 3].mean()) if len(self.rows) else float("nan")


@dataclass
class DuelResult:
    """Agent A against agent B over duplicate deals; every figure is from A's side."""

    name_a: str
    name_b: str
    n_deals: int
    seed: int
    hands: dict[str, np.ndarray]
    """Per-hand columns named in :data:`HAND_FIELDS` plus ``diff_a``; rows: deal-major,
    the unswapped play then the swapped one."""
    pair_means: np.ndarray
    """Per deal: mean of A's team score difference over its two plays."""
    mean: float
    ci_low: float
    ci_high: float
    matches: MatchStats | None = None
    reduced: ReducedEstimate | None = None
    """The variance-reduced estimate on the same deals
    (:mod:`agents.evaluation.variance`), or None when it was not computed."""

    @property
    def ci_half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    @property
    def win_share(self) -> float:
        """Share of hands that A's team won (scored)."""
        return float((self.hands["score_a"] > 0).mean())

    @property
    def loss_share(self) -> float:
        return float((self.hands["score_b"] > 0).mean())

    @property
    def draw_share(self) -> float:
        return 1.0 - self.win_share - self.loss_share

    def records(self) -> list[dict[str, int]]:
        """One dict per hand (for pandas/JSON): trump, delegation, doubling, points, scores."""
        cols = list(self.hands)
        return [
            dict(zip(cols, map(int, row), strict=True))
            for row in np.stack([self.hands[c] for c in cols], axis=1)
        ]

    def summary(self) -> str:
        s = (
            f"{self.name_a} vs {self.name_b}: {self.n_deals} duplicate deals "
            f"({2 * self.n_deals} hands), seed {self.seed}\n"
            f"  mean points per hand ({self.name_a} team - {self.name_b} team): "
            f"{self.mean:+.2f}  95% CI [{self.ci_low:+.2f}, {self.ci_high:+.2f}] "
            f"(±{self.ci_half_width:.2f})\n"
            f"  hands won: {self.name_a} {100 * self.win_share:.1f}%, "
            f"{self.name_b} {100 * self.loss_share:.1f}%, tied {100 * self.draw_share:.1f}%"
        )
        if self.matches is not None:
            m = self.matches
            s += (
                f"\n  matches to {m.target}: {self.name_a} won {m.won_a}/{len(m.rows)} "
                f"({100 * m.share_a:.1f}%), {m.mean_hands:.1f} hands per match"
            )
        if self.reduced is not None:
            s += f"\n  {self.reduced.summary()}"
        return s

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "agent_a": self.name_a,
            "agent_b": self.name_b,
            "n_deals": self.n_deals,
            "seed": self.seed,
            "mean": self.mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "win_share": self.win_share,
            "loss_share": self.loss_share,
            "draw_share": self.draw_share,
        }
        if self.matches is not None:
            d["matches"] = {
                "target": self.matches.target,
                "played": int(len(self.matches.rows)),
                "won_a": self.matches.won_a,
                "share_a": self.matches.share_a,
            }
        if self.reduced is not None:
            d["variance_reduction"] = self.reduced.to_dict()
        return d


AgentLike = Agent | str


def resolve_agent(agent: AgentLike, seed: int | None = None, name: str = "agent") -> Agent:
    """An Agent as is, one built from a registry spec (``"rule"``, ``"ppo:ckpt.pt"``), or an
    outside policy made into one (:func:`agents.adapters.as_agent`: a callable
    ``(observation, mask) -> action``, an object with ``act``/``act_batch``, an SB3-style model
    with ``predict(..., action_masks=...)``); anything else is a ValueError naming ``name``."""
    if isinstance(agent, Agent):
        return agent
    if isinstance(agent, str):
        try:
            return make_agent(agent, seed)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    try:
        return as_agent(agent)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def _check_flag(name: str, value: object) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {type(value).__name__}")
    return bool(value)


def _check_play_args(
    n_deals: object,
    seed: object,
    workers: object,
    progress: object,
    deal_fn: object,
    options: object,
    records_path: object,
) -> tuple[int, int, int, bool, Options]:
    """The arguments :func:`duel` and :func:`round_robin` share, checked before any work
    (:mod:`butifarra_env.core.validate`); the records file is :func:`_records_file`, last."""
    n = check_int("n_deals", n_deals, 1)
    checked_seed = check_int("seed", seed, 0)  # an arena run is always seeded
    w = check_int("workers", workers, 1)
    shown = _check_flag("progress", progress)
    if not callable(deal_fn):
        raise ValueError(f"deal_fn must be a function rng -> (dealer, hands), got {deal_fn!r}")
    if options is not None and not isinstance(options, Options):
        raise ValueError(f"options must be an Options or None, got {type(options).__name__}")
    if records_path is not None and (
        not isinstance(records_path, (str, os.PathLike)) or not str(records_path)
    ):
        raise ValueError(f"records_path must be a file name or None, got {records_path!r}")
    return n, checked_seed, w, shown, options or Options()


def _records_file(records_path: str | os.PathLike[str] | None) -> Path | None:
    """The records file, checked (:func:`~butifarra_env.records.files.check_record_file`, which may
    create its folder: so it comes after every other check)."""
    if records_path is None:
        return None
    try:
        return check_record_file(records_path)
    except (OSError, ValueError) as e:  # a directory, not records, a name too long...
        raise ValueError(f"records_path: {e}") from None


def _check_picklable(deal_fn: DealFn, workers: int, chunked: bool) -> None:
    if workers > 1 and chunked:
        try:
            pickle.dumps(deal_fn)
        except Exception:
            raise ValueError(
                f"deal_fn must be a module-level function when workers > 1 (it is sent to the "
                f"worker processes), got {deal_fn!r}"
            ) from None


def _check_deals(deals: object, n_deals: int, n_matches: int, deal_fn: object) -> list[Deal] | None:
    """Fixed deals for :func:`duel`: a list or tuple of at least ``n_deals`` entries
    ``(dealer, four hand bitmasks)``, each a legal deal (the first ``n_deals`` are checked
    and returned as plain ints)."""
    if deals is None:
        return None
    if not isinstance(deals, (list, tuple)):
        raise ValueError(
            "deals must be a list of (dealer, four hand bitmasks) or None, got "
            f"{type(deals).__name__}"
        )
    if n_deals > len(deals):
        raise ValueError(f"n_deals must be at most len(deals) = {len(deals)}, got {n_deals}")
    if n_matches:
        raise ValueError(
            "deals fixes single hands; matches deal their own cards: give deals or n_matches, "
            "not both"
        )
    if deal_fn is not uniform_deal:
        raise ValueError("give deals or deal_fn, not both")
    return [_check_fixed_deal(i, deals[i]) for i in range(n_deals)]


def _check_fixed_deal(i: int, entry: object) -> Deal:
    if not isinstance(entry, (list, tuple)) or len(entry) != 2:
        raise ValueError(f"deals[{i}] must be (dealer, four hand bitmasks), got {entry!r:.80}")
    dealer, hands = entry
    if (
        not isinstance(hands, (list, tuple, np.ndarray))
        or len(hands) != 4
        or not all(is_int(h) and 0 <= int(h) < 1 << N_CARDS for h in hands)
    ):
        raise ValueError(
            f"deals[{i}]: the hands must be four card bitmasks (ints 0 to 2**48 - 1), "
            f"got {hands!r:.80}"
        )
    masks = [int(h) for h in hands]
    if (
        is_int(dealer)
        and 0 <= dealer < 4
        and all(m.bit_count() == N_TRICKS for m in masks)
        and masks[0] | masks[1] | masks[2] | masks[3] == ALL_CARDS
    ):  # the common case, fast: 4 x 12 cards covering the deck are 4 disjoint hands
        return int(dealer), masks
    try:  # the one input check, for its message
        return check_deal(dealer, [cards_of(m) for m in masks])
    except ValueError as e:
        raise ValueError(f"deals[{i}]: {e}") from None


def _check_variance_reduction(key: object) -> Coefficients | None:
    """The shipped coefficients ``variance_reduction`` names (None: no reduced estimate)."""
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise ValueError(
            "variance_reduction must be the name of a set of shipped coefficients (a panel "
            f"member's name or 'default') or None, got {key!r}"
        )
    return load_coefficients(key)


def _check_names(names: object, count: int = 2) -> tuple[str, ...] | None:
    """``names`` as a tuple of ``count`` (two or three) non-empty strings, or None."""
    if names is None:
        return None
    if (
        not isinstance(names, (tuple, list))
        or len(names) != count
        or not all(isinstance(n, str) and n for n in names)
    ):
        words = {2: "two", 3: "three"}[count]
        raise ValueError(f"names must be {words} non-empty strings or None, got {names!r}")
    return tuple(names)


def duel(
    agent_a: AgentLike,
    agent_b: AgentLike,
    n_deals: int,
    seed: int = 0,
    workers: int = 1,
    progress: bool = False,
    n_matches: int = 0,
    target_score: int = 101,
    deal_fn: DealFn = uniform_deal,
    options: Options | None = None,
    names: tuple[str, str] | None = None,
    records_path: str | os.PathLike[str] | None = None,
    deals: Sequence[Deal] | None = None,
    variance_reduction: str | None = None,
    deals_uniform: bool = False,
) -> DuelResult:
    """Play ``n_deals`` duplicate deals (and optionally ``n_matches`` duplicate matches to
    ``target_score``) between two agents; results depend only on the seed and the agents.

    ``deals`` fixes the cards: deal ``i`` of the run is ``deals[i]`` (``(dealer, four hand
    bitmasks)``, e.g. a shipped deal set from :func:`agents.evaluation.deal_sets.load_deal_set`);
    ``n_deals`` must be at most ``len(deals)`` and ``deal_fn`` and ``n_matches`` are then
    left at their defaults. The seed still seeds the agents.

    ``names`` labels the two sides in the result (default: the agents' ``name``).
    ``records_path`` appends every hand played (both seatings, matches too) to that JSON
    Lines file as a game record (:func:`butifarra_env.records.files.game_record`, replayable) with
    ``players`` (names by seat), ``deal`` (or ``match``), ``swapped``, ``seed`` and
    ``probs``: per action, ``{action id: probability}`` over the legal actions from the
    acting agent's :meth:`~agents.base.Agent.action_probs_batch`, or null. Records are
    appended chunk by chunk in deal order, so the file does not depend on ``workers``, and
    logging does not change the results. Every argument is checked before any hand is
    played (ValueError naming it); the records file with
    :func:`~butifarra_env.records.files.check_record_file`.

    ``variance_reduction`` adds :attr:`DuelResult.reduced`, the variance-reduced estimate
    on the same deals (:mod:`agents.evaluation.variance`), with the shipped coefficients of
    that name (a panel member's name, or ``"default"``); None (the default: the corrections
    cost time against agents whose probabilities are known) leaves it out. Its deal-feature
    correction needs uniformly dealt deals: those of the default ``deal_fn``, or fixed
    ``deals`` when ``deals_uniform`` says they are (the shipped deal sets are); otherwise
    only the decision corrections are made. Computing it does not change the plain results.
    """
    n_deals, seed, workers, progress, options = _check_play_args(
        n_deals, seed, workers, progress, deal_fn, options, records_path
    )
    n_matches = check_int("n_matches", n_matches, 0)
    target_score = check_int("target_score", target_score, 1)
    checked_names = _check_names(names)
    fixed = _check_deals(deals, n_deals, n_matches, deal_fn)
    uniform = _check_flag("deals_uniform", deals_uniform) or (
        fixed is None and deal_fn is uniform_deal
    )
    coefficients = _check_variance_reduction(variance_reduction)
    cv_offset = None if coefficients is None else coefficients.offset
    _check_picklable(deal_fn, workers, fixed is None and max(n_deals, n_matches) > CHUNK_DEALS)
    a = resolve_agent(agent_a, seed, "agent_a")
    b = resolve_agent(agent_b, seed, "agent_b")
    path = _records_file(records_path)
    agents = [a, b]
    name_a, name_b = checked_names or (a.name, b.name)
    log_names = None if path is None else (name_a, name_b)
    n_chunks = math.ceil(n_deals / CHUNK_DEALS)
    jobs = [
        (
            seed,
            c,
            n_deals,
            deal_fn,
            options,
            log_names,
            None if fixed is None else fixed[c * CHUNK_DEALS : (c + 1) * CHUNK_DEALS],
            cv_offset,
        )
        for c in range(n_chunks)
    ]
    units = [min(CHUNK_DEALS, n_deals - c * CHUNK_DEALS) for c in range(n_chunks)]
    parts = _map_chunks(
        _play_deal_chunk,
        _worker_deals,
        agents,
        jobs,
        units,
        workers,
        progress,
        f"{name_a} vs {name_b}",
        None if path is None else (lambda res: _append(path, res[1])),
    )
    rows = np.concatenate([rows for rows, _, _ in parts], axis=0)
    hands = {name: rows[:, i].copy() for i, name in enumerate(HAND_FIELDS)}
    hands["diff_a"] = hands["score_a"] - hands["score_b"]
    pair_means = hands["diff_a"].reshape(n_deals, 2).mean(axis=1)
    mean, lo, hi = mean_ci(pair_means)
    reduced = None
    if coefficients is not None:
        cvs = [cv for _, _, cv in parts if cv is not None]
        corrections = np.concatenate([c for c, _, _ in cvs]).reshape(n_deals, 2).mean(axis=1)
        features = np.concatenate([f for _, f, _ in cvs], axis=0) if uniform else None
        decisions = sum(k for _, _, k in cvs)
        reduced = reduce(pair_means, corrections, features, coefficients, decisions)
    matches = None
    if n_matches:
        m_chunks = math.ceil(n_matches / CHUNK_DEALS)
        mjobs = [
            (seed, c, n_matches, target_score, deal_fn, options, log_names) for c in range(m_chunks)
        ]
        munits = [min(CHUNK_DEALS, n_matches - c * CHUNK_DEALS) for c in range(m_chunks)]
        mparts = _map_chunks(
            _play_match_chunk,
            _worker_matches,
            agents,
            mjobs,
            munits,
            workers,
            progress,
            "matches",
            None if path is None else (lambda res: _append(path, res[-1])),
        )
        mrows = np.concatenate([rows for rows, _, _ in mparts], axis=0)
        mhands = np.concatenate([hand_rows for _, hand_rows, _ in mparts], axis=0)
        matches = MatchStats(
            target_score,
            n_matches,
            int(mrows[:, 2].sum()),
            mrows,
            {name: mhands[:, i].copy() for i, name in enumerate(MATCH_HAND_FIELDS)},
        )
    return DuelResult(
        name_a, name_b, n_deals, seed, hands, pair_means, mean, lo, hi, matches, reduced
    )


def bid_multipliers(
    agent_a: AgentLike,
    agent_b: AgentLike,
    deals: Sequence[Deal],
    seed: int = 0,
    workers: int = 1,
    progress: bool = False,
    options: Options | None = None,
) -> np.ndarray:
    """Each deal's two plays as in :func:`duel` with these fixed deals and this seed, up to
    the start of the card play only: per deal, the multiplier the bidding and the doubling
    chain reached in the unswapped and the swapped play (an ``(n, 2)`` int array). For
    agents that bid deterministically these are the multipliers :func:`duel` plays at; the
    bidding costs a few decisions of the fifty-odd a hand takes."""
    if not isinstance(deals, (list, tuple)) or not deals:
        raise ValueError(
            f"deals must be a non-empty list of (dealer, four hand bitmasks), got {deals!r:.80}"
        )
    n, seed, workers, progress, options = _check_play_args(
        len(deals), seed, workers, progress, uniform_deal, options, None
    )
    fixed = _check_deals(deals, n, 0, uniform_deal) or []
    agents = [resolve_agent(agent_a, seed, "agent_a"), resolve_agent(agent_b, seed, "agent_b")]
    n_chunks = math.ceil(n / CHUNK_DEALS)
    jobs = [
        (seed, c, n, uniform_deal, options, None, fixed[c * CHUNK_DEALS : (c + 1) * CHUNK_DEALS],
         None, True)
        for c in range(n_chunks)
    ]  # fmt: skip
    units = [min(CHUNK_DEALS, n - c * CHUNK_DEALS) for c in range(n_chunks)]
    parts = _map_chunks(
        _play_deal_chunk, _worker_deals, agents, jobs, units, workers, progress, "bidding"
    )
    rows = np.concatenate([rows for rows, _, _ in parts], axis=0)
    return rows[:, HAND_FIELDS.index("multiplier")].reshape(n, 2).astype(np.int64)


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    """Append a chunk's records, then drop them from memory (the file holds them now)."""
    append_records(path, records)
    records.clear()


# --------------------------------------------------------------------------- round robin
@dataclass
class RoundRobinResult:
    """Every pair of agents over the same duplicate deals, and ratings from all of them."""

    names: list[str]
    n_deals: int
    seed: int
    duels: dict[tuple[str, str], DuelResult]
    ratings: list[dict[str, Any]]
    """Rows sorted best first: agent, mu, sigma, ordinal (mu - 3 sigma), mean points per hand
    against the field, share of deals won."""
    matrix: np.ndarray = field(repr=False)
    """``matrix[i, j]``: mean points per hand of agent i against agent j."""

    def table(self) -> str:
        headers = ["rank", "agent", "ordinal", "mu", "sigma", "pts/hand vs field", "deals won"]
        rows = [
            [
                i + 1,
                r["agent"],
                f"{r['ordinal']:.2f}",
                f"{r['mu']:.2f}",
                f"{r['sigma']:.2f}",
                f"{r['mean_points']:+.2f}",
                f"{100 * r['deal_win_share']:.1f}%",
            ]
            for i, r in enumerate(self.ratings)
        ]
        out = format_table(headers, rows)
        mrows = [
            [n] + ["" if i == j else f"{self.matrix[i, j]:+.2f}" for j in range(len(self.names))]
            for i, n in enumerate(self.names)
        ]
        out += "\n\nmean points per hand, row agent vs column agent:\n"
        out += format_table(["", *self.names], mrows)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_deals": self.n_deals,
            "seed": self.seed,
            "ratings": self.ratings,
            "duels": [d.to_dict() for d in self.duels.values()],
        }

    def ratings_csv(self) -> str:
        """The ratings as CSV text (one row per agent, best first)."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(self.ratings[0]))
        w.writeheader()
        w.writerows(self.ratings)
        return buf.getvalue()

    def save(self, prefix: str | os.PathLike[str], *, overwrite: bool = False) -> tuple[Path, Path]:
        """Write ``PREFIX.csv`` (ratings) and ``PREFIX.json`` (everything) atomically. An
        existing file is kept (FileExistsError, before either is written) unless
        ``overwrite=True``."""
        csv_path, json_path = result_paths(prefix)
        if not overwrite:
            for path in (csv_path, json_path):
                if path.exists():
                    raise FileExistsError(f"{str(path)!r} exists; not overwriting it")
        atomic_write_text(csv_path, self.ratings_csv(), overwrite=overwrite)
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        atomic_write_text(json_path, text, overwrite=overwrite)
        return csv_path, json_path


def result_paths(prefix: str | os.PathLike[str]) -> tuple[Path, Path]:
    """The files ``--out PREFIX`` writes: ``PREFIX.csv`` and ``PREFIX.json``."""
    prefix = Path(prefix)
    return prefix.with_name(prefix.name + ".csv"), prefix.with_name(prefix.name + ".json")


def round_robin(
    agents: dict[str, AgentLike],
    n_deals: int,
    seed: int = 0,
    workers: int = 1,
    progress: bool = False,
    deal_fn: DealFn = uniform_deal,
    options: Options | None = None,
    records_path: str | os.PathLike[str] | None = None,
) -> RoundRobinResult:
    """Duel every pair on the same deals, then rate with OpenSkill (Plackett-Luce), one
    1-vs-1 game per duplicate deal (the side with the higher pair mean wins).

    ``records_path`` logs every duel's hands to one file (see :func:`duel`). Every argument
    is checked, and openskill looked for, before any hand is played.
    """
    if not isinstance(agents, dict) or len(agents) < 2:
        raise ValueError(
            "a round robin needs at least two agents, as a dict {name: agent or spec}, got "
            + (f"{len(agents)}" if isinstance(agents, dict) else type(agents).__name__)
        )
    bad = [n for n in agents if not isinstance(n, str) or not n]
    if bad:
        raise ValueError(f"agents: names must be non-empty strings, got {bad[0]!r}")
    n_deals, seed, workers, progress, options = _check_play_args(
        n_deals, seed, workers, progress, deal_fn, options, records_path
    )
    model = openskill_model()
    names = list(agents)
    built = {n: resolve_agent(a, seed, f"agents[{n!r}]") for n, a in agents.items()}
    path = _records_file(records_path)
    duels: dict[tuple[str, str], DuelResult] = {}
    k = len(names)
    matrix = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            res = duel(
                built[names[i]],
                built[names[j]],
                n_deals,
                seed,
                workers,
                progress,
                deal_fn=deal_fn,
                options=options,
                names=(names[i], names[j]),
                records_path=path,
            )
            duels[(names[i], names[j])] = res
            matrix[i, j], matrix[j, i] = res.mean, -res.mean
    ratings = openskill_ratings(model, names, duels, n_deals)
    return RoundRobinResult(names, n_deals, seed, duels, ratings, matrix)


# --------------------------------------------------------------------------- output
def format_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain-text table (tabulate when installed)."""
    try:
        from tabulate import tabulate
    except ImportError:
        cells = [headers] + [[str(c) for c in r] for r in rows]
        widths = [max(len(str(r[i])) for r in cells) for i in range(len(headers))]
        lines = ["  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def hands_csv(result: DuelResult) -> str:
    """The per-hand columns of a duel as CSV text (one row per hand)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(list(result.hands))
    w.writerows(np.stack(list(result.hands.values()), axis=1).tolist())
    return buf.getvalue()


__all__ = [
    "CHUNK_DEALS",
    "AgentError",
    "Deal",
    "HAND_FIELDS",
    "MATCH_HAND_FIELDS",
    "DuelResult",
    "MatchStats",
    "RoundRobinResult",
    "arena_deal",
    "bid_multipliers",
    "duel",
    "format_table",
    "hands_csv",
    "mean_ci",
    "resolve_agent",
    "result_paths",
    "round_robin",
    "t_quantile",
    "uniform_deal",
]
