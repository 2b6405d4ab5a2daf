"""The ``butifarra`` command: ``demo`` (the README's main job), ``arena`` (compare agents)
and ``play`` (a person vs agents).

Each subcommand registers itself with ``add_*_parser(subparsers)`` and runs through the
``func`` it sets, so adding a subcommand is one more pair of functions. Bad input (unknown
agent, unloadable checkpoint, negative count) ends with a one-line message on stderr and
exit status 2, never a traceback. The programs themselves are :mod:`butifarra.demo`,
:mod:`butifarra.play` and :mod:`agents.arena`, imported when their subcommand runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from agents.base import Agent
from agents.registry import agent_names, make_agent

EXIT_USAGE = 2


class CLIError(Exception):
    """A user mistake, reported as one line (exit status 2)."""


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= {minimum}, got {text!r}"
        ) from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
    return value


def seat_int(text: str) -> int:
    """argparse type: a seat 0-3."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 3:
        raise argparse.ArgumentTypeError(f"a seat is 0, 1, 2 or 3, got {text!r}")
    return value


def build_agent(spec: str, seed: int | None) -> Agent:
    """make_agent with the error turned into a one-line CLI message."""
    try:
        return make_agent(spec, seed)
    except ValueError as e:
        raise CLIError(str(e)) from None


# --------------------------------------------------------------------------- arena
def add_arena_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "arena",
        help="compare agents over duplicate deals",
        description=(
            "Duplicate-deal arena: every deal is played twice with the teams' seats swapped. "
            "Two agents: mean points per hand with a 95%% CI. Three or more: a round robin "
            f"with OpenSkill ratings. Agents: {', '.join(agent_names())} "
            "(ppo:PATH for a checkpoint)."
        ),
    )
    p.add_argument("agents", nargs="+", metavar="AGENT", help="agent specs, e.g. rule random")
    p.add_argument(
        "-n",
        "--deals",
        type=positive_int,
        default=2000,
        help="duplicate deals per pair (each is played twice; default 2000)",
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed (default 0)")
    p.add_argument(
        "--workers",
        type=non_negative_int,
        default=0,
        help="processes; 0 = all cores for 1000+ deals, else 1 (default 0)",
    )
    p.add_argument(
        "--matches",
        type=non_negative_int,
        default=0,
        help="also play this many duplicate matches to --target (two agents only)",
    )
    p.add_argument("--target", type=positive_int, default=101, help="match target (101)")
    p.add_argument(
        "--out",
        metavar="PREFIX",
        help="write PREFIX.json and PREFIX.csv (per hand for two agents, "
        "ratings for a round robin)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_arena)


def run_arena(args: argparse.Namespace) -> int:
    from agents.arena import duel, hands_csv, round_robin
    from butifarra_env.fileio import atomic_write_text

    if len(args.agents) < 2:
        raise CLIError("the arena needs at least two agents, e.g. 'butifarra arena rule random'")
    if args.matches and len(args.agents) != 2:
        raise CLIError("--matches is for two agents")
    agents = {}
    for spec in args.agents:
        name = spec
        k = 2
        while name in agents:
            name = f"{spec}#{k}"
            k += 1
        agents[name] = build_agent(spec, args.seed)
    workers = args.workers or ((os.cpu_count() or 1) if args.deals >= 1000 else 1)
    progress = not args.no_progress
    if len(agents) == 2:
        (na, a), (nb, b) = agents.items()
        res = duel(
            a,
            b,
            args.deals,
            args.seed,
            workers=workers,
            progress=progress,
            n_matches=args.matches,
            target_score=args.target,
            names=(na, nb),
        )
        print(res.summary())
        if args.out:
            atomic_write_text(args.out + ".json", json.dumps(res.to_dict(), indent=2) + "\n")
            atomic_write_text(args.out + ".csv", hands_csv(res))
            print(f"wrote {args.out}.json and {args.out}.csv")
        return 0
    rr = round_robin(agents, args.deals, args.seed, workers=workers, progress=progress)
    print(
        f"round robin: {len(agents)} agents, {args.deals} duplicate deals per pair, "
        f"seed {args.seed}"
    )
    print(rr.table())
    if args.out:
        csv_path, json_path = rr.save(args.out)
        print(f"wrote {json_path} and {csv_path}")
    return 0


# --------------------------------------------------------------------------- play
def add_play_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "play",
        help="play a hand in the terminal against agents",
        description="Play Butifarra yourself: one seat is yours, agents take the others.",
    )
    p.add_argument("--seat", type=seat_int, default=0, help="your seat 0-3 (default 0)")
    p.add_argument("--partner", default="rule", help="your partner's agent (default rule)")
    p.add_argument(
        "--opponents",
        default="rule",
        help="the opponents' agent, or two specs 'A,B' (default rule)",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=None,
        help="seed of the deal (default: a new one each time)",
    )
    p.add_argument("--dealer", type=seat_int, default=None, help="first dealer (default random)")
    p.add_argument("--hands", type=positive_int, default=1, help="hands to play (default 1)")
    p.add_argument("--save", metavar="FILE.jsonl", help="append each hand's record to this file")
    p.set_defaults(func=run_play)


def run_play(args: argparse.Namespace) -> int:
    from butifarra.play import play
    from butifarra_env.record import check_record_file

    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    opp = [s.strip() for s in args.opponents.split(",")]
    if len(opp) == 1:
        opp = opp * 2
    if len(opp) != 2 or not all(opp):
        raise CLIError(f"--opponents takes one agent or two 'A,B', got {args.opponents!r}")
    if args.save is not None:
        try:
            check_record_file(args.save)
        except ValueError as e:
            raise CLIError(str(e)) from None
    me = args.seat
    specs = {(me + 2) % 4: args.partner, (me + 1) % 4: opp[0], (me + 3) % 4: opp[1]}
    agents = {s: build_agent(spec, seed + s) for s, spec in specs.items()}
    return play(me, agents, seed=seed, dealer=args.dealer, n_hands=args.hands, save=args.save)


# --------------------------------------------------------------------------- demo
def add_demo_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="play and show one hand, then compare the shipped agents over duplicate deals",
    )
    p.add_argument(
        "-n", "--deals", type=positive_int, default=5000, help="duplicate deals per pair (5000)"
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed (default 0)")
    p.add_argument("--workers", type=positive_int, default=None, help="processes (default 2)")
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from butifarra.demo import run_demo as demo

    return demo(deals=args.deals, seed=args.seed, workers=args.workers)


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="butifarra", description="Butifarra RL environment: demo, arena and terminal play."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_arena_parser(sub)
    add_play_parser(sub)
    add_demo_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CLIError as e:
        print(f"butifarra {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
