"""A deterministic club-style heuristic player, working from the observation vector only.

The player reads its observation once into a :class:`~butifarra_env.core.observation.View` of
bitmasks (the observation module owns the layout: one ``packbits`` of the 0/1 prefix of the
vector, then shifts) and then applies named heuristics, each a small function tested on
hand-built positions in ``tests/test_agents.py``. Who wins a trick and which cards take it
are :func:`butifarra_env.core.rules.trick_winner` and :func:`butifarra_env.core.rules.winners`, the
rules the engine itself applies.

Bidding (the dealer, or the partner after a delegation)
    :func:`trump_suit_value` scores a suit as trump from its length and honours (manilla,
    as, rey...) plus side manillas and short side suits to ruff; :func:`butifarra_value`
    scores a no-trump hand by its stoppers (a manilla, better with the as) and penalises
    unguarded suits. :func:`choose_trump` sings butifarra with stoppers in several suits,
    the best suit when it is strong enough, and otherwise delegates ("delegar"); the
    partner's forced choice takes the best suit (or butifarra) without the option.

Doubling ("contrar", "recontrar", ...)
    :func:`should_double`: the chooser raises with a strong trump holding, its partner
    with good support, a defender with strength in the declared trump (or stoppers all
    round against a butifarra); each further raise of the same side needs more. The
    thresholds were calibrated on rule-vs-rule play (where the raising side's expected
    score is clearly positive), not against the random agent.

Card play (tracks played cards and revealed voids through the observation)
    - :func:`win_probability` (and :func:`sure_to_win`, probability 1): card counting
      (which stronger cards are still out, and who can hold them given the revealed
      voids) plus ruff risk (:func:`void_probability` x :func:`hold_probability` of a
      trump). Beating is compulsory, so an opponent that holds a winner plays it.
    - following (:func:`choose_follow`): take the trick with the cheapest winner that
      holds with probability >= :data:`TAKE_MIN_P` (:func:`cheapest_winner`); when the
      partner's card holds, load points on it ("carregar", :func:`choose_load`), keeping
      masters and trumps for later; when the trick cannot be won, play low
      (:func:`lowest_card`).
    - leading (:func:`choose_lead`): draw trumps with the master trump, cash winners,
      lead into the partner's void so they ruff, else lead low from the suit that gives
      least away, following the sayings "de manilla no saldrás si no tienes rey o as"
      (:func:`manilla_lead_ok`) and "salida de caballo, salida de animal"
      (:func:`caballo_lead_bad`).

Relative seats in the observation: 0 me, 1 next (opponent, plays after me),
2 partner, 3 previous (opponent).

This module is the readable definition, one observation at a time (:meth:`RuleBasedAgent.act`);
:meth:`RuleBasedAgent.act_batch` runs :func:`agents.rule_batch.decide_batch`, the same decisions
as numpy operations over the whole batch. The thresholds and weights (:data:`TAKE_MIN_P`,
:data:`DELEGATE_BELOW`, the valuation weights...) are defined there, once, and imported here.
"""

from __future__ import annotations

import numpy as np

from agents.base import Agent, check_batch, check_one
from agents.rule_batch import (
    BUTIFARRA_MIN,
    CASH_MIN_P,
    COST_MASTER,
    COST_PER_POINT,
    COST_TRUMP,
    DELEGATE_BELOW,
    DOUBLE_STEP,
    DOUBLE_THRESHOLDS,
    DRAW_TRUMPS_WITH,
    GUARDED_AS,
    GUARDED_AS_LENGTH,
    HOLE_PENALTY,
    KEEP_TRUMP_BELOW_POINTS,
    LEAD_CABALLO,
    LEAD_INTO_RUFF,
    LEAD_MANILLA,
    LEAD_NOT_LOWEST,
    LOAD_MIN_P,
    OVERTAKE_POINTS,
    PATTERN_POINTS,
    RUFF_FROM_TRUMPS,
    RUFF_SINGLETON,
    RUFF_VOID,
    SIDE_MANILLA,
    SIDE_MANILLA_AS,
    STOPPER_AS,
    STOPPER_MANILLA,
    STOPPER_REY,
    STOPPER_RUN,
    STOPPER_RUN_FROM,
    STRONGEST_IN_PATTERN,
    TAKE_MIN_P,
    TRUMP_HONOUR,
    WEAKEST_IN_PATTERN,
    decide_batch,
)
from butifarra_env.core import rules
from butifarra_env.core.actions import (
    BUTIFARRA,
    DELEGATE,
    DOUBLE,
    PASS,
    TRUMP_BASE,
    bits_from_mask,
)
from butifarra_env.core.cards import (
    BEATS,
    NUMBER,
    POINTS,
    STRENGTH,
    SUIT,
    SUIT_MASK,
    cards_of,
)
from butifarra_env.core.observation import View, pack_bits
from butifarra_env.core.rules import (
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_PLAY,
)


def _suit_pattern(mask: int, suit: int) -> int:
    return (mask >> (12 * suit)) & 0xFFF


# ---------------------------------------------------------------- card helpers
def top_card(mask: int, suit: int) -> int:
    """The strongest card of ``suit`` in ``mask`` (-1 if none)."""
    pattern = _suit_pattern(mask, suit)
    return 12 * suit + STRONGEST_IN_PATTERN[pattern] if pattern else -1


def bottom_card(mask: int, suit: int) -> int:
    """The weakest card of ``suit`` in ``mask`` (-1 if none)."""
    pattern = _suit_pattern(mask, suit)
    return 12 * suit + WEAKEST_IN_PATTERN[pattern] if pattern else -1


def winning_card(v: View) -> tuple[int, int]:
    """(card, relative seat) winning the trick on the table (:func:`rules.trick_state`);
    (-1, -1) when the table is empty."""
    if v.leader < 0:
        return -1, -1
    seats = [(v.leader + k) & 3 for k in range(v.n_trick)]  # in playing order
    _, card, winner = rules.trick_state([(r, v.trick[r]) for r in seats], v.trump)
    return card, winner


def is_master(card: int, unseen: int) -> bool:
    """No card still out (unseen) is stronger in its suit."""
    return not (unseen & BEATS[card])


def may_hold_trumps(v: View, seat: int) -> bool:
    t = v.trump
    return t < NO_TRUMP and not (v.voids[seat] >> t) & 1 and bool(v.unseen & SUIT_MASK[t])


def opponents_after(v: View) -> tuple[int, ...]:
    """Opponents still to play after me in the current trick (rel 1 and/or 3)."""
    n = v.n_trick
    if n == 0:
        return (1, 3)
    return (1,) if n <= 2 else ()


def void_probability(v: View, seat: int, suit: int) -> float:
    """Chance that ``seat`` holds no card of ``suit``: 1 when shown void, else the
    hypergeometric chance that none of the unseen cards of the suit is in its hand."""
    if (v.voids[seat] >> suit) & 1:
        return 1.0
    u = (v.unseen & SUIT_MASK[suit]).bit_count()
    total = v.unseen.bit_count()
    p = 1.0
    for i in range(v.sizes[seat]):
        if total - i <= 0:
            break
        p *= max(0, total - u - i) / (total - i)
    return p


def hold_probability(v: View, seat: int, cards: int) -> float:
    """Chance that ``seat`` holds at least one of the unseen ``cards`` (all of one suit),
    each card being with one of the players not shown void in it, in proportion to the
    cards they have left."""
    cards &= v.unseen
    if not cards:
        return 0.0
    suit = SUIT[(cards & -cards).bit_length() - 1]
    if (v.voids[seat] >> suit) & 1:
        return 0.0
    total = sum(v.sizes[q] for q in (1, 2, 3) if not (v.voids[q] >> suit) & 1)
    if total <= 0:
        return 0.0
    return 1.0 - (1.0 - v.sizes[seat] / total) ** cards.bit_count()


def beat_probability(v: View, seat: int, card: int, led: int) -> float:
    """Chance that ``seat``, still to play, beats ``card`` (winning a trick led in ``led``).

    Beating is compulsory in Butifarra, so "holds a card that beats" is "beats": a higher
    card of the suit, or a void in the led suit plus a (higher) trump.
    """
    trump = v.trump
    higher = v.unseen & BEATS[card]
    if SUIT[card] == led:
        p = hold_probability(v, seat, higher)
        if trump < NO_TRUMP and led != trump and not (v.voids[seat] >> trump) & 1:
            p += void_probability(v, seat, led) * hold_probability(
                v, seat, v.unseen & SUIT_MASK[trump]
            )
        return min(p, 1.0)
    if not higher:
        return 0.0
    return void_probability(v, seat, led) * hold_probability(v, seat, higher)


def win_probability(v: View, card: int, led: int) -> float:
    """Chance that ``card``, now winning the trick, holds against the opponents to come."""
    p = 1.0
    for r in opponents_after(v):
        p *= 1.0 - beat_probability(v, r, card, led)
    return p


def sure_to_win(v: View, card: int, led: int) -> bool:
    """``card`` holds the trick whatever the opponents still to play hold: no stronger
    card of the suit is out with them, and none of them can be void and ruff."""
    return win_probability(v, card, led) >= 1.0


def low_cost(v: View, card: int) -> int:
    """How much playing ``card`` gives away: points first, then trumps, masters, strength."""
    cost = POINTS[card] * COST_PER_POINT + STRENGTH[card]
    if SUIT[card] == v.trump:
        cost += COST_TRUMP
    if is_master(card, v.unseen):
        cost += COST_MASTER
    return cost


def lowest_card(v: View, legal: int) -> int:
    """Play low when the trick cannot be won: the legal card that gives away least."""
    return min(cards_of(legal), key=lambda c: (low_cost(v, c), c))


def cheapest_winner(v: View, cards: list[int]) -> int:
    """Among cards that win, the one it hurts least to spend (weakest, non-trump first)."""
    return min(cards, key=lambda c: (SUIT[c] == v.trump, STRENGTH[c], c))


def choose_load(v: View, legal: int) -> int:
    """ "Carregar": the partner will win the trick, so add the most points we can spare.

    Masters (future sure tricks) and trumps are kept unless nothing else is legal.
    """

    def key(c: int) -> tuple[int, int, int]:
        keep = is_master(c, v.unseen) or (
            SUIT[c] == v.trump and POINTS[c] < KEEP_TRUMP_BELOW_POINTS
        )
        return (0 if keep else 1, POINTS[c], -STRENGTH[c])

    return max(cards_of(legal), key=key)


# ---------------------------------------------------------------- the sayings
def manilla_lead_ok(hand: int, suit: int, unseen: int) -> bool:
    """ "De manilla no saldrás si no tienes rey o as": lead the manilla only with the as or
    the rey of its suit, or once both are out of play (then nothing is waiting to fall)."""
    as_bit, rey_bit = 1 << (12 * suit), 1 << (12 * suit + 11)
    if hand & (as_bit | rey_bit):
        return True
    return not unseen & (as_bit | rey_bit)


def caballo_lead_bad(card: int, hand: int, unseen: int) -> bool:
    """ "Salida de caballo, salida de animal": leading a caballo while a stronger card of its
    suit is still out offers it (and the partner's honours) to the opponents."""
    return NUMBER[card] == 11 and bool(unseen & BEATS[card])


# ---------------------------------------------------------------- card play
def choose_lead(v: View, legal: int) -> int:
    """Lead: draw trumps, cash sure winners, feed the partner's ruff, else lead low."""
    hand = v.hand & legal
    unseen = v.unseen
    trump = v.trump
    trump_game = trump < NO_TRUMP

    # 1. Draw the opponents' trumps with the master trump.
    if trump_game and (hand & SUIT_MASK[trump]):
        opp_trumps = may_hold_trumps(v, 1) or may_hold_trumps(v, 3)
        mine = (hand & SUIT_MASK[trump]).bit_count()
        if opp_trumps and (v.chooser in (0, 2) or mine >= DRAW_TRUMPS_WITH):
            c = top_card(hand, trump)
            if is_master(c, unseen) and (NUMBER[c] != 9 or manilla_lead_ok(hand, trump, unseen)):
                return c

    # 2. Cash a sure winner, preferring the suit with most points still out.
    best, best_key = -1, (-1, -1)
    for s in range(4):
        if s == trump:
            continue
        c = top_card(hand, s)
        if c < 0 or win_probability(v, c, s) < CASH_MIN_P:
            continue
        if NUMBER[c] == 9 and not manilla_lead_ok(hand, s, unseen):
            continue
        key = (PATTERN_POINTS[_suit_pattern(unseen, s)], -STRENGTH[c])
        if key > best_key:
            best, best_key = c, key
    if best >= 0:
        return best

    # 3. Lead into the partner's void so the partner ruffs.
    if trump_game and may_hold_trumps(v, 2):
        for s in range(4):
            if s == trump or not hand & SUIT_MASK[s] or not (v.voids[2] >> s) & 1:
                continue
            if (v.voids[3] >> s) & 1 and may_hold_trumps(v, 3):
                continue  # the last opponent would over-ruff
            c = bottom_card(hand, s)
            if POINTS[c] == 0:
                return c

    # 4. Lead low from the suit that gives least away.
    return min(cards_of(hand), key=lambda c: (lead_cost(v, c), c))


def lead_cost(v: View, card: int) -> int:
    """Cost of leading ``card`` when there is no winner to cash (lower is better)."""
    s = SUIT[card]
    hand, unseen, trump = v.hand, v.unseen, v.trump
    cost = low_cost(v, card)
    if card != bottom_card(hand, s):
        cost += LEAD_NOT_LOWEST  # lead the lowest of a suit
    if caballo_lead_bad(card, hand, unseen):
        cost += LEAD_CABALLO
    if NUMBER[card] == 9 and not manilla_lead_ok(hand, s, unseen):
        cost += LEAD_MANILLA
    if trump < NO_TRUMP and s != trump:
        for r in (1, 3):
            if (v.voids[r] >> s) & 1 and may_hold_trumps(v, r):
                cost += LEAD_INTO_RUFF  # the opponent ruffs it
    return cost


def choose_follow(v: View, legal: int) -> int:
    """Second, third or fourth to play: win cheaply and safely, load the partner, or go low."""
    led = SUIT[v.trick[v.leader]]
    trump = v.trump
    win, win_seat = winning_card(v)
    partner_winning = rules.partner_winning(win_seat, 0)  # seats are relative: 0 is us
    if partner_winning and win_probability(v, win, led) >= LOAD_MIN_P:
        return choose_load(v, legal)
    takers = legal & rules.winners(trump, win)  # the legal cards that would take the trick
    likely = [c for c in cards_of(takers) if win_probability(v, c, led) >= TAKE_MIN_P]
    if not likely:
        return lowest_card(v, legal)
    if partner_winning:  # over-take the partner's doubtful trick only when it is worth it
        points = sum(POINTS[c] for c in v.trick if c >= 0)
        if points + max(POINTS[c] for c in likely) < OVERTAKE_POINTS:
            return lowest_card(v, legal)
    return cheapest_winner(v, likely)


def choose_card(v: View, legal: int) -> int:
    return choose_lead(v, legal) if v.n_trick == 0 else choose_follow(v, legal)


# ---------------------------------------------------------------- bidding
def trump_suit_value(hand: int, suit: int) -> float:
    """Strength of ``hand`` with ``suit`` as trump: length and honours in trumps, side
    manillas (with the as behind them) and short side suits to ruff with."""
    trumps = hand & SUIT_MASK[suit]
    n = trumps.bit_count()
    value = float(n)
    for c in cards_of(trumps):
        value += TRUMP_HONOUR.get(NUMBER[c], 0.0)
    for s in range(4):
        if s == suit:
            continue
        side = hand & SUIT_MASK[s]
        k = side.bit_count()
        if side >> (12 * s + 8) & 1:  # side manilla
            value += SIDE_MANILLA
            if side >> (12 * s) & 1:
                value += SIDE_MANILLA_AS
        if n >= RUFF_FROM_TRUMPS:
            value += RUFF_VOID if k == 0 else RUFF_SINGLETON if k == 1 else 0.0
    return value


def butifarra_value(hand: int) -> float:
    """No-trump strength: a manilla stops a suit (more with the as and rey behind it, and
    long suits run); a suit without manilla or guarded as is a hole the opponents run."""
    value = 0.0
    for s in range(4):
        side = hand & SUIT_MASK[s]
        k = side.bit_count()
        base = 12 * s
        has9 = side >> (base + 8) & 1
        has1 = side >> base & 1
        has12 = side >> (base + 11) & 1
        if has9:
            value += STOPPER_MANILLA
            if has1:
                value += STOPPER_AS + STOPPER_RUN * max(0, k - STOPPER_RUN_FROM)
                if has12:
                    value += STOPPER_REY
        elif has1 and k >= GUARDED_AS_LENGTH:
            value += GUARDED_AS
        else:
            value -= HOLE_PENALTY
    return value


def choose_trump(v: View, can_delegate: bool) -> int:
    """Trump choice: butifarra with stoppers all round, else the best suit, else delegate."""
    hand = v.hand
    values = [trump_suit_value(hand, s) for s in range(4)]
    best = max(range(4), key=lambda s: (values[s], -s))
    if butifarra_value(hand) >= BUTIFARRA_MIN:
        return BUTIFARRA
    if can_delegate and values[best] < DELEGATE_BELOW:
        return DELEGATE
    return TRUMP_BASE + best


def doubling_role(v: View) -> str:
    """Who is asked to double: "chooser", "partner" (of the chooser) or "defender"."""
    if v.chooser == 0:
        return "chooser"
    return "partner" if v.chooser == 2 else "defender"


def should_double(v: View) -> bool:
    """Raise the stake when my hand says my side is clearly ahead.

    The strength is :func:`trump_suit_value` in the declared suit (or
    :func:`butifarra_value`); :data:`DOUBLE_THRESHOLDS` gives, per role and kind of
    contract, the strength needed for the first raise of that side (contrar for the
    defenders, recontrar for the declarers); each later raise of the same side needs
    :data:`DOUBLE_STEP` more.
    """
    no_trump = v.trump == NO_TRUMP
    strength = butifarra_value(v.hand) if no_trump else trump_suit_value(v.hand, v.trump)
    threshold = DOUBLE_THRESHOLDS[doubling_role(v)][1 if no_trump else 0]
    return strength >= threshold + DOUBLE_STEP * (v.level // 2)


# ---------------------------------------------------------------- the agent
def decide(bits: int, legal: int) -> int:
    """The rule-based action for one packed observation and legal-action bitmask."""
    v = View(bits)
    phase = v.phase
    if phase == PHASE_PLAY:
        return choose_card(v, legal)
    if phase == PHASE_DOUBLING:
        a = DOUBLE if should_double(v) else PASS
    elif phase == PHASE_CHOOSE_TRUMP:
        a = choose_trump(v, can_delegate=bool(legal >> DELEGATE & 1))
    elif phase == PHASE_CHOOSE_TRUMP_DELEGATED:
        a = choose_trump(v, can_delegate=False)
    else:
        a = -1
    if a < 0 or not (legal >> a) & 1:  # never act illegally: fall back to the first legal id
        if not legal:
            raise ValueError("no legal action in the mask")
        a = (legal & -legal).bit_length() - 1
    return a


class RuleBasedAgent(Agent):
    """Deterministic heuristic player (see the module docstring for its rules)."""

    name = "rule"

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        observation, action_mask = check_one(observation, action_mask)
        legal = bits_from_mask(action_mask)
        if not legal:
            raise ValueError("no legal action in the mask")
        return decide(pack_bits(observation), legal)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        """All rows at once with :func:`agents.rule_batch.decide_batch` (the same decisions as
        :func:`decide`, which stays the readable definition and :meth:`act`'s path)."""
        obs, masks = check_batch(observations, action_masks)
        return decide_batch(obs, masks)
