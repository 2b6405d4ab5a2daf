"""The regional variants of docs/RULES.md ("Variants"): obligada, linear doubling and the
butifarra doubling cap, from the worked examples of that page, in every engine.

The expected legal sets, multipliers and chains below are copied from the page's tables and
examples (not computed from the code under test); the brute-force oracle
(``tests/test_oracle_legal_cards.py``) and the differential tests (``tests/test_batched.py``,
``tests/integrations/test_openspiel.py``) cover random positions.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from butifarra_env import butifarra_v0
from butifarra_env.core import rules
from butifarra_env.core.actions import BUTIFARRA, DOUBLE, DOUBLING_MASK, PASS, TRUMP_BASE
from butifarra_env.core.cards import N_CARDS, SUIT, cards_of, mask_of
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import NO_TRUMP, PHASE_DOUBLING, PHASE_PLAY, random_deal
from butifarra_env.envs.batched import BatchedEnv
from butifarra_env.envs.gym_env import SingleAgentEnv
from butifarra_env.envs.gym_vector import ButifarraVectorEnv
from butifarra_env.envs.parallel import parallel_env
from butifarra_env.envs.replay import replay
from butifarra_env.records import RecordError, load_records, save_records
from butifarra_env.records.replay import replay_game
from tests.helpers import cards
from tests.playthrough import CASES

ALL_VARIANTS = {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 2}
OROS, COPAS, ESPADAS, BASTOS = range(4)


# ------------------------------------------------------------------ obligada: the examples
# RULES.md, "Obligada", worked examples. The mover plays after the trick's last card, so the
# partner's card is the one two before (the trick is laid by seats 0, 1, 2 ...).
OBLIGADA_EXAMPLES = {
    "cannot beat the rey: the lowest": (OROS, "12e", "3e 7e 10e 9o", "3e 7e 10e", "3e", 3),
    "trumped by an opponent: the lowest, no over-trump": (
        OROS,
        "1c 4o",
        "12c 7c 4c 9o",
        "12c 7c 4c",
        "4c",
        3,
    ),
    "the as ranks above the rey": (OROS, "9b", "1b 12b", "1b 12b", "12b", 3),
    "can beat: any card that beats": (OROS, "10b", "8b 12b 1b", "12b 1b", "12b 1b", 3),
    "partner winning: any card of the suit": (OROS, "5e 3e", "2e 1e", "2e 1e", "2e 1e", 2),
    "void: any trump": (OROS, "12c", "3o 9o 4e", "3o 9o", "3o 9o", 4),
    "butifarra, cannot beat the as": (NO_TRUMP, "1e", "3e 12e 10e", "3e 12e 10e", "3e", 3),
}
"""name -> (trump, trick, hand, legal lliure, legal obligada, the rule that decides)"""


@pytest.mark.parametrize("name", list(OBLIGADA_EXAMPLES))
def test_obligada_worked_examples(name: str) -> None:
    trump, trick, hand, lliure, obligada, rule = OBLIGADA_EXAMPLES[name]
    plays = cards(trick)
    led, win, win_seat = rules.trick_state(enumerate(plays), trump)
    mover = len(plays)
    partner = rules.partner_winning(win_seat, mover)
    h = mask_of(cards(hand))
    for variant, expected in ((False, lliure), (True, obligada)):
        got = rules.legal_cards(h, led, win, partner, trump, variant)
        assert set(cards_of(got)) == set(cards(expected)), (name, variant)
    # obligada changes rule 3's fallback only: the rule that decides is named as before
    assert rules.legal_card_rule(h, led, win, partner, trump) == rule


def test_lowest_card_follows_the_strength_order() -> None:
    """From the lowest: 2, 3, 4, 5, 6, 7, 8, sota, caballo, rey, as, manilla (RULES.md)."""
    low_to_high = cards("2c 3c 4c 5c 6c 7c 8c 10c 11c 12c 1c 9c")
    for i, card in enumerate(low_to_high):
        assert rules.lowest_card(mask_of(low_to_high[i:])) == 1 << card
    assert rules.lowest_card(mask_of(cards("9o 1o"))) == 1 << cards("1o")[0]
    assert rules.lowest_card(mask_of(cards("10b 8b"))) == 1 << cards("8b")[0]
    assert rules.lowest_card(0) == 0


# ------------------------------------------------------------------ obligada in the engines
def _deal(fixed: dict[int, str], no_more: dict[int, int]) -> list[list[int]]:
    """Four 12-card hands: seat ``s`` holds the cards ``fixed[s]``, and no more cards of the
    suit ``no_more[s]`` than those; the rest is shared out (most constrained cards first)."""
    hands = {s: cards(fixed.get(s, "")) for s in range(4)}
    rest = [c for c in range(N_CARDS) if all(c not in h for h in hands.values())]
    rest.sort(key=lambda c: -sum(no_more.get(s) == SUIT[c] for s in range(4)))
    for c in rest:
        room = [s for s in range(4) if len(hands[s]) < 12 and no_more.get(s) != SUIT[c]]
        hands[max(room, key=lambda s: 12 - len(hands[s]))].append(c)
    assert all(len(h) == 12 for h in hands.values())
    return [sorted(hands[s]) for s in range(4)]


# Two worked examples played from the first trick: seat 3 deals and names oros, seat 0 (the
# mano) leads. (the deal, the cards played before the mover, legal lliure, legal obligada)
TABLE_EXAMPLES = {
    "cannot beat the rey": (
        _deal({0: "12e", 1: "3e 7e 10e 9o"}, {1: ESPADAS}),
        "12e",
        "3e 7e 10e",
        "3e",
    ),
    "trumped by an opponent": (
        _deal({0: "1c", 1: "4o", 2: "12c 7c 4c 9o"}, {1: COPAS, 2: COPAS}),
        "1c 4o",
        "12c 7c 4c",
        "4c",
    ),
}


@pytest.mark.parametrize("name", list(TABLE_EXAMPLES))
@pytest.mark.parametrize("obligada", [False, True], ids=["lliure", "obligada"])
def test_obligada_examples_in_butifarra_v0_and_the_batched_engine(
    name: str, obligada: bool
) -> None:
    hands, before, lliure, forced = TABLE_EXAMPLES[name]
    expected = cards(forced if obligada else lliure)
    actions = [TRUMP_BASE + OROS, *cards(before)]
    env = butifarra_v0.env(obligada=obligada, max_doubling_level=0)
    env.reset(options={"dealer": 3, "hands": hands})
    for a in actions:
        env.step(a)
    mask = env.last()[0]["action_mask"]
    assert sorted(np.flatnonzero(mask).tolist()) == sorted(expected)
    eng = BatchedEnv(2, seed=0, obligada=obligada, max_doubling_level=0)
    eng.reset(dealers=np.array([3, 3]), hands=np.array([hands, hands]))
    for a in actions:
        _, mask_b, _, _, _ = eng.step(np.array([a, a]))
    for row in mask_b:
        assert sorted(np.flatnonzero(row).tolist()) == sorted(expected)


def test_a_record_is_checked_under_its_own_options() -> None:
    """A lliure hand that plays a card obligada forbids (the sota, not the 3) replays as
    recorded, and is refused once its options say obligada."""
    hands, before, _, _ = TABLE_EXAMPLES["cannot beat the rey"]
    moves = [TRUMP_BASE + OROS, *cards(before), *cards("10e")]
    env = butifarra_v0.raw_env(max_doubling_level=0)
    env.reset(options={"dealer": 3, "hands": hands})
    for a in moves:
        env.step(a)
    record = env.game_record()
    assert [a for _, a in replay_game(record).actions] == moves
    record["options"]["obligada"] = True
    with pytest.raises(RecordError, match=r"actions\[2\].*illegal action 33 \(play 10e\)"):
        replay_game(record)


# ------------------------------------------------------------------ linear doubling
# RULES.md, "Linear doubling": the multiplier table, levels 0-4.
LINEAR = {
    "suit": (OROS, 2, [1, 2, 3, 4, 5]),
    "butifarra": (NO_TRUMP, 2, [2, 4, 6, 8, 10]),
    "butifarra, base 1": (NO_TRUMP, 1, [1, 2, 3, 4, 5]),
}
DEFAULT = {
    "suit": [1, 2, 4, 8, 16],
    "butifarra": [2, 4, 8, 16, 32],
    "butifarra, base 1": [1, 2, 4, 8, 16],
}


@pytest.mark.parametrize("case", list(LINEAR))
def test_linear_doubling_multiplier_table(case: str) -> None:
    trump, base, table = LINEAR[case]
    assert [rules.multiplier(trump, k, base, linear=True) for k in range(5)] == table
    assert [rules.multiplier(trump, k, base) for k in range(5)] == DEFAULT[case]
    options = Options(butifarra_base=base, linear_doubling=True)
    assert [options.multiplier(trump, k) for k in range(5)] == table
    for suit in (COPAS, ESPADAS, BASTOS):
        assert rules.multiplier(suit, 3, base, linear=True) == 4
    trumps = np.full(5, trump)
    np.testing.assert_array_equal(rules.multiplier(trumps, np.arange(5), base, True), table)


@pytest.mark.parametrize(
    ("options", "worst"),
    [
        ({}, 1152),  # 36 x 2 x 16: a butifarra at Verraca
        ({"linear_doubling": True}, 360),  # 36 x 2 x 5
        ({"butifarra_base": 1, "linear_doubling": True}, 180),
        ({"butifarra_max_doubling_level": 2}, 576),  # a suit at Verraca, 36 x 16
        ({"butifarra_max_doubling_level": 2, "linear_doubling": True}, 216),  # 36 x 2 x 3
        ({"max_doubling_level": 2, "butifarra_max_doubling_level": 1}, 144),  # 36 x 4 both
        ({"max_doubling_level": 0}, 72),
    ],
)
def test_worst_hand_loss_follows_the_variants(options: dict, worst: int) -> None:
    assert Options(**options).worst_hand_loss == worst
    env = butifarra_v0.env(**options)
    env.reset(seed=0)
    mover = env.agent_selection
    env.step(0)  # a card while trump is chosen: the wrapped env ends the episode, penalised
    assert env.rewards[mover] == -worst


def _play_out(game: Game, rng: np.random.Generator) -> None:
    while not game.is_over:
        legal = game.legal_actions()
        game.step(legal[rng.integers(len(legal))])


@pytest.mark.parametrize(("linear", "mult"), [(False, 8), (True, 6)])
def test_butifarra_recontrada_scores_six_times_with_linear_doubling(
    linear: bool, mult: int
) -> None:
    deal_rng = np.random.default_rng(3)
    game = Game(Options(linear_doubling=linear), 0, random_deal(deal_rng, 0))
    for a in (BUTIFARRA, DOUBLE, DOUBLE, PASS, PASS):  # contrar, recontrar, then both pass
        game.step(a)
    assert game.phase == PHASE_PLAY and game.level == 2
    _play_out(game, np.random.default_rng(0))
    assert game.multiplier == mult
    winner = int(np.argmax(game.team_points))
    assert game.scores is not None
    assert game.scores[winner] == (game.team_points[winner] - 36) * mult > 0
    assert game.result()["multiplier"] == mult  # type: ignore[index]


# ------------------------------------------------------------------ the butifarra cap
def test_butifarra_chain_stops_at_recontrar() -> None:
    """RULES.md's example: seat 0 deals and sings butifarra, seat 1 says contrar, seat 2
    recontrar; the cap (2) is reached, so play begins with seat 1 leading, at x8."""
    g = Game(Options(butifarra_max_doubling_level=2), 0, random_deal(np.random.default_rng(1), 0))
    g.step(BUTIFARRA)
    assert (g.phase, g.to_move, g.legal, g.doubling_cap) == (PHASE_DOUBLING, 1, DOUBLING_MASK, 2)
    g.step(DOUBLE)
    assert (g.phase, g.to_move, g.legal) == (PHASE_DOUBLING, 2, DOUBLING_MASK)
    g.step(DOUBLE)
    assert (g.phase, g.to_move, g.level, g.multiplier) == (PHASE_PLAY, 1, 2, 8)
    assert g.legal == g.hands[1]  # no double offered: the chain has ended
    linear = Game(
        Options(butifarra_max_doubling_level=2, linear_doubling=True),
        0,
        random_deal(np.random.default_rng(1), 0),
    )
    for a in (BUTIFARRA, DOUBLE, DOUBLE):
        linear.step(a)
    assert (linear.phase, linear.multiplier) == (PHASE_PLAY, 6)


@pytest.mark.parametrize("trump", [TRUMP_BASE + OROS, TRUMP_BASE + BASTOS])
def test_the_butifarra_cap_does_not_touch_a_suit(trump: int) -> None:
    g = Game(Options(butifarra_max_doubling_level=2), 0, random_deal(np.random.default_rng(1), 0))
    g.step(trump)
    assert g.doubling_cap == 4
    while g.phase == PHASE_DOUBLING:
        g.step(DOUBLE)
    assert (g.level, g.multiplier) == (4, 16)  # Sant Vicenç and Verraca were called


@pytest.mark.parametrize(("cap", "top"), [(0, 4), (1, 4), (3, 3)])
def test_butifarra_cap_values(cap: int, top: int) -> None:
    """A cap of 0: a butifarra is never doubled; else the chain runs to the cap."""
    options = Options(max_doubling_level=top, butifarra_max_doubling_level=cap)
    g = Game(options, 2, random_deal(np.random.default_rng(cap), 2))
    g.step(BUTIFARRA)
    while g.phase == PHASE_DOUBLING:
        g.step(DOUBLE)
    assert g.phase == PHASE_PLAY and g.level == cap
    assert rules.doubling_cap(NO_TRUMP, top, cap) == cap
    assert rules.doubling_cap(OROS, top, cap) == top
    assert rules.doubling_cap(NO_TRUMP, top) == top
    np.testing.assert_array_equal(
        rules.doubling_cap(np.array([NO_TRUMP, ESPADAS]), top, cap), [cap, top]
    )


# ------------------------------------------------------------------ options and records
def test_default_options_dict_is_unchanged_and_old_dicts_load() -> None:
    old = {"target_score": None, "max_doubling_level": 4, "butifarra_base": 2, "first_dealer": None}
    assert Options().to_dict() == old  # records and deal sets of the default game unchanged
    assert Options.from_dict(old) == Options()
    variant = Options(max_doubling_level=3, **ALL_VARIANTS)
    assert variant.to_dict() == {**old, "max_doubling_level": 3, **ALL_VARIANTS}
    assert Options.from_dict(json.loads(json.dumps(variant.to_dict()))) == variant
    assert Options(obligada=np.bool_(True)).obligada is True


def _played_record(seed: int, **options: object) -> dict:
    env = butifarra_v0.raw_env(**options)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while not all(env.terminations.values()):
        legal = env.legal_actions()
        env.step(legal[rng.integers(len(legal))])
    return env.game_record()


def test_records_keep_the_variants_and_replay_under_them(tmp_path) -> None:
    # seed 5 (the linear playthrough): a butifarra recontrada, x6 under linear doubling
    record = _played_record(5, **ALL_VARIANTS)
    assert {k: record["options"][k] for k in ALL_VARIANTS} == ALL_VARIANTS
    assert record["result"]["multiplier"] == 6
    path = tmp_path / "games.jsonl"
    save_records(path, [record, _played_record(1)])
    loaded, default = load_records(path)
    assert loaded == json.loads(json.dumps(record))
    assert replay(loaded).game_record() == record
    assert replay_game(loaded).options == Options(**ALL_VARIANTS)
    assert set(default["options"]) == {
        "target_score",
        "max_doubling_level",
        "butifarra_base",
        "first_dealer",
    }
    assert replay(default).game_record() == default
    without = json.loads(json.dumps(record))
    del without["options"]["linear_doubling"]  # now x8: the stored result no longer matches
    with pytest.raises(RecordError, match="result"):
        replay_game(without)


def test_the_observation_layout_does_not_carry_the_variants() -> None:
    """Same deal, same moves (a suit named, both defenders pass): every seat's observation
    is the same bytes with or without the variants; only the mask applies them."""
    plain = butifarra_v0.raw_env()
    variant = butifarra_v0.raw_env(**ALL_VARIANTS)
    for moves in ([], [TRUMP_BASE + COPAS], [TRUMP_BASE + COPAS, PASS, PASS]):
        plain.reset(seed=4)
        variant.reset(seed=4)
        for a in moves:
            plain.step(a)
            variant.step(a)
        for agent in plain.possible_agents:
            a, b = plain.observe(agent), variant.observe(agent)
            assert np.array_equal(a["observation"], b["observation"])
            assert np.array_equal(a["action_mask"], b["action_mask"])
        assert np.array_equal(plain.state(), variant.state())


# ------------------------------------------------------------------ every entry point
def test_every_engine_accepts_the_variants() -> None:
    par = parallel_env(**ALL_VARIANTS)
    par.reset(seed=0)
    assert par.aec.game_options == Options(**ALL_VARIANTS)
    single = SingleAgentEnv(**ALL_VARIANTS)
    single.reset(seed=0)
    assert single.game.options == Options(**ALL_VARIANTS)
    assert single._illegal_reward == -216.0
    vec = ButifarraVectorEnv(2, **ALL_VARIANTS)
    assert vec.engine.options == Options(**ALL_VARIANTS)
    assert vec.options == Options(**ALL_VARIANTS).to_dict()
    assert BatchedEnv(2, **ALL_VARIANTS).options == Options(**ALL_VARIANTS)


BAD = [
    ({"obligada": "yes"}, r"obligada must be True or False, got 'yes' \(str\)"),
    ({"obligada": 1}, r"obligada must be True or False, got 1 \(int\)"),
    ({"obligada": None}, r"obligada must be True or False, got None"),
    ({"linear_doubling": "false"}, r"linear_doubling must be True or False"),
    (
        {"butifarra_max_doubling_level": 5},
        r"butifarra_max_doubling_level must be an int 0-4 .*got 5",
    ),
    ({"butifarra_max_doubling_level": -1}, r"butifarra_max_doubling_level must be an int 0-4"),
    ({"butifarra_max_doubling_level": 2.0}, r"butifarra_max_doubling_level must be an int"),
    (
        {"max_doubling_level": 2, "butifarra_max_doubling_level": 3},
        r"butifarra_max_doubling_level must be an int 0-2 or None, got 3: it cannot be above "
        r"max_doubling_level=2",
    ),
]


@pytest.mark.parametrize(("options", "message"), BAD)
def test_bad_variant_values_are_refused_everywhere(options: dict, message: str) -> None:
    for make in (
        lambda: Options(**options),
        lambda: butifarra_v0.env(**options),
        lambda: parallel_env(**options),
        lambda: BatchedEnv(2, **options),
        lambda: SingleAgentEnv(**options),
        lambda: ButifarraVectorEnv(2, **options),
    ):
        with pytest.raises(ValueError, match=message):
            make()


# ------------------------------------------------------------------ the golden playthroughs
def _playthrough_hands(name: str) -> tuple[list[Game], int]:
    """The hands of a golden playthrough case replayed move by move (``tests/playthrough``
    picks among the legal actions with a generator seeded like the env), and how many of
    its card plays had fewer legal cards than the default rules allow."""
    options, seed = CASES[name]
    env = butifarra_v0.env(**options)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    raw = env.unwrapped
    games: list[Game] = []
    narrowed = 0
    for _agent in env.agent_iter():
        obs, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
            continue
        g = raw.game
        if not games or games[-1] is not g:
            games.append(g)
        legal = np.flatnonzero(obs["action_mask"])
        if g.phase == PHASE_PLAY:
            s = g.to_move
            plain = rules.legal_cards(
                g.hands[s], g.led_suit, g.win_card, g.partner_winning(s), g.trump
            )
            narrowed += plain.bit_count() > len(legal)
        env.step(int(legal[rng.integers(len(legal))]))
    return games, narrowed


def test_the_variant_playthroughs_show_their_variant() -> None:
    """Each variant's golden file has a move the variant decides: obligada forced plays, a
    linear multiplier (butifarra recontrada x6), a butifarra chain stopped at recontrar."""
    _, narrowed = _playthrough_hands("obligada_seed0")
    assert narrowed >= 1
    _, none = _playthrough_hands("default_seed0")
    assert none == 0
    (linear,), _ = _playthrough_hands("linear_doubling_seed5")
    assert (linear.trump, linear.level, linear.multiplier) == (NO_TRUMP, 2, 6)
    (capped,), _ = _playthrough_hands("butifarra_cap2_seed3")
    assert (capped.trump, capped.level, capped.multiplier) == (NO_TRUMP, 2, 8)
    assert capped.actions[:3] == [(3, BUTIFARRA), (0, DOUBLE), (1, DOUBLE)]
    # without the cap, the same chain is asked on after recontrar (seed 3 went to Verraca)
    g = Game(Options(), capped.dealer, list(capped.initial_hands))
    for _, a in capped.actions[:3]:
        g.step(a)
    assert g.phase == PHASE_DOUBLING and g.legal == DOUBLING_MASK
