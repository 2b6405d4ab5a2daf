"""Our search agent and OpenSpiel's ISMCTSBot side by side, at equal time per card decision.

    python benchmarks/search_vs_ismcts.py --deals 150 --seed 0 --match-time --out peer.json

Both play the same first ``--deals`` deals of the dev deal set against the first shipped PPO
policy, in duplicate (each deal twice, teams swapped), inside the OpenSpiel game
``python_butifarra`` with its default parameters (those of ``butifarra arena``): one engine,
the same deals, the same opponent. ISMCTS does the card play only; trump choice, delegation
and doubling are the PPO policy's on both teams, as in the search agent. ISMCTS uses one
random rollout per leaf (``--rollouts``) and ``uct_c`` = ``--uct-c`` x the hand's multiplier:
the width of the returns range (72 raw points at multiplier 1, as in the OpenSpiel tests).

Every card decision with a choice (two or more legal cards) of the agent under test is timed
(``time.perf_counter`` around its act/step call); median and worst are reported. With
``--match-time`` ISMCTS's simulation count is first calibrated so that its median time
matches the search agent's on the same positions (the card decisions with a choice of PPO
self-play on the last ``--calibration-deals`` dev deals). Results: points per hand vs PPO
with a 95% CI over deals (each deal: the mean of its two seatings), and the paired difference
search - ISMCTS. The same ``--seed`` and ``--simulations`` give the same results (timings
aside); a ``--match-time`` calibration depends on the machine's speed, and is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import Agent
from agents.evaluation.arena import _progress
from agents.evaluation.deal_sets import DEAL_SETS, Deal, load_deal_set
from agents.evaluation.stats import mean_ci
from agents.registry import make_agent
from butifarra.cli import ArgumentParser, CLIError, check_new_file, int_in
from butifarra_env.core.actions import mask_from_bits
from butifarra_env.core.cards import N_CARDS, cards_of
from butifarra_env.core.fileio import atomic_write_text
from butifarra_env.core.rules import DEAL_ORDER, N_SEATS, PHASE_PLAY

Player = Callable[[Any], int]
"""An OpenSpiel state in, the action of the player to move out."""

PROBE_SIMULATIONS = 20
"""ISMCTS simulations of the first timing probe of ``--match-time``."""
MIN_SIMULATIONS = 2
"""ISMCTSBot's fewest: its first simulation only expands the root, which needs a visit."""


def chance_outcomes(dealer: int, hands: Sequence[int]) -> list[int]:
    """The chance actions that deal ``hands`` with ``dealer``: the dealer, then the deck in
    order (the r-th player after the dealer receives the deck positions DEAL_ORDER[r])."""
    deck = [-1] * N_CARDS
    for r, positions in enumerate(DEAL_ORDER):
        for p, c in zip(positions, cards_of(hands[(dealer + 1 + r) % N_SEATS]), strict=True):
            deck[p] = c
    return [dealer, *deck]


def agent_player(agent: Agent) -> Player:
    """An observation agent acting on the OpenSpiel state (butifarra_v0 observation + mask)."""

    def play(state: Any) -> int:
        legal = sum(1 << a for a in state.legal_actions())
        obs = state.observation_vector(state.current_player())
        return int(agent.act(obs, mask_from_bits(legal)))

    return play


class IsmctsPlayer:
    """ISMCTSBot for the card play, another player (PPO) for bidding and doubling. One bot
    per multiplier, so that ``uct_c`` follows the returns' scale; all share one seeded
    random state and one seeded resampler."""

    def __init__(
        self,
        game: Any,
        bidding: Player,
        simulations: int,
        rollouts: int,
        uct_c: float,
        seed: int,
    ) -> None:
        from open_spiel.python.algorithms import ismcts, mcts

        self.bidding = bidding
        random_state = np.random.RandomState(seed % 2**32)
        sampler = np.random.default_rng(seed).random
        evaluator = mcts.RandomRolloutEvaluator(rollouts, random_state)

        def make_bot(multiplier: int) -> Any:
            bot = ismcts.ISMCTSBot(
                game, evaluator, uct_c * multiplier, simulations, random_state=random_state
            )
            bot.set_resampler(lambda s, player: s.resample_from_infostate(player, sampler))
            return bot

        self.make_bot = make_bot
        self.bots: dict[int, Any] = {}

    def __call__(self, state: Any) -> int:
        g = state.game_state
        if g.phase != PHASE_PLAY:
            return self.bidding(state)
        if g.multiplier not in self.bots:
            self.bots[g.multiplier] = self.make_bot(g.multiplier)
        return int(self.bots[g.multiplier].step(state))


def table_seed(seed: int, deal: int, swapped: int, role: int) -> int:
    return int(np.random.SeedSequence([seed, deal, swapped, role]).generate_state(1)[0])


def is_card_choice(state: Any) -> bool:
    g = state.game_state
    return bool(g.phase == PHASE_PLAY and g.legal & (g.legal - 1))


def play_hand(
    game: Any, deal: Deal, seats: Sequence[Player], timed: set[int], times: list[float]
) -> list[float]:
    """Play one dealt hand; the card decisions with a choice of the ``timed`` seats are
    timed into ``times`` (seconds). Returns the four seats' returns."""
    state = game.new_initial_state()
    for a in chance_outcomes(*deal):
        state.apply_action(a)
    while not state.is_terminal():
        seat = state.current_player()
        timing = seat in timed and is_card_choice(state)
        start = time.perf_counter()
        action = seats[seat](state)
        if timing:
            times.append(time.perf_counter() - start)
        state.apply_action(action)
    return list(state.returns())


def duplicate(
    game: Any,
    deals: Sequence[Deal],
    make_team: Callable[[int], Player],
    opponent: Player,
    seed: int,
    desc: str,
) -> tuple[np.ndarray, list[float]]:
    """Per deal, the team's mean points over both seatings against ``opponent``, and the
    team's card-decision times. ``make_team(seed)`` builds (or reseeds) it for one hand."""
    per_deal: list[float] = []
    times: list[float] = []
    bar = _progress(len(deals), desc, sys.stderr.isatty())
    for d, deal in enumerate(deals):
        points = []
        for swapped in (0, 1):
            team = make_team(table_seed(seed, d, swapped, 1))
            seats = [team if s % 2 == swapped else opponent for s in range(N_SEATS)]
            returns = play_hand(game, deal, seats, {swapped, swapped + 2}, times)
            points.append(returns[swapped])
        per_deal.append(float(np.mean(points)))
        bar.update(1)
    bar.close()
    return np.asarray(per_deal), times


def card_positions(game: Any, deals: Sequence[Deal], player: Player) -> list[Any]:
    """The card decisions with a choice met when ``player`` plays all four seats."""
    out = []
    for deal in deals:
        state = game.new_initial_state()
        for a in chance_outcomes(*deal):
            state.apply_action(a)
        while not state.is_terminal():
            if is_card_choice(state):
                out.append(state.clone())
            state.apply_action(player(state))
    return out


def median_seconds(player: Player, positions: Sequence[Any]) -> float:
    player(positions[0])  # warm-up (lazy imports, first torch call)
    times = []
    for state in positions:
        start = time.perf_counter()
        player(state)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def calibrate(
    positions: Sequence[Any], search: Player, make_ismcts: Callable[[int], Player]
) -> dict[str, Any]:
    """ISMCTS simulations whose median time per decision matches the search agent's on
    ``positions`` (time is about linear in simulations: two proportional corrections)."""
    target = median_seconds(search, positions)
    k, probes = PROBE_SIMULATIONS, []
    for _ in range(2):
        t = median_seconds(make_ismcts(k), positions)
        probes.append({"simulations": k, "median_ms": 1000 * t})
        k = max(MIN_SIMULATIONS, round(k * target / t))
    return {
        "positions": len(positions),
        "search_median_ms": 1000 * target,
        "probes": probes,
        "simulations": k,
    }


def summary(name: str, setting: str, per_deal: np.ndarray, times: list[float]) -> dict[str, Any]:
    mean, lo, hi = mean_ci(per_deal)
    ms = [1000 * t for t in times]
    return {
        "agent": name,
        "setting": setting,
        "decisions": len(ms),
        "median_ms": statistics.median(ms) if ms else float("nan"),
        "worst_ms": max(ms, default=float("nan")),
        "points_per_hand": mean,
        "ci95": [lo, hi],
        "per_deal": per_deal.tolist(),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['deals']} deals x 2 seatings of {result['deal_set']}, vs {result['opponent']}, "
        f"seed {result['seed']}",
        f"{'agent':<8} {'setting':<34} {'median ms':>10} {'worst ms':>9} {'pts/hand vs PPO':>24}",
    ]
    for r in result["agents"]:
        lo, hi = r["ci95"]
        lines.append(
            f"{r['agent']:<8} {r['setting']:<34} {r['median_ms']:>10.1f} {r['worst_ms']:>9.1f} "
            f"{r['points_per_hand']:>+8.2f} [{lo:+7.2f}, {hi:+7.2f}]"
        )
    d = result["difference"]
    lines.append(
        f"paired difference {d['what']}: {d['mean']:+.2f} points/hand "
        f"[{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    n_dev = DEAL_SETS["dev"].n_deals
    p.add_argument("--deals", type=int_in(2, n_dev), default=200)
    p.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0)
    p.add_argument("--search", default="search:samples=12,endgame=3", help="search agent spec")
    time_group = p.add_mutually_exclusive_group()
    time_group.add_argument("--simulations", type=int_in(MIN_SIMULATIONS, 10**6), default=100)
    time_group.add_argument(
        "--match-time", action="store_true", help="calibrate ISMCTS to the search agent's time"
    )
    p.add_argument("--calibration-deals", type=int_in(1, 100), default=4)
    p.add_argument("--rollouts", type=int_in(1, 1000), default=1, help="ISMCTS rollouts per leaf")
    p.add_argument("--uct-c", type=float, default=72.0, help="ISMCTS uct_c at multiplier 1")
    p.add_argument("--out", type=Path, help="write the results as JSON (a new file)")
    args = p.parse_args(argv)
    if not args.search.startswith("search"):
        p.error(f"argument --search: expected a search agent spec, got {args.search!r}")
    if not args.uct_c > 0:
        p.error(f"argument --uct-c: expected a positive number, got {args.uct_c}")
    if args.out is not None:
        try:
            check_new_file(args.out, "--out")
        except CLIError as e:
            p.error(str(e))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:  # one core for everyone: ISMCTS is single-threaded Python
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    import pyspiel  # type: ignore[import-not-found,unused-ignore]

    import butifarra_env.integrations.openspiel  # noqa: F401 - registers python_butifarra

    game = pyspiel.load_game("python_butifarra")
    dev = load_deal_set("dev")
    deals = dev[: args.deals]
    try:
        search = make_agent(args.search, args.seed)
    except ValueError as e:
        print(f"search_vs_ismcts: error: argument --search: {e}", file=sys.stderr)
        return 2
    ppo = make_agent("ppo-r1", args.seed)  # what the saved figures were measured against
    ppo_player = agent_player(ppo)
    ppo_bidder = agent_player(make_agent("ppo-r1", args.seed))

    def ismcts_team(simulations: int) -> Callable[[int], Player]:
        def build(seed: int) -> Player:
            return IsmctsPlayer(game, ppo_bidder, simulations, args.rollouts, args.uct_c, seed)

        return build

    def search_team(seed: int) -> Player:
        search.reset(seed)
        return agent_player(search)

    calibration = None
    simulations = args.simulations
    if args.match_time:
        positions = card_positions(game, dev[-args.calibration_deals :], ppo_player)
        calibration = calibrate(
            positions, search_team(args.seed), lambda k: ismcts_team(k)(args.seed)
        )
        simulations = calibration["simulations"]
        print(
            f"calibration on {len(positions)} positions: search median "
            f"{calibration['search_median_ms']:.1f} ms -> ISMCTS {simulations} simulations",
            file=sys.stderr,
        )

    results = []
    setting = f"{simulations} sims, {args.rollouts} rollout, uct_c {args.uct_c:g}*mult"
    for name, make_team, label in (
        ("ismcts", ismcts_team(simulations), setting),
        ("search", search_team, args.search.partition(":")[2] or "defaults"),
    ):
        per_deal, times = duplicate(game, deals, make_team, ppo_player, args.seed, name)
        results.append(summary(name, label, per_deal, times))
    diff = np.asarray(results[1]["per_deal"]) - np.asarray(results[0]["per_deal"])
    mean, lo, hi = mean_ci(diff)
    given = sys.argv[1:] if argv is None else argv
    result = {
        "command": " ".join(["python", "benchmarks/search_vs_ismcts.py", *given]),
        "deal_set": DEAL_SETS["dev"].label,
        "deals": len(deals),
        "seed": args.seed,
        "opponent": "ppo-r1",
        "game": str(game),
        "ismcts": {
            "simulations": simulations,
            "rollouts": args.rollouts,
            "uct_c_per_multiplier": args.uct_c,
        },
        "calibration": calibration,
        "agents": results,
        "difference": {"what": "search - ismcts", "mean": mean, "ci95": [lo, hi]},
    }
    print(table(result))
    if args.out is not None:
        atomic_write_text(args.out, json.dumps(result, indent=1) + "\n", overwrite=False)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
