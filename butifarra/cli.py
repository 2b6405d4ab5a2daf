"""The ``butifarra`` command: ``demo`` (the README's main job), ``arena`` (compare agents),
``eval`` (the evaluation protocol's result card), ``exploit`` (approximate exploitability)
and ``play`` (a person vs agents).

Each subcommand registers itself with ``add_*_parser(subparsers)`` and runs through the
``func`` it sets, so adding a subcommand is one more pair of functions. Bad input (unknown
agent, unloadable checkpoint, a count out of range, a file that must not be overwritten)
ends with one line on stderr naming the argument, and exit status 2, never a traceback;
every argument and output file is checked before any work starts. The programs themselves
are :mod:`butifarra.demo`, :mod:`butifarra.play`, :mod:`agents.evaluation.arena` and
:mod:`agents.evaluation.protocol`, imported when their subcommand runs. ``butifarra --version``
prints
the package version (one source: ``butifarra_env.__version__``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from agents.base import Agent
from agents.registry import agent_names, make_agent
from butifarra.arguments import (
    EXIT_USAGE,
    MAX_SEED,
    CLIError,
    check_new_file,
    int_in,
    shown,
)
from butifarra.exploit import add_exploit_parser
from butifarra.web.serve import add_serve_parser
from butifarra_env import __version__

EXIT_FAILED = 1
MAX_DEALS = 10_000_000
MAX_MATCHES = 1_000_000
MAX_TARGET = 10_000
MAX_HANDS = 10_000
MAX_WORKERS = 256


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one line naming the argument (no usage block), status 2."""

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split())  # an argument holding a newline stays on one line
        if len(message) > 300:
            message = message[:297] + "..."
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # Python 3.11's argparse drops an explicit '--' value ('--seed=--') and hands the
        # program an unchecked [] instead; here it is a value like any other (as in 3.12+).
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)


def seat_int(text: str) -> int:
    """argparse type: a seat 0-3."""
    if text.strip() not in ("0", "1", "2", "3"):
        raise argparse.ArgumentTypeError(f"a seat is 0, 1, 2 or 3, got {shown(text)}")
    return int(text)


def build_agent(spec: str, seed: int | None, argument: str) -> Agent:
    """make_agent with the error turned into a one-line CLI message naming the argument."""
    try:
        return make_agent(spec, seed)
    except ValueError as e:
        raise CLIError(f"argument {argument}: {e}") from None


def check_records_file(path: str, argument: str) -> None:
    """:func:`butifarra_env.records.files.check_record_file` as a one-line CLI error."""
    from butifarra_env.records import check_record_file

    try:
        check_record_file(path)
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise CLIError(f"argument {argument}: {reason}") from None


def write_new_files(files: list[tuple[str, str]]) -> list[str]:
    """Write each (path, text) as a new file, atomically and never over an existing one.
    When one cannot be written after all (disk full, the folder gone since the check), its
    text goes to a new file beside it, in the current folder or the temp folder, and the
    person is told: results that took minutes to compute are not lost. Returns where each
    file went."""
    from butifarra.play import new_file_near
    from butifarra_env.core.fileio import atomic_write_text

    written = []
    for path, text in files:
        try:
            atomic_write_text(path, text, overwrite=False)
        except OSError as e:
            try:
                kept = new_file_near(path)
                atomic_write_text(kept, text)  # replaces only the empty file just made
            except OSError as e2:
                print(
                    f"could not write {path} ({e}) nor a new file ({e2}); its contents:\n{text}",
                    file=sys.stderr,
                )
                continue
            print(f"could not write {path} ({e}); wrote {kept} instead", file=sys.stderr)
            path = str(kept)
        written.append(path)
    return written


# --------------------------------------------------------------------------- arena
def add_arena_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "arena",
        help="compare agents over duplicate deals",
        description=(
            "Duplicate-deal arena: every deal is played twice with the teams' seats swapped. "
            "Two agents: mean points per hand with a 95% CI, and beside it the "
            "variance-reduced estimate (cv1, docs/evaluation.md). Three or more: a round robin "
            f"with OpenSkill ratings. Agents: {', '.join(agent_names())} "
            "(ppo:PATH for a checkpoint)."
        ),
    )
    p.add_argument("agents", nargs="+", metavar="AGENT", help="agent specs, e.g. rule random")
    p.add_argument(
        "-n",
        "--deals",
        type=int_in(1, MAX_DEALS),
        default=2000,
        help=f"duplicate deals per pair, 1-{MAX_DEALS} (each is played twice; default 2000)",
    )
    p.add_argument(
        "--seed", type=int_in(0, MAX_SEED), default=0, help=f"seed 0-{MAX_SEED} (default 0)"
    )
    p.add_argument(
        "--workers",
        type=int_in(0, MAX_WORKERS),
        default=0,
        help="processes; 0 = all cores for 1000+ deals, else 1 (default 0)",
    )
    p.add_argument(
        "--matches",
        type=int_in(0, MAX_MATCHES),
        default=0,
        help="also play this many duplicate matches to --target (two agents only)",
    )
    p.add_argument("--target", type=int_in(1, MAX_TARGET), default=101, help="match target (101)")
    p.add_argument(
        "--importance",
        type=int_in(2, MAX_DEALS),
        default=None,
        metavar="K",
        help="two agents: the importance-sampled estimate (is1, docs/evaluation.md): bid all "
        "-n deals (the pool), play only K of them drawn by their multipliers",
    )
    p.add_argument(
        "--baseline",
        metavar="AGENT",
        default=None,
        help="two agents A B: also play this agent against B on the same deals and report A's "
        "result minus its, paired deal by deal (a narrower interval than two separate runs "
        "give; docs/evaluation.md)",
    )
    p.add_argument(
        "--out",
        metavar="PREFIX",
        help="write PREFIX.json and PREFIX.csv (per hand for two agents, per deal with "
        "--baseline, ratings for a round robin); existing files are never overwritten",
    )
    p.add_argument(
        "--records",
        metavar="FILE.jsonl",
        help="append every hand played to this JSON Lines file as a game record, with each "
        "decision's action probabilities where the agent has them",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_arena)


def out_paths(prefix: str) -> tuple[str, str]:
    """``--out PREFIX`` as the two files it names: ``PREFIX.json`` and ``PREFIX.csv``."""
    if not prefix.strip() or prefix.endswith(("/", os.sep)) or "\0" in prefix:
        raise CLIError(
            f"argument --out: expected a file prefix such as results/rr, got {shown(prefix)}"
        )
    return prefix + ".json", prefix + ".csv"


def coefficients_for(spec: str) -> str:
    """The variance-reduction coefficients of a duel against ``spec``: those of the panel
    member it is (:data:`agents.evaluation.protocol.PANEL`), else the built-in default."""
    from agents.evaluation.protocol import PANEL

    return next((name for name, s in PANEL.items() if s == spec.strip()), "default")


def run_arena(args: argparse.Namespace) -> int:
    from agents.evaluation.arena import AgentError, duel, hands_csv, round_robin

    if len(args.agents) < 2:
        raise CLIError("the arena needs at least two agents, e.g. 'butifarra arena rule random'")
    if args.matches and len(args.agents) != 2:
        raise CLIError("--matches is for two agents")
    if args.importance is not None and len(args.agents) != 2:
        raise CLIError("--importance is for two agents")
    if args.importance is not None and args.matches:
        raise CLIError("--importance plays single deals: give --importance or --matches, not both")
    if args.baseline is not None and len(args.agents) != 2:
        raise CLIError("--baseline is for two agents: CANDIDATE OPPONENT --baseline BASELINE")
    if args.baseline is not None and (args.matches or args.importance is not None):
        raise CLIError("--baseline pairs plain duplicate deals: not with --matches or --importance")
    # every check before any work, and those that may create a folder (--records) last
    outputs = out_paths(args.out) if args.out is not None else ()
    for path in outputs:
        check_new_file(Path(path), "--out", "prefix")
    if args.records is not None:
        if any(Path(args.records).absolute() == Path(p).absolute() for p in outputs):
            raise CLIError("argument --records: the records file must not be an --out file")
        if "\0" in args.records or not args.records.strip():
            raise CLIError(f"argument --records: not a file name: {shown(args.records)}")

    def unique(spec: str, taken: Iterable[str]) -> str:
        """The spec as the agent's name, numbered (``rule#2``) when another has it."""
        name, k, taken = spec, 2, set(taken)
        while name in taken:
            name, k = f"{spec}#{k}", k + 1
        return name

    agents: dict[str, Agent | str] = {}
    for spec in args.agents:
        agents[unique(spec, agents)] = build_agent(spec, args.seed, "AGENT")
    baseline = None
    if args.baseline is not None:
        baseline = build_agent(args.baseline, args.seed, "--baseline")
    if args.records is not None:
        check_records_file(args.records, "--records")
    workers = args.workers or ((os.cpu_count() or 1) if args.deals >= 1000 else 1)
    progress = not args.no_progress
    try:
        if args.importance is not None:
            from agents.evaluation.importance import importance_duel

            (na, a), (nb, b) = agents.items()
            ires = importance_duel(
                a, b, args.deals, args.importance, args.seed, workers=workers,
                progress=progress, names=(na, nb), records_path=args.records,
            )  # fmt: skip
            print(ires.summary())
            files = [(outputs[0], json.dumps(ires.to_dict(), indent=2) + "\n")] if outputs else []
            files += [(outputs[1], hands_csv(ires.played))] if outputs else []
        elif baseline is not None:
            from agents.evaluation.paired import compare

            (na, a), (nb, b) = agents.items()
            pres = compare(
                a, baseline, b, args.deals, args.seed,
                names=(na, unique(args.baseline, agents), nb), workers=workers,
                progress=progress, records_path=args.records,
                variance_reduction=coefficients_for(args.agents[1]),
            )  # fmt: skip
            print(pres.candidate.summary())
            print(pres.baseline.summary())
            print(pres.summary())
            files = [(outputs[0], json.dumps(pres.to_dict(), indent=2) + "\n")] if outputs else []
            files += [(outputs[1], pres.deals_csv())] if outputs else []
        elif len(agents) == 2:
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
                records_path=args.records,
                variance_reduction=coefficients_for(args.agents[1]),
            )
            print(res.summary())
            files = [(outputs[0], json.dumps(res.to_dict(), indent=2) + "\n")] if outputs else []
            files += [(outputs[1], hands_csv(res))] if outputs else []
        else:
            rr = round_robin(
                agents,
                args.deals,
                args.seed,
                workers=workers,
                progress=progress,
                records_path=args.records,
            )
            print(
                f"round robin: {len(agents)} agents, {args.deals} duplicate deals per pair, "
                f"seed {args.seed}"
            )
            print(rr.table())
            results = json.dumps(rr.to_dict(), indent=2) + "\n"
            files = [(outputs[0], results), (outputs[1], rr.ratings_csv())] if outputs else []
    except ImportError as e:  # openskill, for a round robin: looked for before any hand
        raise CLIError(str(e)) from None
    except AgentError as e:
        raise CLIError(str(e), EXIT_FAILED) from None
    except OSError as e:  # the records file failed mid-run (disk full, removed), or the system
        where = "argument --records: could not append" if args.records else "could not run"
        raise CLIError(f"{where}: {e}", EXIT_FAILED) from None
    if files:
        written = write_new_files(files)
        if written:
            print(f"wrote {' and '.join(written)}")
    if args.records is not None:
        print(f"game records appended to {args.records}")
    return 0


# --------------------------------------------------------------------------- eval
def add_eval_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate an agent against the reference panel on a fixed deal set",
        description=(
            "The evaluation protocol (docs/evaluation.md): AGENT plays duplicate deals of a "
            "shipped deal set against each panel member (random, rule, ppo, search) and a "
            "result card is printed: points per hand with a 95% CI (and the "
            "variance-reduced estimate beside it), hands won, mean "
            "multiplier, how often it declares, delegates and doubles and with what result, "
            "decision time. Exit status 1 when an opponent's evaluation failed (the others "
            "are still played and shown)."
        ),
    )
    p.add_argument(
        "agent",
        metavar="AGENT",
        help=f"agent spec: {', '.join(agent_names())} (ppo:PATH for a checkpoint)",
    )
    p.add_argument(
        "--deal-set",
        default="test",
        metavar="SET",
        help="deal set: test (10,000 deals, for reported numbers) or dev (2,000; default test)",
    )
    p.add_argument(
        "-n",
        "--deals",
        type=int_in(0, MAX_DEALS),  # 1 to the size of the set: checked with the set
        default=None,
        help="play the first N deals of the set (default: all of them)",
    )
    p.add_argument(
        "--seed", type=int_in(0, MAX_SEED), default=0, help=f"seed 0-{MAX_SEED} (default 0)"
    )
    p.add_argument(
        "--workers",
        type=int_in(0, MAX_WORKERS),
        default=0,
        help="processes; 0 = all cores (default); results do not depend on it",
    )
    p.add_argument(
        "--panel",
        default=None,
        metavar="A,B",
        help="play only these panel members, e.g. random,rule (default: the whole panel)",
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        help="also write the card as JSON to FILE (an existing file is never overwritten)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from agents.evaluation.deal_sets import DEAL_SETS
    from agents.evaluation.protocol import PANEL, Interrupted, evaluate

    if args.deal_set not in DEAL_SETS:
        raise CLIError(
            f"argument --deal-set: expected one of {', '.join(DEAL_SETS)}, "
            f"got {shown(args.deal_set)}"
        )
    info = DEAL_SETS[args.deal_set]
    if args.deals is not None and not 1 <= args.deals <= info.n_deals:
        raise CLIError(
            f"argument --deals: the {info.label} deal set has {info.n_deals} deals; expected "
            f"an integer from 1 to {info.n_deals}, got {args.deals}"
        )
    panel = None
    if args.panel is not None:
        panel = [m.strip() for m in args.panel.split(",")]
        bad = [m for m in panel if m not in PANEL]
        if bad or len(set(panel)) != len(panel):
            raise CLIError(
                f"argument --panel: expected panel members from {', '.join(PANEL)}, each once, "
                f"separated by commas, got {shown(args.panel)}"
            )
    if args.json is not None:
        if "\0" in args.json or not args.json.strip():
            raise CLIError(f"argument --json: not a file name: {shown(args.json)}")
        check_new_file(Path(args.json), "--json")
    agent = build_agent(args.agent, args.seed, "AGENT")
    try:
        card = evaluate(
            agent,
            spec=args.agent.strip(),
            deal_set=args.deal_set,
            n_deals=args.deals,
            seed=args.seed,
            workers=args.workers,
            progress=not args.no_progress,
            panel=panel,
        )
    except ValueError as e:  # a deal-set file changed or missing: before any hand
        raise CLIError(str(e)) from None
    except Interrupted as e:  # Ctrl-C: the opponents finished so far are shown and kept
        print(e.card.render())
        _write_card(args.json, e.card.to_json())
        print("\ninterrupted", file=sys.stderr)
        return 130
    print(card.render())
    _write_card(args.json, card.to_json())
    if card.failed:
        failed = [*card.errors] + (["decision timing"] if "error" in card.timing else [])
        print(
            f"butifarra eval: failed against {', '.join(failed)} (see the card above)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return 0


def _write_card(path: str | None, text: str) -> None:
    if path is not None:
        written = write_new_files([(path, text)])
        if written:
            print(f"wrote {written[0]}")


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
        type=int_in(0, MAX_SEED),
        default=None,
        help=f"seed of the deal, 0-{MAX_SEED} (default: a new one each time)",
    )
    p.add_argument("--dealer", type=seat_int, default=None, help="first dealer (default random)")
    p.add_argument(
        "--hands", type=int_in(1, MAX_HANDS), default=1, help="hands to play (default 1)"
    )
    p.add_argument(
        "--save",
        metavar="FILE.jsonl",
        help="append each hand's record to this file (checked before the first hand)",
    )
    from butifarra.arguments import add_variant_arguments

    add_variant_arguments(p)  # --obligada, --linear-doubling, --butifarra-max-doubling
    p.set_defaults(func=run_play)


def run_play(args: argparse.Namespace) -> int:
    from agents.base import UnsupportedVariant
    from butifarra.arguments import variant_options
    from butifarra.play import play
    from butifarra_env.core.options import Options

    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    opp = [s.strip() for s in args.opponents.split(",")]
    if len(opp) == 1:
        opp = opp * 2
    if len(opp) != 2 or not all(opp):
        raise CLIError(f"argument --opponents: one agent or two 'A,B', got {shown(args.opponents)}")
    me = args.seat
    specs = {(me + 2) % 4: (args.partner, "--partner")}
    specs[(me + 1) % 4] = (opp[0], "--opponents")
    specs[(me + 3) % 4] = (opp[1], "--opponents")
    agents = {s: build_agent(spec, seed + s, what) for s, (spec, what) in specs.items()}
    if args.save is not None:
        if "\0" in args.save or not args.save.strip():
            raise CLIError(f"argument --save: not a file name: {shown(args.save)}")
        check_records_file(args.save, "--save")
    options = Options(**variant_options(args))
    try:
        return play(
            me,
            agents,
            seed=seed,
            dealer=args.dealer,
            n_hands=args.hands,
            save=args.save,
            options=options,
        )
    except UnsupportedVariant as e:  # before any hand: the agent cannot play these rules
        raise CLIError(str(e)) from None


# --------------------------------------------------------------------------- demo
def add_demo_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="play and show one hand, then compare the shipped agents over duplicate deals",
    )
    p.add_argument(
        "-n",
        "--deals",
        type=int_in(1, MAX_DEALS),
        default=5000,
        help="duplicate deals per pair (5000)",
    )
    p.add_argument(
        "--seed", type=int_in(0, MAX_SEED), default=0, help=f"seed 0-{MAX_SEED} (default 0)"
    )
    p.add_argument(
        "--workers", type=int_in(1, MAX_WORKERS), default=None, help="processes (default 2)"
    )
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from butifarra.demo import run_demo as demo

    return demo(deals=args.deals, seed=args.seed, workers=args.workers)


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="butifarra",
        description=(
            "Butifarra RL environment: demo, arena, evaluation, terminal play and the browser "
            "table."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_arena_parser(sub)
    add_eval_parser(sub)
    add_play_parser(sub)
    add_demo_parser(sub)
    add_serve_parser(sub)
    add_exploit_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit status."""
    for stream in (sys.stdout, sys.stderr):  # an ASCII-only terminal gets '?', not a traceback
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="replace")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CLIError as e:
        print(f"butifarra {args.command}: error: {e}", file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
