"""Agents: the interface, the registry, RandomAgent and the rule-based heuristics.

The heuristics are checked on hand-built positions: deals written card by card and
played to the position with the real Game, or observation vectors filled field by field.
Speed is not tested here (wall-clock thresholds are flaky): ``benchmarks/bench_agents.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import agents.rule_based as rb
from agents import Agent, RandomAgent, RuleBasedAgent, make_agent
from agents.registry import AGENT_FACTORIES, agent_names, register_agent
from butifarra_env.core.actions import (
    BUTIFARRA,
    DELEGATE,
    DOUBLE,
    N_ACTIONS,
    PASS,
    TRUMP_BASE,
    bits_from_mask,
    bits_from_masks,
)
from butifarra_env.core.cards import SUIT, cards_of, parse_card
from butifarra_env.core.game import Game
from butifarra_env.core.observation import (
    OBS_SIZE,
    Observer,
    View,
    decode,
    encode,
    field_slice,
    read_view,
)
from butifarra_env.core.options import Options
from butifarra_env.core.policy import BatchPolicy, Policy
from butifarra_env.core.rules import PHASE_PLAY, TRUMP_UNSET, random_deal
from tests.extras import need
from tests.helpers import cards

# --------------------------------------------------------------------------- helpers
WORDS = {"oros": 48, "copas": 49, "espadas": 50, "bastos": 51, "butifarra": BUTIFARRA,
         "delegate": DELEGATE, "double": DOUBLE, "pass": PASS}  # fmt: skip


def deal_with(fixed: dict[int, str]) -> list[int]:
    """Four hands: the named cards where given, the rest dealt in id order."""
    hands = [0, 0, 0, 0]
    used: set[int] = set()
    for seat, text in fixed.items():
        for c in cards(text):
            if c in used:
                raise ValueError(f"card {c} given twice")
            hands[seat] |= 1 << c
            used.add(c)
    rest = [c for c in range(48) if c not in used]
    for seat in range(4):
        while bin(hands[seat]).count("1") < 12:
            hands[seat] |= 1 << rest.pop(0)
    return hands


def position(fixed: dict[int, str], dealer: int, actions: str = "") -> Game:
    game = Game(Options(), dealer, deal_with(fixed))
    for word in actions.split():
        game.step(WORDS[word] if word in WORDS else parse_card(word))
    return game


def view_of(game: Game) -> View:
    return read_view(encode(game, game.to_move))


def mask_of(game: Game) -> np.ndarray:
    m = np.zeros(N_ACTIONS, dtype=np.int8)
    m[game.legal_actions()] = 1
    return m


def rule_action(game: Game) -> int:
    return RuleBasedAgent().act(encode(game, game.to_move), mask_of(game))


def synthetic_view(
    hand: str,
    trump: int,
    played: dict[int, str] | None = None,
    trick: dict[int, str] | None = None,
    leader: int | None = None,
    voids: dict[int, list[int]] | None = None,
    chooser: int = 1,
) -> View:
    """A play-phase observation filled field by field (relative seats)."""
    v = np.zeros(OBS_SIZE, dtype=np.uint8)

    def put(name: str, index: int) -> None:
        v[field_slice(name).start + index] = 1

    for c in cards(hand):
        put("hand", c)
    for r, text in (played or {}).items():
        for c in cards(text):
            put("played", 48 * r + c)
    for r, text in (trick or {}).items():
        c = parse_card(text)
        put("trick", 48 * r + c)
        put("played", 48 * r + c)
    if leader is not None:
        put("trick_leader", leader)
    for r, suits in (voids or {}).items():
        for s in suits:
            put("voids", 4 * r + s)
    put("trump", trump)
    put("chooser", chooser)
    put("dealer", chooser)
    put("doubling_level", 0)
    put("phase", PHASE_PLAY)
    return read_view(v)


def play_hands(agent: Agent, n_hands: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[Game]]:
    """``agent`` at all four seats for ``n_hands`` random deals: the observations and masks
    it met (every phase) and the finished games. Game.step rejects any illegal choice."""
    rng = np.random.default_rng(seed)
    obs, masks, games = [], [], []
    for _ in range(n_hands):
        dealer = int(rng.integers(4))
        g = Game(Options(), dealer, random_deal(rng, dealer))
        ob = Observer()
        ob.reset(g)
        while not g.is_over:
            s = g.to_move
            o, m = ob.observe(s), mask_of(g)
            obs.append(o)
            masks.append(m)
            a = agent.act(o, m)
            g.step(a)
            ob.update(g, s, a)
        games.append(g)
    return np.array(obs), np.array(masks), games


def random_positions(n_hands: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Observations and masks met along random play."""
    obs, masks, _ = play_hands(RandomAgent(seed), n_hands, seed)
    return obs, masks


# --------------------------------------------------------------------------- interface
class FirstLegal(Agent):
    name = "first"

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(np.flatnonzero(action_mask)[0])


def test_agents_are_the_policies_the_environments_take() -> None:
    for agent in (FirstLegal(), RandomAgent(0), RuleBasedAgent()):
        assert isinstance(agent, Policy) and isinstance(agent, BatchPolicy)


def test_default_act_batch_loops_over_act() -> None:
    obs, masks = random_positions(2, seed=1)
    out = FirstLegal().act_batch(obs, masks)
    assert out.dtype == np.int64 and out.shape == (len(obs),)
    assert all(masks[i, out[i]] for i in range(len(obs)))


def test_act_batch_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="observations must have shape"):
        FirstLegal().act_batch(np.zeros((2, 10)), np.zeros((2, 56)))
    with pytest.raises(ValueError, match="action_masks must have shape"):
        RandomAgent(0).act_batch(np.zeros((2, OBS_SIZE)), np.zeros((3, 56)))


def test_registry_builds_agents_and_lists_names_on_error() -> None:
    assert isinstance(make_agent("random", seed=1), RandomAgent)
    assert isinstance(make_agent("rule"), RuleBasedAgent)
    assert {"random", "rule", "ppo"} <= set(agent_names())
    with pytest.raises(
        ValueError,
        match="unknown agent 'nope'; allowed: ppo, ppo-r1, ppo-r5, ppo-r6, ppo-r7, ppo-r8, ppo-r9,"
        " ppo-r10, ppo-r11, random, rule",
    ):
        make_agent("nope")
    with pytest.raises(ValueError, match="takes no argument"):
        make_agent("rule:extra")
    with pytest.raises(ValueError, match="checkpoint not found"):
        make_agent("ppo:/definitely/not/here.pt")


def test_a_broken_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "broken.pt"
    bad.write_bytes(b"this is not a checkpoint")
    with pytest.raises(
        ValueError, match="could not load PPO checkpoint|PPO agent is not available"
    ):
        make_agent(f"ppo:{bad}")


def test_register_agent_adds_one_factory() -> None:
    register_agent("first", lambda arg, seed: FirstLegal())
    try:
        assert isinstance(make_agent("first"), FirstLegal)
    finally:
        del AGENT_FACTORIES["first"]
    with pytest.raises(ValueError, match="no ':'"):
        register_agent("a:b", lambda arg, seed: FirstLegal())


# --------------------------------------------------------------------------- random
def test_random_agent_is_legal_seeded_and_uniform() -> None:
    obs, masks = random_positions(3, seed=2)
    a, b = RandomAgent(7), RandomAgent(7)
    assert np.array_equal(a.act_batch(obs, masks), b.act_batch(obs, masks))
    out = a.act_batch(obs, masks)
    assert all(masks[i, out[i]] for i in range(len(obs)))
    a.reset(7)
    first = [a.act(obs[i], masks[i]) for i in range(20)]
    a.reset(7)
    assert first == [a.act(obs[i], masks[i]) for i in range(20)]
    # uniform over the six dealer options (4 suits, butifarra, delegate)
    m = np.zeros((6000, N_ACTIONS), dtype=np.int8)
    m[:, 48:54] = 1
    counts = np.bincount(RandomAgent(3).act_batch(np.zeros((6000, OBS_SIZE)), m), minlength=56)
    assert counts[48:54].min() > 850 and counts[48:54].max() < 1150
    with pytest.raises(ValueError, match="no legal action"):
        RandomAgent(0).act(obs[0], np.zeros(N_ACTIONS, dtype=np.int8))


@pytest.mark.parametrize("spec", ["random", "rule", "ppo"])
@pytest.mark.parametrize("seed", [-1, True, False, 1.0, "3", np.float64(2.0), [1]])
def test_make_agent_refuses_a_seed_that_is_not_an_int_naming_it(spec: str, seed: object) -> None:
    with pytest.raises(ValueError, match=r"seed must be an int >= 0 or None, got "):
        make_agent(spec, seed=seed)  # type: ignore[arg-type]


def test_numpy_seeds_are_accepted_and_torch_limits_are_said_up_front() -> None:
    assert isinstance(make_agent("random", seed=np.int64(3)), RandomAgent)
    with pytest.raises(ValueError, match=r"seed for the PPO agent must be below 2\*\*64"):
        make_agent("ppo", seed=2**64)
    with pytest.raises(ValueError, match=r"agent spec must be a non-empty string, got 5"):
        make_agent(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown agent 'xxxxx.*\.\.\.'; allowed"):
        make_agent("x" * 5000)


def test_random_agent_refuses_bad_seeds_and_says_its_probabilities() -> None:
    for seed in (-1, True, 2.0):
        with pytest.raises(ValueError, match="seed must be an int >= 0 or None"):
            RandomAgent(seed)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="seed must be an int >= 0 or None"):
            RandomAgent(0).reset(seed)  # type: ignore[arg-type]
    obs, masks = random_positions(3, seed=4)
    agent = RandomAgent(5)
    probs = agent.action_probs_batch(obs, masks)
    legal = masks != 0
    assert probs.shape == masks.shape and np.allclose(probs.sum(axis=1), 1.0)
    assert np.all(probs[~legal] == 0)
    assert np.allclose(probs[legal], np.repeat(1 / legal.sum(axis=1), legal.sum(axis=1)))
    # asking for the probabilities draws nothing: the next actions are those of a twin
    assert np.array_equal(agent.act_batch(obs, masks), RandomAgent(5).act_batch(obs, masks))
    assert FirstLegal().action_probs_batch(obs, masks) is None  # the default: no distribution


# --------------------------------------------------------------------------- reading
def test_read_view_agrees_with_decode() -> None:
    obs, _ = random_positions(3, seed=3)
    for o in obs[::7]:
        d, v = decode(o), read_view(o)
        assert cards_of(v.hand) == d["hand"]
        assert v.trick == [-1 if c is None else c for c in d["trick"]]
        assert v.leader == (-1 if d["trick_leader"] is None else d["trick_leader"])
        assert [[s for s in range(4) if (v.voids[r] >> s) & 1] for r in range(4)] == d["voids"]
        assert v.trump == (TRUMP_UNSET if d["trump"] is None else d["trump"])
        assert v.chooser == (-1 if d["chooser"] is None else d["chooser"])
        assert v.level == d["doubling_level"]
        for r in range(4):
            assert cards_of(v.played[r]) == d["played"][r]
            assert v.sizes[r] == 12 - len(d["played"][r])


def test_top_and_bottom_follow_card_strength() -> None:
    hand = sum(1 << c for c in cards("1o 12o 2o 8o 9c 10c"))
    assert rb.top_card(hand, 0) == parse_card("1o")
    assert rb.bottom_card(hand, 0) == parse_card("2o")
    assert rb.top_card(hand, 1) == parse_card("9c")
    assert rb.top_card(hand, 2) == -1


# --------------------------------------------------------------------------- bidding
STRONG_OROS = "9o 1o 12o 11o 5o 4o 2c 3c 4e 5e 2b 3b"
WEAK = "2o 3o 4o 2c 3c 4c 2e 3e 4e 2b 3b 4b"
WEAK_PARTNER = "1c 6c 7c 8c 6e 7e 8e 10e 4b 5b 6b 7b"
STOPPERS = "9o 1o 12o 9c 1c 12c 9e 1e 2e 9b 2b 3b"


def test_trump_suit_value_counts_length_and_honours() -> None:
    hand = sum(1 << c for c in cards(STRONG_OROS))
    assert rb.trump_suit_value(hand, 0) > rb.DELEGATE_BELOW
    assert rb.trump_suit_value(hand, 0) > rb.trump_suit_value(hand, 1) + 5
    # the manilla is worth more than the as
    a = sum(1 << c for c in cards("9o 2o 3o"))
    b = sum(1 << c for c in cards("1o 2o 3o"))
    assert rb.trump_suit_value(a, 0) > rb.trump_suit_value(b, 0)


def test_butifarra_value_wants_stoppers_everywhere() -> None:
    assert rb.butifarra_value(sum(1 << c for c in cards(STOPPERS))) >= rb.BUTIFARRA_MIN
    assert rb.butifarra_value(sum(1 << c for c in cards(STRONG_OROS))) < rb.BUTIFARRA_MIN


@pytest.mark.parametrize(
    ("hand", "actions", "expected"),
    [
        (STRONG_OROS, "", TRUMP_BASE + 0),  # a long suit with manilla, as, rey
        (STOPPERS, "", BUTIFARRA),  # manilla-as in three suits: no trump
        (WEAK, "", DELEGATE),  # nothing: let the partner choose
        (WEAK, "delegate", None),  # the partner's forced choice: a suit, never delegate
    ],
)
def test_choose_trump(hand: str, actions: str, expected: int | None) -> None:
    seat = 2 if actions else 0
    game = position({seat: hand}, dealer=0, actions=actions)
    assert game.to_move == seat
    action = rule_action(game)
    if expected is None:
        assert TRUMP_BASE <= action <= BUTIFARRA
    else:
        assert action == expected


def test_defender_doubles_when_strong_in_the_declared_trump() -> None:
    # seat 3 deals and chooses oros; seat 0 (a defender) holds oros manilla, as, rey...
    strong = position({0: STRONG_OROS}, dealer=3, actions="oros")
    assert strong.to_move == 0 and rule_action(strong) == DOUBLE
    weak = position({0: WEAK}, dealer=3, actions="oros")
    assert rule_action(weak) == PASS


def test_declarer_redoubles_only_with_a_strong_trump() -> None:
    # seat 0 chooses oros, seat 1 doubles: seat 2 (chooser's partner) then seat 0 answer
    strong = position({0: STRONG_OROS, 2: "9e 1e 12e 2o 3o 6o 7o 8o 4c 5c 6c 7c"}, 0, "oros double")
    assert strong.to_move == 2 and rule_action(strong) == DOUBLE
    weak = position({0: STRONG_OROS, 2: WEAK_PARTNER}, 0, "oros double")
    assert rule_action(weak) == PASS
    # the chooser (asked after a pass by its partner) redoubles its strong suit
    chooser = position({0: STRONG_OROS, 2: WEAK_PARTNER}, 0, "oros double pass")
    assert chooser.to_move == 0 and rule_action(chooser) == DOUBLE


# 12.5 as oros trump: six trumps, manilla 3 + as 2 + rey 1 + caballo 0.5, no short side suit.
# 10.0 as oros trump: five trumps, manilla 3 + as 2, no short side suit.
MEDIUM_OROS = "9o 1o 5o 4o 3o 2c 3c 4e 5e 6e 2b 3b"


def test_strength_known_values() -> None:
    def hand(text: str) -> int:
        return sum(1 << c for c in cards(text))

    assert rb.trump_suit_value(hand(STRONG_OROS), 0) == 12.5
    assert rb.trump_suit_value(hand(MEDIUM_OROS), 0) == 10.0
    # copas as trump: two trumps, no honour; a side manilla with its as (+1.5 +1)
    assert rb.trump_suit_value(hand(STRONG_OROS), 1) == 4.5
    # eight plain trumps (the sota is no honour), a singleton +0.5 and a void +1.5
    assert rb.trump_suit_value(hand("2o 3o 4o 5o 6o 7o 8o 10o 2c 3c 4c 2e"), 0) == 10.0
    # stoppers: manilla 3, +2 with the as, +1 with the rey; a bare suit is a -1.5 hole
    assert rb.butifarra_value(hand(STOPPERS)) == 6 + 6 + 5 + 3
    assert rb.butifarra_value(hand(WEAK)) == -6.0


@pytest.mark.parametrize(
    ("hand", "level", "doubles"),
    [
        (STRONG_OROS, 0, True),  # 12.5 >= 9.0: contrar
        (STRONG_OROS, 2, True),  # 12.5 >= 9.0 + 2.0: Sant Vicenç too
        (MEDIUM_OROS, 0, True),  # 10.0 >= 9.0: contrar...
        (MEDIUM_OROS, 2, False),  # ...but 10.0 < 11.0: not Sant Vicenç
        (WEAK, 0, False),
    ],
)
def test_a_defender_needs_more_strength_for_each_raise(
    hand: str, level: int, doubles: bool
) -> None:
    v = synthetic_view(hand, trump=0, chooser=1)  # seat 1 (an opponent) chose oros
    v.level = level
    assert rb.doubling_role(v) == "defender"
    assert rb.should_double(v) is doubles


def test_the_chooser_redoubles_from_10_5_and_raises_again_from_12_5() -> None:
    v = synthetic_view(STRONG_OROS, trump=0, chooser=0)  # I chose oros (12.5)
    assert rb.doubling_role(v) == "chooser"
    v.level = 1  # recontrar
    assert rb.should_double(v)
    v.level = 3  # Verraca: 10.5 + 2.0 = 12.5, just reached
    assert rb.should_double(v)
    v = synthetic_view(MEDIUM_OROS, trump=0, chooser=0)  # 10.0 < 10.5
    v.level = 1
    assert not rb.should_double(v)


# --------------------------------------------------------------------------- sayings
def test_manilla_lead_ok_needs_the_as_or_rey() -> None:
    unseen_all = (1 << 48) - 1
    lone = sum(1 << c for c in cards("9c 4c 3c"))
    assert not rb.manilla_lead_ok(lone, 1, unseen_all & ~lone)
    assert rb.manilla_lead_ok(lone | 1 << parse_card("1c"), 1, unseen_all)
    assert rb.manilla_lead_ok(lone | 1 << parse_card("12c"), 1, unseen_all)
    # as and rey both already played: nothing is waiting to fall under the manilla
    gone = sum(1 << c for c in cards("1c 12c"))
    assert rb.manilla_lead_ok(lone, 1, unseen_all & ~lone & ~gone)


def test_caballo_lead_bad_while_higher_cards_are_out() -> None:
    unseen = sum(1 << c for c in cards("9b 1b 12b"))
    assert rb.caballo_lead_bad(parse_card("11b"), 0, unseen)
    assert not rb.caballo_lead_bad(parse_card("11b"), 0, 0)
    assert not rb.caballo_lead_bad(parse_card("10b"), 0, unseen)


def test_lead_keeps_a_lone_manilla_but_cashes_manilla_with_as() -> None:
    hand = "9c 4c 3c 9e 1e 5e 2b 3b 4b 5o 6o 7o"
    game = position({0: hand}, dealer=3, actions="oros pass pass")
    assert game.to_move == 0
    assert rule_action(game) == parse_card("9e")  # manilla backed by the as: cash it
    v = view_of(game)
    v.hand &= ~sum(1 << c for c in cards("9e 1e"))  # without the espadas pair...
    assert rb.choose_lead(v, v.hand) != parse_card("9c")  # ...still not the lone manilla


def test_lead_avoids_the_caballo() -> None:
    game = position({0: "11b 4b 11c 5c 2e 3e 4e 5e 6e 7e 8e 10e"}, 3, "oros pass pass")
    lead = rule_action(game)
    assert lead not in (parse_card("11b"), parse_card("11c"))


def test_declarer_draws_trumps_with_the_master_trump() -> None:
    # oros trump, chosen by me (rel 0): manilla and as of trump -> lead the manilla
    v = synthetic_view("9o 1o 4o 3c 4c 5c 6c 2e 3e 4e 5e 2b", trump=0, chooser=0)
    assert rb.choose_lead(v, v.hand) == parse_card("9o")
    # a defender with two trumps keeps them for ruffing instead
    v = synthetic_view("9o 1o 4c 3c 5c 6c 7c 2e 3e 4e 5e 2b", trump=0, chooser=1)
    assert SUIT[rb.choose_lead(v, v.hand)] != 0
    # no opponent can hold a trump any more: nothing to draw
    v = synthetic_view("9o 1o 4o 3c 4c 5c 6c 2e 3e 4e 5e 2b", trump=0, chooser=0,
                       voids={1: [0], 3: [0]})  # fmt: skip
    assert SUIT[rb.choose_lead(v, v.hand)] != 0


# --------------------------------------------------------------------------- following
@pytest.mark.parametrize(
    ("trump", "leader", "trick", "expected"),
    [
        (0, None, {}, (-1, -1)),  # empty table: I lead
        (0, 3, {3: "1c"}, ("1c", 3)),  # the leader's card
        (0, 2, {2: "1c", 3: "9c"}, ("9c", 3)),  # the manilla beats the as
        (0, 1, {1: "10c", 2: "12c", 3: "2c"}, ("12c", 2)),  # highest of the led suit
        (0, 1, {1: "10c", 2: "12c", 3: "2o"}, ("2o", 3)),  # the lowest trump beats it
        (0, 1, {1: "10c", 2: "2o", 3: "3o"}, ("3o", 3)),  # over-trumped
        (0, 1, {1: "10c", 2: "3o", 3: "2o"}, ("3o", 2)),  # under-trumping does not win
        (4, 1, {1: "5e", 2: "9o", 3: "6e"}, ("6e", 3)),  # butifarra: the led suit only
        (2, 1, {1: "5e", 2: "9o", 3: "2b"}, ("5e", 1)),  # off-suit non-trumps never win
    ],
)
def test_winning_card_of_the_trick_on_the_table(
    trump: int, leader: int | None, trick: dict[int, str], expected: tuple[str | int, int]
) -> None:
    v = synthetic_view("3b", trump=trump, trick=trick, leader=leader)
    card, seat = expected
    assert rb.winning_card(v) == (card if isinstance(card, int) else parse_card(card), seat)


def test_fourth_hand_wins_with_the_cheapest_winner() -> None:
    # dealer 0 -> seat 1 leads 10c, seat 2 plays 2c, seat 3 plays 11c, seat 0 decides
    game = position({0: "12c 1c 4c 2o 3o 4o 5o 6o 7o 8o 10o 11o", 3: "11c 2b",
                     1: "10c", 2: "2c"}, 0, "espadas pass pass 10c 2c 11c")  # fmt: skip
    assert game.to_move == 0
    assert rule_action(game) == parse_card("12c")


def test_plays_low_when_the_trick_cannot_be_won() -> None:
    game = position({0: "1c 4c 3c 2o 3o 4o 5o 6o 7o 8o 10o 11o", 3: "9c", 1: "10c", 2: "2c"},
                    0, "espadas pass pass 10c 2c 9c")  # fmt: skip
    assert rule_action(game) == parse_card("3c")


def test_loads_points_on_a_partner_sure_trick() -> None:
    # seat 1 leads 2c, partner (seat 2) wins with the manilla 9c, seat 3 follows; seat 0 is
    # void in copas: the rey of espadas (not a master: 9e and 1e are out) goes on the pile
    game = position({0: "12e 2e 3e 2b 3b 4b 5b 6b 7b 8b 10o 11o", 1: "2c", 2: "9c", 3: "3c"},
                    0, "oros pass pass 2c 9c 3c")  # fmt: skip
    assert rule_action(game) == parse_card("12e")
    v = view_of(game)
    assert rb.choose_load(v, v.hand) == parse_card("12e")


def test_ruffs_with_the_lowest_trump_when_void() -> None:
    game = position({0: "2o 5o 9o 2b 3b 4b 5b 6b 7b 8b 10e 11e", 1: "9c", 2: "4c", 3: "3c"},
                    0, "oros pass pass 9c 4c 3c")  # fmt: skip
    assert rule_action(game) == parse_card("2o")


def test_card_counting_and_ruff_risk() -> None:
    # espadas trump. I hold the as of copas; the manilla of copas is already played.
    v = synthetic_view("1c 4c 2o", trump=2, played={3: "9c"})
    assert rb.is_master(parse_card("1c"), v.unseen)
    p = rb.win_probability(v, parse_card("1c"), 1)
    assert 0.9 < p < 1.0  # an opponent might (rarely) be void in copas and ruff
    # the next opponent has shown a void in copas and may hold espadas: a ruff is likely
    v2 = synthetic_view("1c 4c 2o", trump=2, played={3: "9c"}, voids={1: [1]})
    assert rb.win_probability(v2, parse_card("1c"), 1) < 0.3
    assert not rb.sure_to_win(v2, parse_card("1c"), 1)
    # ...unless it has shown a void in trumps too
    v3 = synthetic_view("1c 4c 2o", trump=2, played={3: "9c"}, voids={1: [1, 2], 3: [1, 2]})
    assert rb.win_probability(v3, parse_card("1c"), 1) == 1.0
    assert rb.sure_to_win(v3, parse_card("1c"), 1)


def test_void_and_hold_probabilities() -> None:
    v = synthetic_view("1c 4c 2o", trump=2, voids={1: [0]})
    assert rb.void_probability(v, 1, 0) == 1.0
    assert rb.hold_probability(v, 1, 1 << parse_card("9o")) == 0.0
    p = rb.hold_probability(v, 3, 1 << parse_card("9c"))
    assert p == pytest.approx(1 / 3)


# --------------------------------------------------------------------------- whole games
def test_rule_agent_is_legal_deterministic_and_batch_equals_single() -> None:
    obs, masks = random_positions(8, seed=4)
    agent = RuleBasedAgent()
    batch = agent.act_batch(obs, masks)
    single = np.array([agent.act(obs[i], masks[i]) for i in range(len(obs))])
    assert np.array_equal(batch, single)
    assert all(masks[i, batch[i]] for i in range(len(obs)))
    assert np.array_equal(batch, RuleBasedAgent().act_batch(obs, masks))


def test_bits_from_masks_are_the_legal_integers_of_each_row() -> None:
    _, masks = random_positions(2, seed=9)
    assert bits_from_masks(masks) == [bits_from_mask(m) for m in masks]
    assert bits_from_masks(masks[:0]) == []


def test_rule_agent_plays_whole_hands_legally() -> None:
    _, _, games = play_hands(RuleBasedAgent(), 30, seed=5)
    assert all(g.is_over and sum(g.team_points) == 72 for g in games)


RELEASE_SHA256: dict[int, str] = {
    1: "4b8016b4594e8ce4f51479a14d55e12e67adccef880b684d45057fa3f9b2001b",
    5: "932c44bf09a6305c2c5bc4c97dd42379a10cefbdc7bf954db5998e60c9d44d33",
    6: "f5eba25adf347a8e53ebc7e50122a1686cce49e0efe983621da43566e386fe38",
    7: "03ba7d82a7443da5960f5e2528e035c3df9d0a6f89cf86545a223d33e4a44fd6",
    8: "ddaef3c31459ecd296c3044f0228ac402149ffd5cc3b0817106cfb24d4c879bb",
    9: "b5c42774b5e26de5c412a04b4e846c9f114e52f4edc8adeea94e18d71b797165",
    10: "d9ed1e221d851c3161596ac32ac19d7525c5299da105751262d82e1efedab098",
    11: "5b78e522ba17a166f466994b882bc0b81b1a039b393938ef3ed47a6d57af9d8d",
    12: "0fdf1d4ee4b1a94427f89ac117b1d3218b3a1b0515b1e9f5666b804f56212cf8",
}
"""Each shipped PPO policy's file as it was shipped as ``ppo`` (release 12 still is: the
search agent's default bidder and card prior); the earlier ones are kept as ``ppo-rN``."""
SHIPPED = max(RELEASE_SHA256)
"""The release ``ppo`` is now."""


def test_ppo_r1_stays_the_panel_and_its_search_bidder() -> None:
    """Figures measured with the first shipped policy stay reproducible: ``ppo-r1`` is that
    file, byte for byte, and the evaluation panel and its search member's bidder use it,
    whatever ``ppo`` is now; the search agent's default bidder is release 12, checked by
    its SHA-256 (a new release under ``ppo`` must pin it first), ``bidding=ppo-r6`` gives
    the default bidder before it and ``bidding=ppo-r1`` the bidder of the earlier search
    figures."""
    import hashlib

    need("torch")
    from agents import R1_PPO_CHECKPOINT
    from agents.evaluation.protocol import PANEL, PANEL_SEARCH

    assert hashlib.sha256(R1_PPO_CHECKPOINT.read_bytes()).hexdigest() == RELEASE_SHA256[1]
    r1 = make_agent("ppo-r1", seed=0)
    assert r1.checkpoint_path == str(R1_PPO_CHECKPOINT)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="'ppo-r1' takes no argument"):
        make_agent("ppo-r1:other.pt")
    assert PANEL["ppo"] == "ppo-r1" and PANEL_SEARCH.endswith("bidding=ppo-r1")
    from agents import DEFAULT_PPO_CHECKPOINT, R6_PPO_CHECKPOINT

    search = make_agent("search", seed=0)
    assert search.bidding.checkpoint_path == str(DEFAULT_PPO_CHECKPOINT)  # type: ignore[attr-defined]
    digest = hashlib.sha256(DEFAULT_PPO_CHECKPOINT.read_bytes()).hexdigest()
    assert digest == RELEASE_SHA256[SHIPPED]
    before = make_agent("search:bidding=ppo-r6", seed=0)
    assert before.bidding.checkpoint_path == str(R6_PPO_CHECKPOINT)  # type: ignore[attr-defined]
    earlier = make_agent("search:bidding=ppo-r1", seed=0)
    assert earlier.bidding.checkpoint_path == str(R1_PPO_CHECKPOINT)  # type: ignore[attr-defined]


def test_every_release_but_the_shipped_one_is_kept() -> None:
    """The registry keeps a ``ppo-rN`` for every release shipped before ``ppo`` that has a
    digest here, and a kept release has its digest (a new release pins both)."""
    from agents import PPO_RELEASES

    assert set(PPO_RELEASES) == set(RELEASE_SHA256) - {SHIPPED}
    assert {f"ppo-r{n}" for n in PPO_RELEASES} <= set(agent_names())


@pytest.mark.parametrize("release", sorted(set(RELEASE_SHA256) - {1, SHIPPED}))
def test_earlier_releases_are_kept_byte_for_byte(release: int) -> None:
    """``ppo-r5`` to ``ppo-r11`` are the files once shipped as ``ppo``, unchanged."""
    import hashlib

    need("torch")
    from agents import PPO_RELEASES

    path, digest = PPO_RELEASES[release], RELEASE_SHA256[release]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    spec = f"ppo-r{release}"
    agent = make_agent(spec, seed=0)
    assert agent.checkpoint_path == str(path)  # type: ignore[attr-defined]
    assert make_agent(f"{spec}:allow_variants").supported_variants  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=f"'{spec}' takes no argument"):
        make_agent(f"{spec}:other.pt")
