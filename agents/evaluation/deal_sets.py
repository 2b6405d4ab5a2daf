"""Fixed, versioned deal sets for the evaluation protocol, shipped with the package.

A deal set is a JSON Lines file of game records with no actions: the dealer and the four
hands of each deal (the project's record format, so any tool that reads records reads
them). Two sets: ``dev`` (2,000 deals, for tuning) and ``test`` (10,000 deals, for the
numbers you report). Each is produced by :func:`generate` from a fixed seed and checked
against its SHA-256 on every load, so a result names exactly the deals it was measured on.

Regenerate (refuses to change an existing file; a new set needs a new version)::

    python -m agents.evaluation.deal_sets --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from butifarra_env.core.cards import cards_of
from butifarra_env.core.fileio import atomic_write_bytes
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import draw_dealer, random_deal
from butifarra_env.records import iter_records
from butifarra_env.records.format import game_record

DIR = Path(__file__).resolve().parent / "deal_sets"


@dataclass(frozen=True)
class DealSet:
    """One versioned deal set: where it lives, how it was made, and its fingerprint."""

    name: str
    version: int
    n_deals: int
    seed: int
    sha256: str

    @property
    def path(self) -> Path:
        return DIR / f"{self.name}_v{self.version}.jsonl"

    @property
    def label(self) -> str:
        return f"{self.name}_v{self.version}"


DEAL_SETS = {
    "dev": DealSet(
        "dev", 1, 2000, 20261130, "1e2dc0e3e007590941f2e101b47e5bb64d47fa9d726dd5d852c7497fb96571b2"
    ),
    "test": DealSet(
        "test",
        1,
        10000,
        20261201,
        "7e997b64cb62de989c094a1128c3657c4b7a03534cbdb152b6888973a73c683d",
    ),
}
"""The shipped sets. Their SHA-256 is of the file bytes."""

Deal = tuple[int, list[int]]
"""``(dealer, four hand bitmasks)``."""


def generate(n_deals: int, seed: int) -> Iterator[dict[str, object]]:
    """Deal ``i`` comes from its own generator ``SeedSequence([seed, i])``: a uniform dealer
    and a uniformly shuffled deck dealt as at the table (``rules.deal``)."""
    options = Options()
    for i in range(n_deals):
        rng = np.random.default_rng(np.random.SeedSequence([seed, i]))
        dealer = draw_dealer(rng, None)
        yield game_record(Game(options, dealer, random_deal(rng, dealer)))


def render(n_deals: int, seed: int) -> bytes:
    """The file contents of a deal set (one compact JSON record per line)."""
    lines = (json.dumps(r, separators=(",", ":")) for r in generate(n_deals, seed))
    return "".join(line + "\n" for line in lines).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_deal_set(name: str) -> list[Deal]:
    """The deals of a shipped set, after checking the file's SHA-256 (ValueError if the file
    is missing or differs: a changed deal set would silently change every result)."""
    if name not in DEAL_SETS:
        raise ValueError(f"unknown deal set {name!r}; deal sets: {sorted(DEAL_SETS)}")
    spec = DEAL_SETS[name]
    try:
        data = spec.path.read_bytes()
    except OSError as e:
        raise ValueError(f"deal set {spec.label} is missing ({e}); reinstall the package") from None
    if sha256(data) != spec.sha256:
        raise ValueError(
            f"deal set {spec.label} at {spec.path} does not match its SHA-256; it was changed"
        )
    deals = [
        (int(r["dealer"]), [sum(1 << c for c in hand) for hand in r["hands"]])
        for r in iter_records(spec.path)
    ]
    if len(deals) != spec.n_deals:
        raise ValueError(f"deal set {spec.label} has {len(deals)} deals, expected {spec.n_deals}")
    return deals


def hands_as_ids(hands: list[int]) -> list[list[int]]:
    return [cards_of(h) for h in hands]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Write or check the shipped deal sets.")
    p.add_argument("--write", action="store_true", help="write missing deal-set files")
    args = p.parse_args(argv)
    status = 0
    for spec in DEAL_SETS.values():
        data = render(spec.n_deals, spec.seed)
        digest = sha256(data)
        state = "ok" if digest == spec.sha256 else "SHA-256 differs from DEAL_SETS"
        if args.write and not spec.path.exists():
            atomic_write_bytes(spec.path, data, overwrite=False)
            state = "written"
        elif spec.path.exists() and spec.path.read_bytes() != data:
            state = "the file on disk differs from what the generator gives"
            status = 1
        print(f"{spec.label}: {spec.n_deals} deals, seed {spec.seed}, sha256 {digest}: {state}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
