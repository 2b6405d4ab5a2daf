"""A prototype, measured and not built into the agent: the search agent doubling by search.

At a doubling decision (contrar, recontrar...) the prototype deals the hidden hands as the
card search does (uniform, weighed by the bidding: ``infer`` 4), plays each deal out from
the first card with the card search's own rollouts (the mano's best first card, greedy play,
the exact endgame) and doubles when its team's mean points exceed half the hand's 72 by more
than ``tau``; otherwise it passes. Every other decision is the search agent's. It plays
duplicate deals against ``ppo`` beside the same search agent doubling by its bidder (the
default), on the same deals and seed, so the difference is paired per deal.

    python benchmarks/search_doubling.py --taus 0,6 --deals 600 --deal-set dev
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from agents.evaluation.arena import duel
from agents.evaluation.deal_sets import DEAL_SETS, load_deal_set
from agents.registry import make_agent
from agents.search_agent import BiddingPrior, SearchAgent, _draw_deals
from agents.search_rollouts import rollout_values
from butifarra_env.core.actions import DOUBLE, PASS
from butifarra_env.core.cards import POINTS, TOTAL_POINTS, cards_of
from butifarra_env.core.observation import View, pack_bits
from butifarra_env.core.rules import PHASE_DOUBLING
from butifarra_env.core.rules import SUIT_ARRAY as _SUIT
from butifarra_env.core.sampling import HiddenDeal

_POINTS = np.array(POINTS)


class DoublingSearch(SearchAgent):
    """The search agent, with its doubling decisions made by full-hand rollouts."""

    def __init__(self, spec: str, tau: float, seed: int, samples: int = 32) -> None:
        base = make_agent(spec, seed=seed)
        assert isinstance(base, SearchAgent)
        super().__init__(base.given, base.preferred, seed=seed, fallback=base.fallback)
        self.tau = tau
        self.samples = samples
        self.doubling_rng = np.random.default_rng([seed, 99])  # the card search's stays as is

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return int(self.act_batch(observation[None], action_mask[None])[0])

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        out = super().act_batch(observations, action_masks)
        for i, (obs, mask) in enumerate(zip(observations, action_masks, strict=True)):
            if mask[DOUBLE] and mask[PASS]:
                view = View(pack_bits(obs))
                if view.phase == PHASE_DOUBLING:
                    out[i] = self._double(obs, view)
        return out

    def _double(self, observation: np.ndarray, view: View) -> int:
        hidden = HiddenDeal(view.unseen, (1, 2, 3), view.sizes[1:], [0, 0, 0])
        assert self.bidding is not None
        prior = BiddingPrior(self.bidding, observation, view, self.options, self._bids).weights
        deals = _draw_deals(hidden, self.samples, 4, self.doubling_rng, prior, [0])
        mano = (view.dealer + 1) % 4  # relative seat: leads the first trick
        hands, cards = [], []
        for d in deals:
            held = [view.hand, d[1], d[2], d[3]]
            rotated = [held[(mano + k) % 4] for k in range(4)]  # the mano as seat 0
            for c in cards_of(rotated[0]):  # 12 first cards a deal
                hands.append([rotated[0] & ~(1 << c), *rotated[1:]])
                cards.append(c)
        m, c = len(cards), np.array(cards)
        values = rollout_values(
            np.array(hands, dtype=np.uint64),
            _SUIT[c],
            c,
            np.zeros(m, dtype=np.int64),
            np.ones(m, dtype=np.int64),
            _POINTS[c],
            np.full(m, view.trump),
            self.config.endgame,
            self.obligada,
        )
        mano_team = values.reshape(len(deals), -1).max(axis=1).mean()
        mine = mano_team if mano % 2 == 0 else TOTAL_POINTS - mano_team
        return DOUBLE if mine - TOTAL_POINTS / 2 > self.tau else PASS


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setting", default="search:samples=12,endgame=3")
    p.add_argument("--taus", default="0,6", help="comma-separated margins in points")
    p.add_argument("--deal-set", choices=sorted(DEAL_SETS), default="dev")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--deals", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    deals = load_deal_set(args.deal_set)[args.first : args.first + args.deals]

    def play(agent: SearchAgent) -> tuple[str, np.ndarray]:
        start = time.perf_counter()
        opponent = make_agent("ppo", seed=args.seed)
        r = duel(agent, opponent, len(deals), seed=args.seed, deals=deals, workers=args.workers)
        line = f"{r.mean:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
        return f"{line} ({time.perf_counter() - start:.0f} s)", r.pair_means

    base = make_agent(args.setting, seed=args.seed)
    assert isinstance(base, SearchAgent)
    line, plain = play(base)
    print(f"{args.setting}, the bidder doubles: {line}", flush=True)
    for tau in (float(t) for t in args.taus.split(",")):
        line, means = play(DoublingSearch(args.setting, tau, args.seed))
        d = means - plain
        half = 1.96 * d.std(ddof=1) / np.sqrt(len(d))
        print(
            f"  search doubles, tau={tau:g}: {line}; minus the bidder's doubling "
            f"{d.mean():+.2f} [{d.mean() - half:+.2f}, {d.mean() + half:+.2f}]",
            flush=True,
        )


if __name__ == "__main__":
    main()
