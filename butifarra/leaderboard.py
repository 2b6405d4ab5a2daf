"""Regenerate the leaderboard in README.md and docs/evaluation.md from the result cards.

The cards are the JSON files ``butifarra eval AGENT --json docs/results/NAME.json`` writes
(:class:`agents.evaluation.protocol.ResultCard`). Only the block between the marker comments
``<!-- leaderboard:start -->`` and ``<!-- leaderboard:end -->`` of each target file is
rewritten (atomically; a file whose block is already current is left alone)::

    python -m butifarra.leaderboard            # rewrite the block in both files
    python -m butifarra.leaderboard --check    # exit 1 if a block is out of date (for CI)

Cards of another protocol version are left out (with a note): their numbers do not compare.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from agents.evaluation.protocol import PANEL, PROTOCOL_VERSION, ResultCard, load_card
from butifarra_env.core.fileio import atomic_write_bytes

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "docs" / "results"
TARGETS = (REPO / "README.md", REPO / "docs" / "evaluation.md")
START = "<!-- leaderboard:start -->"
END = "<!-- leaderboard:end -->"


def load_cards(folder: Path) -> tuple[list[ResultCard], list[str]]:
    """The cards in ``folder`` (``*.json``, by file name) of this protocol version, and a
    note for each file left out. A missing folder has no cards; a file that is not a card is
    a ValueError naming it (a leaderboard silently missing an agent would mislead)."""
    if not folder.is_dir():
        return [], []
    cards, notes = [], []
    for path in sorted(folder.glob("*.json")):
        card = load_card(path)
        if card.protocol_version != PROTOCOL_VERSION:
            notes.append(
                f"{path.name}: protocol version {card.protocol_version}, not "
                f"{PROTOCOL_VERSION}; left out"
            )
            continue
        cards.append(card)
    return cards, notes


RANKED_WITHOUT = "random"
"""The panel member a row's rank leaves out: margins against the random player are 10 to 20
times those against the others and are set mostly by how hard an agent punishes random bids
and doubles, so a mean that counts them ranks by that alone."""


def _score(card: ResultCard) -> tuple[int, float, str, str]:
    """Sort key: full-panel cards first, then by mean points per hand over the panel
    members played other than :data:`RANKED_WITHOUT` (over all of them for a card that
    played no other), best first; ties by spec and deal set."""
    points = {m: r["points_per_hand"] for m, r in card.results.items()}
    ranked = [p for m, p in points.items() if m != RANKED_WITHOUT] or list(points.values())
    mean = sum(ranked) / len(ranked) if ranked else -math.inf
    return (-len(points), -mean, card.agent, card.deal_set)


def _cell(card: ResultCard, member: str) -> str:
    if member in card.errors:
        return "failed"
    r = card.results.get(member)
    if r is None:
        return ""
    low, high = r.get("ci_low"), r.get("ci_high")
    if isinstance(low, (int, float)) and isinstance(high, (int, float)):
        return f"{r['points_per_hand']:+.2f} ± {(high - low) / 2:.2f}"
    return f"{r['points_per_hand']:+.2f}"


def table(cards: Sequence[ResultCard]) -> str:
    """The leaderboard as Markdown (a line saying there are no cards yet when there are none)."""
    if not cards:
        return (
            "_No result cards yet: `butifarra eval AGENT --json docs/results/NAME.json`, then "
            "`python -m butifarra.leaderboard`._"
        )
    members = list(PANEL)
    # a member whose spec is a plain name other than its own (ppo -> ppo-r1) shows the spec
    shown = [PANEL[m] if ":" not in PANEL[m] else m for m in members]
    header = ["agent", *(f"vs {m}" for m in shown), "deals", "deal set", "version"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for card in sorted(cards, key=_score):
        cells = [f"`{card.agent}`", *(_cell(card, m) for m in members)]
        cells += [f"{card.n_deals:,}", card.deal_set, card.package_version]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    lines.append(
        "Points per hand (the agent's team minus the panel member's) ± the 95% CI half-width, "
        f"duplicate deals, evaluation protocol {PROTOCOL_VERSION}."
    )
    return "\n".join(lines)


def replace_block(text: str, block: str, name: str) -> str:
    """``text`` with the lines between the marker lines (each a line of its own, once)
    replaced by ``block``; everything else is kept byte for byte."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == START]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or starts[0] > ends[0]:
        raise ValueError(f"{name}: expected one {START} line followed by one {END} line")
    newline = "\r\n" if lines[starts[0]].endswith("\r\n") else "\n"
    body = "".join(line + newline for line in block.splitlines())
    return "".join(lines[: starts[0] + 1]) + body + "".join(lines[ends[0] :])


def update(files: Sequence[Path], block: str, check: bool = False) -> list[Path]:
    """Put ``block`` into each file; returns the files that were (or, with ``check``, would
    be) changed. Every file is read and checked before any is written."""
    new: list[tuple[Path, bytes]] = []
    for path in files:
        try:
            old = path.read_bytes()
            text = replace_block(old.decode("utf-8"), block, str(path))
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: {e}") from None
        if text.encode("utf-8") != old:
            new.append((path, text.encode("utf-8")))
    if not check:
        for path, data in new:
            atomic_write_bytes(path, data)
    return [path for path, _ in new]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m butifarra.leaderboard",
        description="Rewrite the leaderboard block of README.md and docs/evaluation.md from "
        "the result cards in docs/results/.",
    )
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of card JSON files")
    p.add_argument(
        "--files", type=Path, nargs="+", default=list(TARGETS), help="files with the block"
    )
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if out of date")
    args = p.parse_args(argv)
    try:
        cards, notes = load_cards(args.results)
        changed = update(args.files, table(cards), check=args.check)
    except ValueError as e:
        print(f"leaderboard: error: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"leaderboard: {note}", file=sys.stderr)
    if args.check:
        for path in changed:
            print(f"leaderboard: {path} is out of date", file=sys.stderr)
        return 1 if changed else 0
    done = ", ".join(str(path) for path in changed) or "nothing (already current)"
    print(f"leaderboard: {len(cards)} cards; rewrote {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
