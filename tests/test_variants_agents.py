"""The regional variants reach the agents: who says it cannot play them, the sampler's
obligada inference, the search agent's simulated rules, the table driver telling every seat.

The engine half (legal cards, doubling cap, multipliers) is tests/test_variants.py; here the
agents are held to it: the rule-based, random and search agents play many hands with every
variant on and never make an illegal move, the search agent's rollouts and solver compute the
engine's legal sets under obligada, sampled deals never contradict a forced lowest card, and
an agent trained without a variant refuses it before any move.
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from agents.base import (
    VARIANTS,
    Agent,
    UnsupportedVariant,
    trained_variants,
    variants_in_play,
)
from agents.double_dummy import Solver
from agents.random_agent import RandomAgent
from agents.rule_based import RuleBasedAgent
from agents.search_agent import SearchAgent, SearchConfig, _greedy_card
from agents.table import Table, play_tables
from butifarra.arguments import multiplier_text, variant_labels
from butifarra_env.core.actions import mask_from_bits
from butifarra_env.core.cards import BELOW, SUIT, cards_of
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.game import Game
from butifarra_env.core.observation import encode
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    NO_TRUMP,
    PHASE_PLAY,
    WINNERS,
    legal_cards,
    random_deal,
)
from butifarra_env.core.sampling import HiddenDeal, known_absent

ALL_ON = Options(obligada=True, linear_doubling=True, butifarra_max_doubling_level=2)
"""Every variant on (RULES.md, Variants)."""
VARIANT_SETS = [
    ALL_ON,
    Options(obligada=True, max_doubling_level=2),
    Options(linear_doubling=True, butifarra_max_doubling_level=0, butifarra_base=1),
    Options(obligada=True, linear_doubling=True, butifarra_max_doubling_level=1, target_score=51),
]


def random_game(options: Options, seed: int, moves: int | None = None) -> Game:
    """A hand under ``options`` played by uniformly random legal moves (all of it, or the
    first ``moves``)."""
    rng = np.random.default_rng(seed)
    dealer = int(rng.integers(4))
    game = Game(options, dealer, random_deal(rng, dealer))
    while not game.is_over and (moves is None or len(game.actions) < moves):
        legal = cards_of(game.legal)
        game.step(legal[int(rng.integers(len(legal)))])
    return game


def current_trick(game: Game) -> list[tuple[int, int]]:
    """The cards on the table as ``(seat, card)`` in playing order."""
    lead = game.trick_leader
    return [((lead + k) % 4, game.trick_cards[(lead + k) % 4]) for k in range(game.cards_in_trick)]


def play_positions(options: Options, seeds: range) -> list[Game]:
    """Copies of every card decision of random hands: the positions the tests check."""
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        dealer = int(rng.integers(4))
        game = Game(options, dealer, random_deal(rng, dealer))
        while not game.is_over:
            if game.phase == PHASE_PLAY:
                out.append(_copy_until(game, len(game.actions)))
            legal = cards_of(game.legal)
            game.step(legal[int(rng.integers(len(legal)))])
    return out


def _copy_until(game: Game, moves: int) -> Game:
    """``game`` replayed from its deal to its first ``moves`` actions (shares nothing)."""
    copy = Game(game.options, game.dealer, list(game.initial_hands))
    for _, action in game.actions[:moves]:
        copy.step(action)
    return copy


def replays(options: Options, dealer: int, hands: list[int], game: Game) -> bool:
    """Are ``game``'s actions all legal from these initial hands (the engine decides)?"""
    again = Game(options, dealer, hands)
    try:
        for _, action in game.actions:
            again.step(action)
    except IllegalActionError:
        return False
    return True


# --------------------------------------------------------------------------- which variants
def test_variants_in_play_names_only_what_changes_the_game() -> None:
    assert variants_in_play(Options()) == ()
    in_order = ("obligada", "linear_doubling", "butifarra_max_doubling_level")
    assert variants_in_play(ALL_ON) == in_order
    assert set(variants_in_play(ALL_ON)) == VARIANTS
    # x1, x2 are the same linear or not; a cap at the top level is no cap
    assert variants_in_play(Options(linear_doubling=True, max_doubling_level=1)) == ()
    assert variants_in_play(Options(max_doubling_level=2, butifarra_max_doubling_level=2)) == ()
    assert variant_labels(ALL_ON) == ["obligada", "linear doubling", "butifarra: no Sant Vicenç"]
    assert variant_labels(Options(butifarra_max_doubling_level=0)) == ["butifarra: no doubling"]
    assert variant_labels(Options(linear_doubling=True, max_doubling_level=1)) == []


def test_the_multiplier_text_shows_the_linear_factor() -> None:
    linear = Options(linear_doubling=True)
    assert multiplier_text(linear, NO_TRUMP, 2) == "x6 (2 x 3, linear doubling)"
    assert multiplier_text(linear, 0, 4) == "x5 (1 x 5, linear doubling)"
    assert multiplier_text(linear, 0, 1) == "x2"
    assert multiplier_text(Options(), NO_TRUMP, 2) == "x8"


def test_trained_variants_come_from_the_checkpoint_config() -> None:
    assert trained_variants(None) == trained_variants({"seed": 1}) == frozenset()
    assert trained_variants({"options": {"obligada": True}}) == {"obligada"}
    assert trained_variants({"options": ALL_ON.to_dict()}) == VARIANTS
    with pytest.raises(ValueError, match="config 'options' must be a dict"):
        trained_variants({"options": "obligada"})
    with pytest.raises(ValueError, match="unknown option"):
        trained_variants({"options": {"obligatory": True}})


# --------------------------------------------------------------------------- set_options
@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomAgent(0),
        RuleBasedAgent,
        lambda: SearchAgent(SearchConfig(samples=2), bidding=RuleBasedAgent(), seed=0),
    ],
    ids=["random", "rule", "search"],
)
def test_agents_that_play_from_the_mask_accept_every_variant(make: Callable[[], Agent]) -> None:
    agent = make()
    assert agent.options is None
    for options in VARIANT_SETS:
        agent.set_options(options)
        assert agent.options == options
    with pytest.raises(TypeError, match="set_options takes butifarra_env.core.options.Options"):
        agent.set_options({"obligada": True})  # type: ignore[arg-type]
    assert agent.options == VARIANT_SETS[-1]


class TrainedWithout(RandomAgent):
    """What a PPO checkpoint trained under the default rules plus linear doubling says."""

    name = "ckpt"
    supported_variants = frozenset({"linear_doubling"})
    variants_hint = "train one with the variant"


def test_an_agent_trained_without_a_variant_refuses_it_and_stays_as_it_was() -> None:
    agent = TrainedWithout(0)
    agent.set_options(Options(linear_doubling=True))  # trained with it: accepted
    with pytest.raises(UnsupportedVariant) as info:
        agent.set_options(ALL_ON)
    message = str(info.value)
    assert message.startswith("agent 'ckpt' cannot play obligada play (obligada=True) and a ")
    assert "doubling cap in butifarra (butifarra_max_doubling_level=2)" in message
    assert "it supports only linear_doubling; train one with the variant" in message
    assert info.value.agent == "ckpt"
    assert info.value.variants == ("obligada", "butifarra_max_doubling_level")
    assert isinstance(info.value, ValueError)
    assert agent.options == Options(linear_doubling=True)  # unchanged by the refusal
    again = pickle.loads(pickle.dumps(info.value))  # crosses process boundaries (the arena)
    assert str(again) == message and again.variants == info.value.variants
    agent.set_options(Options(linear_doubling=True, max_doubling_level=1))  # nothing changes


# --------------------------------------------------------------------------- PPO
def _ppo():
    pytest.importorskip("torch")
    from agents.registry import R1_PPO_CHECKPOINT, make_agent

    assert R1_PPO_CHECKPOINT.is_file(), f"the shipped checkpoint is missing: {R1_PPO_CHECKPOINT}"
    return make_agent


def test_a_ppo_spec_refuses_a_variant_unless_allowed() -> None:
    make_agent = _ppo()
    ppo = make_agent("ppo-r1", 0)
    ppo.set_options(Options(max_doubling_level=2))  # not a variant: the observation has it
    with pytest.raises(UnsupportedVariant, match="agent 'ppo' cannot play obligada") as info:
        ppo.set_options(Options(obligada=True))
    assert "ppo:allow_variants" in str(info.value) and "rule" in str(info.value)
    assert ppo.options == Options(max_doubling_level=2)
    allowed = make_agent("ppo-r1:allow_variants", 0)
    allowed.set_options(ALL_ON)
    assert allowed.options == ALL_ON
    with pytest.raises(ValueError, match="takes no argument"):
        make_agent("ppo-r1:obligada", 0)


def test_a_ppo_agent_made_directly_refuses_a_variant() -> None:
    _ppo()
    from agents.ppo_agent import PPOAgent
    from agents.registry import R1_PPO_CHECKPOINT

    with pytest.raises(UnsupportedVariant):
        PPOAgent(R1_PPO_CHECKPOINT).set_options(Options(obligada=True))


def test_the_search_agent_bids_with_the_rule_player_when_its_ppo_bidder_cannot() -> None:
    make_agent = _ppo()
    auto = make_agent("search:samples=2", 0)
    assert isinstance(auto, SearchAgent) and auto.bidding is not None
    assert auto.bidding.name == "ppo" and auto.config.infer == 4
    auto.set_options(ALL_ON)
    assert auto.bidding.name == "rule" and auto.config.infer == 1 and auto.obligada
    auto.set_options(Options())  # the default rules again: the PPO bidder is back
    assert auto.bidding.name == "ppo" and auto.config.infer == 4 and not auto.obligada
    strict = SearchAgent(SearchConfig(samples=2), bidding=auto.preferred, seed=0)  # no fallback
    with pytest.raises(UnsupportedVariant, match="its bidding agent refuses them") as info:
        strict.set_options(Options(obligada=True))
    assert "search:bidding=rule" in str(info.value) and strict.options is None


# --------------------------------------------------------------------------- the table driver
class Recording(RandomAgent):
    """Random play that notes the options it was told at each decision."""

    def __init__(self, seed: int, supported: frozenset[str] = VARIANTS) -> None:
        super().__init__(seed)
        self.supported_variants = supported
        self.seen: list[Options | None] = []

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        self.seen.extend([self.options] * len(observations))
        return super().act_batch(observations, action_masks)

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        self.seen.append(self.options)
        return super().act(observation, action_mask)


def test_the_table_driver_tells_every_agent_the_options_before_its_first_decision() -> None:
    agents = [Recording(1), Recording(2)]
    tables = [Table((0, 1, 0, 1), f"t{i}") for i in range(3)]

    def next_game(t: Table) -> Game | None:
        return None if t.hands_done else random_game(ALL_ON, len(t.label), moves=0)

    play_tables(tables, agents, next_game)
    assert all(t.hands_done[0].is_over for t in tables)
    for agent in agents:
        assert agent.seen and set(agent.seen) == {ALL_ON}
    one = Table((0, None, 0, None))  # a table played move by move, a person at two seats
    agent = Recording(3)
    one.start(random_game(Options(obligada=True), 5, moves=0), [agent])
    assert agent.options == Options(obligada=True)


def test_an_agent_that_cannot_play_refuses_before_any_move() -> None:
    strict = Recording(1, supported=frozenset())
    tables = [Table((0, 1, 0, 1), "t")]
    games: list[Game] = []

    def next_game(t: Table) -> Game | None:
        games.append(random_game(Options(obligada=True), 3, moves=0))
        return games[-1]

    with pytest.raises(UnsupportedVariant, match="agent 'random' cannot play obligada"):
        play_tables(tables, [RuleBasedAgent(), strict], next_game)
    assert games and not games[0].actions and not strict.seen  # nothing was played


# --------------------------------------------------------------------------- playing
def test_the_rule_random_and_search_agents_play_every_variant_legally() -> None:
    """Hands with the variants on through the table driver (which raises AgentError on any
    illegal move): rule vs random, search vs rule, random vs search, in lockstep; and a few
    move by move with act. Obligada must have forced a card in many of them."""
    search = SearchAgent(SearchConfig(samples=3, endgame=2), bidding=RuleBasedAgent(), seed=0)
    pairs = [
        (RuleBasedAgent(), RandomAgent(1)),
        (search, RuleBasedAgent()),
        (RandomAgent(2), search),
    ]
    forced: Counter[bool] = Counter()
    hands = 0
    for k, options in enumerate(VARIANT_SETS):
        for a, b in pairs:
            n = 6 if search in (a, b) else 24
            tables = [Table((0, 1, 0, 1) if i % 2 else (1, 0, 1, 0), f"{i}") for i in range(n)]
            rng = np.random.default_rng(k)

            def next_game(
                t: Table, rng: np.random.Generator = rng, options: Options = options
            ) -> Game | None:
                if t.hands_done:
                    return None
                dealer = int(rng.integers(4))
                return Game(options, dealer, random_deal(rng, dealer))

            play_tables(tables, [a, b], next_game)
            for t in tables:
                game = t.hands_done[0]
                assert game.is_over and game.scores is not None
                cap = options.doubling_cap(game.trump)
                assert game.level <= cap
                assert game.multiplier == options.multiplier(game.trump, game.level)
                forced[options.obligada] += count_forced(game)
                hands += 1
    one = Table((0, 1, 0, 1))
    for seed in range(2):  # act, move by move (terminal play, the web table)
        one.start(random_game(ALL_ON, seed, moves=0), [search, RuleBasedAgent()])
        moves = list(one.moves([search, RuleBasedAgent()]))
        assert one.game.is_over and len(moves) == len(one.game.actions)
    assert hands == 4 * (24 + 6 + 6)
    assert forced[True] > 100  # obligada really narrowed the legal cards, many times


def count_forced(game: Game) -> int:
    """How many card plays of ``game`` obligada narrowed (the lowest card of the suit was
    the only legal card where the free rule allows more)."""
    replay = Game(game.options, game.dealer, list(game.initial_hands))
    n = 0
    for _, action in game.actions:
        if replay.phase == PHASE_PLAY and replay.options.obligada:
            seat = replay.to_move
            free = legal_cards(
                replay.hands[seat],
                replay.led_suit,
                replay.win_card,
                replay.partner_winning(seat),
                replay.trump,
            )
            n += replay.legal != free
        replay.step(action)
    return n


def test_the_search_simulation_computes_the_engine_legal_sets_under_obligada() -> None:
    """On positions of random hands under obligada, the solver's legal cards are the
    engine's mask, the rollout heuristic plays one of them, and the endgame values cover
    exactly them; without obligada the solver would differ (the check can fail)."""
    checked = differ = solved = 0
    for game in play_positions(Options(obligada=True), range(12)):
        seat, trump, trick = game.to_move, game.trump, current_trick(game)
        hands = list(game.hands)
        assert Solver(trump, obligada=True)._legal(hands, seat, trick) == game.legal
        assert (game.legal >> _greedy_card(hands, seat, trick, trump, WINNERS[trump], True)) & 1
        differ += Solver(trump)._legal(hands, seat, trick) != game.legal
        if sum(h.bit_count() for h in hands) <= 10:
            values = Solver(trump, obligada=True).best_moves(hands, seat, trick)
            assert set(values) == set(cards_of(game.legal))
            solved += 1
        checked += 1
    assert checked == 12 * 48 and differ > 20 and solved > 30


def test_the_search_agent_samples_with_the_obligada_inference_once_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a decision where an opponent followed under a card it could not beat, the search
    agent's sampler excludes that seat's weaker cards of the suit under obligada only."""
    position = next(
        g
        for g in play_positions(Options(obligada=True), range(40))
        if g.cards_in_trick >= 2 and g.legal.bit_count() > 1 and _forced_follower(g) is not None
    )
    follower, card = _forced_follower(position)  # type: ignore[misc]
    me = position.to_move
    below = BELOW[card]
    seen: list[list[int]] = []

    class Spy(HiddenDeal):
        def __init__(
            self,
            unseen: int,
            seats: Sequence[int],
            sizes: Sequence[int],
            voids: Sequence[int],
            absent: Sequence[int] | None = None,
        ) -> None:
            seen.append(list(absent or ()))
            super().__init__(unseen, seats, sizes, voids, absent)

    agent = SearchAgent(SearchConfig(samples=2, endgame=0), bidding=RuleBasedAgent(), seed=0)
    obs, mask = encode(position, me), mask_from_bits(position.legal)
    rel = (follower - me) % 4
    monkeypatch.setattr("agents.search_agent.HiddenDeal", Spy)
    agent.act(obs, mask)  # not told: the rules of the observation, no obligada inference
    agent.set_options(Options(obligada=True))
    agent.act(obs, mask)
    free, obligada = seen
    assert free[rel - 1] & below == 0
    assert obligada[rel - 1] & below == below


def _forced_follower(game: Game) -> tuple[int, int] | None:
    """A seat of the current trick that followed suit under an opponent's winning card
    without beating it, holding weaker cards of the suit is ruled out by obligada; with its
    card (one that has weaker cards, so the inference says something)."""
    trick = current_trick(game)
    for k in range(1, len(trick)):
        seat, card = trick[k]
        before = trick[:k]
        win_seat, win = before[0]
        for s, c in before[1:]:
            if (WINNERS[game.trump][win] >> c) & 1:
                win_seat, win = s, c
        opponent = (win_seat ^ seat) & 1
        beats = (WINNERS[game.trump][win] >> card) & 1
        if opponent and not beats and SUIT[card] == SUIT[trick[0][1]] and BELOW[card]:
            return seat, card
    return None


# --------------------------------------------------------------------------- the sampler
def test_obligada_absence_is_exactly_what_makes_past_plays_legal() -> None:
    """A re-deal of the unplayed cards replays the hand legally under obligada if and only if
    it avoids known_absent(..., obligada=True); the free-play sets miss some contradictions."""
    rng = np.random.default_rng(3)
    outcomes: Counter[bool] = Counter()
    missed = 0
    for seed in range(40):
        game = random_game(Options(obligada=True, max_doubling_level=0), seed)
        game = _copy_until(game, int(np.random.default_rng(seed).integers(10, 40)))
        absent = known_absent(game.actions, obligada=True)
        free = known_absent(game.actions)
        assert all(f & ~a == 0 for f, a in zip(free, absent, strict=True))  # obligada adds
        unseen = game.hands[0] | game.hands[1] | game.hands[2] | game.hands[3]
        for _ in range(25):
            shuffled = [int(c) for c in rng.permutation(cards_of(unseen))]
            new = []
            for h in game.hands:
                new.append(sum(1 << c for c in shuffled[: h.bit_count()]))
                shuffled = shuffled[h.bit_count() :]
            initial = [n | p for n, p in zip(new, game.played, strict=True)]
            legal = replays(game.options, game.dealer, initial, game)
            assert legal == all(n & a == 0 for n, a in zip(new, absent, strict=True))
            missed += not legal and all(n & f == 0 for n, f in zip(new, free, strict=True))
            outcomes[legal] += 1
    assert outcomes[True] > 50 and outcomes[False] > 50 and missed > 0


def test_sampled_worlds_never_contradict_a_forced_play() -> None:
    """Deals drawn by HiddenDeal from what a seat knows (its hand, the plays, the voids,
    known_absent under obligada) always replay the hand legally under obligada."""
    rng = np.random.default_rng(0)
    drawn = 0
    for seed in range(20):
        full = random_game(ALL_ON, seed)
        game = _copy_until(full, int(np.random.default_rng(seed).integers(20, 45)))
        absent = known_absent(game.actions, obligada=True)
        for me in range(4):
            others = [s for s in range(4) if s != me]
            unseen = 0
            for s in others:
                unseen |= game.hands[s]
            deal = HiddenDeal(
                unseen,
                others,
                [game.hands[s].bit_count() for s in others],
                [game.voids[s] for s in others],
                [absent[s] for s in others],
            )
            for world in deal.sample_many(rng, 20):
                hands = [game.hands[me] if s == me else world[s] for s in range(4)]
                initial = [h | p for h, p in zip(hands, game.played, strict=True)]
                assert replays(game.options, game.dealer, initial, game)
                drawn += 1
    assert drawn == 20 * 4 * 20
