"""Search-agent specs that cannot hang, allocate without bound or overshoot their budget:
every option is range-checked when the spec is parsed, the time budget covers the sampling
of deals, and the bidding inference is only used with a bidder that has probabilities.

No test here runs a slow search: out-of-range specs are refused before anything is built,
and the budget is measured with fake clocks (no real time)."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence

import numpy as np
import pytest

from agents import make_agent
from agents.base import Agent
from agents.double_dummy import Solver
from agents.search_agent import (
    BUDGET_MAX,
    DEFAULT_INFER,
    ENDGAME_MAX,
    INFER_MAX,
    SAMPLES_MAX,
    SearchAgent,
    SearchConfig,
    SearchStats,
    choose_card,
)
from butifarra_env.core.observation import View, encode, pack_bits
from butifarra_env.core.sampling import REJECTION_TRIES, HiddenDeal
from tests.helpers import endgame


def position(seed: int = 11, tricks_left: int = 8) -> tuple[View, int, np.ndarray, np.ndarray]:
    """A card decision with several candidates: its view, legal cards, observation, mask."""
    game, _ = endgame(seed, tricks_left)
    obs = encode(game, game.to_move)
    mask = np.array([(game.legal >> a) & 1 for a in range(56)], dtype=np.int8)
    assert game.legal.bit_count() > 1
    return View(pack_bits(obs)), game.legal, obs, mask


# ------------------------------------------------------------------ ranges, at parse time
@pytest.mark.parametrize(
    ("spec", "option", "allowed"),
    [
        ("samples=0", "samples=0", "from 1 to 1000"),
        ("samples=1001", "samples=1001", "from 1 to 1000"),
        ("samples=1000000000000", "samples=1000000000000", "from 1 to 1000"),  # 2 TiB
        ("samples=1.5", "samples=1.5", "an integer"),
        ("samples=many", "samples=many", "an integer"),
        ("samples=" + "9" * 5000, "samples=999", "an integer"),  # past int()'s digit limit
        ("infer=17", "infer=17", "from 0 to 16"),
        ("infer=100000000", "infer=100000000", "from 0 to 16"),
        ("infer=-1", "infer=-1", "from 0 to 16"),
        ("endgame=12", "endgame=12", "from 0 to 5"),  # an exhaustive solve: it never ended
        ("endgame=6", "endgame=6", "from 0 to 5"),
        ("endgame=-1", "endgame=-1", "from 0 to 5"),
        ("budget=nan", "budget=nan", "from 0 (no limit) to 60"),
        ("budget=inf", "budget=inf", "from 0 (no limit) to 60"),
        ("budget=1e400", "budget=inf", "from 0 (no limit) to 60"),  # parses as inf
        ("budget=-0.05", "budget=-0.05", "from 0 (no limit) to 60"),
        ("budget=61", "budget=61.0", "from 0 (no limit) to 60"),
        ("budget=soon", "budget=soon", "a number of seconds"),
        ("policy=-1", "policy=-1.0", "from 0 (off) to 100"),
        ("policy=nan", "policy=nan", "from 0 (off) to 100"),
        ("policy=101", "policy=101.0", "from 0 (off) to 100"),
        ("policy=strong", "policy=strong", "from 0 (off) to 100"),
        ("bidding=search", "bidding=search", "not search"),
        ("bidding=search:samples=2", "bidding=search:samples=2", "not search"),
        ("bidding=", "bidding=", "an agent spec"),
    ],
)
def test_out_of_range_options_are_refused_when_parsed(spec: str, option: str, allowed: str) -> None:
    with pytest.raises(ValueError, match="search agent option") as info:
        SearchConfig.parse(spec)
    message = str(info.value)
    assert option in message and allowed in message
    assert len(message) < 200  # one readable line, whatever was typed


def test_the_hanging_spec_is_refused_before_any_play() -> None:
    """``samples=1,endgame=12`` solved 12 tricks exhaustively and never returned; now the
    registry refuses it while parsing, naming the option and the range."""
    with pytest.raises(ValueError, match=r"endgame=12: must be an integer from 0 to 5"):
        make_agent("search:samples=1,endgame=12,bidding=rule", seed=0)


@pytest.mark.parametrize(
    "values",
    [
        {"samples": True},
        {"samples": 2.0},
        {"endgame": "3"},
        {"infer": 1.0},
        {"budget": float("nan")},
        {"budget": "0.1"},
        {"budget": False},
        {"samples": 10**5000},  # too long to print: still a one-line message
    ],
)
def test_the_constructor_checks_like_the_parser(values: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="search agent option"):
        SearchConfig(**values)  # type: ignore[arg-type]


def test_the_edges_of_every_range_are_accepted() -> None:
    top = SearchConfig.parse(
        f"samples={SAMPLES_MAX},infer={INFER_MAX},endgame={ENDGAME_MAX},budget={BUDGET_MAX:g}"
    )
    assert (top.samples, top.infer, top.endgame, top.budget) == (1000, 16, 5, 60.0)
    low = SearchConfig.parse("samples=1,infer=0,endgame=0,budget=0")
    assert (low.samples, low.infer, low.endgame, low.budget) == (1, 0, 0, 0.0)
    assert SearchConfig.parse("budget=0.05").budget == 0.05
    assert SearchConfig.parse(None) == SearchConfig()


def test_the_solver_finishes_from_the_largest_endgame_in_bounded_work() -> None:
    """ENDGAME_MAX was chosen by measurement (docs/search.md): its worst case over 300 random
    positions was about 20,000 nodes. The node count (not the clock) guards that choice."""
    worst = 0
    for seed in range(12):
        game, trick = endgame(5000 + seed, ENDGAME_MAX)
        solver = Solver(game.trump)
        moves = solver.best_moves(game.hands, game.to_move, trick)
        assert set(moves) == set(game.legal_actions())
        worst = max(worst, solver.nodes)
    assert 0 < worst < 60_000


# ------------------------------------------------------------------ the budget covers sampling
class Sampling:
    """A fake clock on which sampling is the only thing that costs time: ``per_deal`` seconds
    for every deal the sampler draws (searching a deal is free). Counts the deals drawn, and
    keeps the bound on rejected draws each call was given."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, per_deal: float = 0.001) -> None:
        self.drawn = 0
        self.calls: list[int] = []
        self.bounds: list[int | None] = []
        self.per_deal = per_deal
        original = HiddenDeal.sample_many

        def sample_many(
            deal: HiddenDeal, rng: np.random.Generator, k: int, max_fruitless: int | None = None
        ) -> list[dict]:
            self.drawn += k
            self.calls.append(k)
            self.bounds.append(max_fruitless)
            return original(deal, rng, k, max_fruitless)

        monkeypatch.setattr(HiddenDeal, "sample_many", sample_many)

    def __call__(self) -> float:
        return self.drawn * self.per_deal


def test_sampling_stops_once_the_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, all 1,000 deals were drawn before the clock was first read: 1 s by this clock
    against a budget of 0.05 s (the 36x overshoot). Now deals are drawn as the search goes."""
    view, legal, _, _ = position()
    clock = Sampling(monkeypatch)
    stats = SearchStats()
    cfg = SearchConfig(samples=1000, budget=0.05, endgame=2)
    card = choose_card(view, legal, cfg, np.random.default_rng(0), clock=clock, stats=stats)
    assert (legal >> card) & 1
    assert clock.drawn == stats.drawn
    assert 0.045 <= stats.seconds <= 0.05  # stops past 90% of the budget, never over it here
    assert stats.samples <= clock.drawn <= stats.samples + 8  # at most a chunk unsearched
    assert max(clock.calls) <= 8  # drawn a chunk at a time
    # small chunks: the sampler switches to counting after 64 rejected draws in a row, as
    # one-deal sampling does, so a tight constraint cannot hold the search past its budget
    assert set(clock.bounds) == {REJECTION_TRIES}


def test_the_bidding_inference_pool_is_inside_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``infer`` the pool is ``infer`` x the samples: before, 4,000 deals were drawn and
    weighed up front (4 s by this clock against 0.05 s)."""
    view, legal, _, _ = position()
    clock = Sampling(monkeypatch)
    weighed: list[int] = []

    def prior(pool: Sequence[dict[int, int]]) -> np.ndarray:
        weighed.append(len(pool))
        return np.linspace(1.0, 2.0, len(pool))

    stats = SearchStats()
    cfg = SearchConfig(samples=1000, budget=0.05, endgame=2, infer=4)
    choose_card(view, legal, cfg, np.random.default_rng(0), clock=clock, stats=stats, prior=prior)
    assert sum(weighed) == clock.drawn == stats.drawn
    assert stats.seconds <= 0.05 + 8 * 4 * 0.001  # at most one chunk past 90% of the budget
    assert max(weighed) <= 8 * 4 and 1 <= stats.samples < 20


def test_a_spent_budget_still_searches_one_whole_sample() -> None:
    view, legal, _, _ = position()
    ticks = itertools.count()

    def clock() -> float:  # 10 s per reading: the budget is gone at the first look
        return next(ticks) * 10.0

    stats = SearchStats()
    cfg = SearchConfig(samples=50, budget=0.01, endgame=2)
    card = choose_card(view, legal, cfg, np.random.default_rng(0), clock=clock, stats=stats)
    assert (legal >> card) & 1
    assert stats.samples == 1 and stats.drawn == 1 and stats.candidates > 1


def test_the_clock_is_read_between_cards_within_a_sample() -> None:
    """A sample cut short by the budget is dropped: the means stay over whole samples."""
    view, legal, _, _ = position()
    reads = itertools.count()

    def clock() -> float:  # the budget runs out at the 3rd reading (inside sample 2)
        return 1.0 if next(reads) >= 2 else 0.0

    stats = SearchStats()
    cfg = SearchConfig(samples=50, budget=0.5, endgame=2)
    choose_card(view, legal, cfg, np.random.default_rng(0), clock=clock, stats=stats)
    assert stats.candidates > 1 and stats.samples == 1


def test_the_agent_takes_an_injected_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    _, legal, obs, mask = position()
    clock = Sampling(monkeypatch)
    agent = SearchAgent(
        SearchConfig(samples=1000, budget=0.05, endgame=2), make_agent("rule"), 0, clock=clock
    )
    assert (legal >> agent.act(obs, mask)) & 1
    assert agent.stats.seconds <= 0.05 and 1 <= agent.stats.samples < 100


def test_no_budget_draws_exactly_the_samples_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    view, legal, _, _ = position()
    clock = Sampling(monkeypatch)
    stats = SearchStats()
    choose_card(
        view, legal, SearchConfig(samples=9, endgame=2), np.random.default_rng(0), stats=stats
    )
    assert clock.calls == [9] and stats.samples == 9
    assert clock.bounds == [None]  # the draws the protocol's search member was published with


# ------------------------------------------------------------------ infer needs probabilities
class Probabilities(Agent):
    """A bidder with action probabilities (uniform over the legal actions)."""

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(np.flatnonzero(action_mask)[0])

    def action_probs_batch(self, observations: np.ndarray, masks: np.ndarray) -> np.ndarray:
        return masks / masks.sum(axis=1, keepdims=True)


def test_a_bidder_without_probabilities_gets_uniform_deals(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule-based bidder has no action probabilities: before, the default infer=4 drew 48
    deals for 12 samples and threw 36 away. Now it draws the 12."""
    _, _, obs, mask = position()
    agent = make_agent("search:bidding=rule", seed=0)
    assert isinstance(agent, SearchAgent) and agent.config.infer == 1
    clock = Sampling(monkeypatch)
    agent.act(obs, mask)
    assert clock.calls == [12]


def test_explicit_infer_with_a_bidder_without_probabilities_warns() -> None:
    with pytest.warns(
        UserWarning, match=r"infer=4 .* bidding agent 'rule' has none: using infer=1"
    ):
        agent = make_agent("search:infer=4,bidding=rule", seed=0)
    assert isinstance(agent, SearchAgent) and agent.config.infer == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for spec in ("search:infer=1,bidding=rule", "search:infer=0,bidding=rule"):
            quiet = make_agent(spec, seed=0)
            assert isinstance(quiet, SearchAgent) and quiet.config.infer <= 1  # type: ignore[operator]


def test_infer_defaults_to_four_with_a_bidder_that_has_probabilities() -> None:
    assert SearchAgent(SearchConfig(), Probabilities()).config.infer == DEFAULT_INFER == 4
    assert SearchAgent(SearchConfig(infer=9), Probabilities()).config.infer == 9
    assert SearchAgent(SearchConfig(infer=0), Probabilities()).config.infer == 0
    assert SearchAgent(SearchConfig(), None).config.infer == 1


@pytest.mark.parametrize(
    ("spec", "shown"), [("0\x1e0", "'0\\x1e0'"), ("samples=1\x0b2", "'1\\x0b2'")]
)
def test_a_refused_spec_is_named_on_one_line(spec: str, shown: str) -> None:
    """Control characters in what was typed are escaped: the message stays one line."""
    with pytest.raises(ValueError) as info:
        SearchConfig.parse(spec)
    message = str(info.value)
    assert len(message.splitlines()) == 1 and shown in message, message
