"""Game options (RULES.md defaults, variants as options), validated in one place."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MAX_DOUBLING_LEVEL = 4


@dataclass(frozen=True)
class Options:
    """Everything that changes the rules of an episode. Defaults are exactly RULES.md."""

    target_score: int | None = None
    """None: an episode is one hand. An int (101 in clubs; 51 and 151 are also played): an
    episode is a whole match, hand after hand with the deal rotating, until a team reaches it."""
    max_doubling_level: int = MAX_DOUBLING_LEVEL
    """Highest doubling level allowed: 0 none, 1 contrar, 2 recontrar, 3 Sant Vicenç, 4 Verraca."""
    butifarra_base: int = 2
    """Base multiplier of a butifarra (no-trump) hand: 2 (always doubled, the default) or 1."""
    first_dealer: int | None = None
    """Seat 0-3 that deals the first hand; None draws it uniformly from the seed."""

    def __post_init__(self) -> None:
        _check_int("target_score", self.target_score, 1, None, none_ok=True)
        _check_int("max_doubling_level", self.max_doubling_level, 0, MAX_DOUBLING_LEVEL)
        if self.butifarra_base not in (1, 2) or isinstance(self.butifarra_base, bool):
            raise ValueError(f"butifarra_base must be 1 or 2, got {self.butifarra_base!r}")
        _check_int("first_dealer", self.first_dealer, 0, 3, none_ok=True)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Options:
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown option(s) {sorted(unknown)}; allowed: {sorted(cls.__dataclass_fields__)}"
            )
        return cls(**data)


def _check_int(name: str, value: object, lo: int, hi: int | None, none_ok: bool = False) -> None:
    if value is None and none_ok:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < lo
        or (hi is not None and value > hi)
    ):
        allowed = f"an int >= {lo}" if hi is None else f"an int {lo}-{hi}"
        if none_ok:
            allowed += " or None"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
