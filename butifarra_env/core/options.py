"""Game options (RULES.md defaults, variants as options), validated in one place."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from butifarra_env.core.rules import worst_hand_loss
from butifarra_env.core.validate import check_int

MAX_DOUBLING_LEVEL = 4


@dataclass(frozen=True)
class Options:
    """Everything that changes the rules of an episode. Defaults are exactly RULES.md.

    Values are checked on construction (numpy integers are stored as ``int``); a bad one
    raises ValueError naming the option and what is allowed.
    """

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
        def store(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        store("target_score", check_int("target_score", self.target_score, 1, none_ok=True))
        store(
            "max_doubling_level",
            check_int("max_doubling_level", self.max_doubling_level, 0, MAX_DOUBLING_LEVEL),
        )
        store("butifarra_base", check_int("butifarra_base", self.butifarra_base, 1, 2))
        store("first_dealer", check_int("first_dealer", self.first_dealer, 0, 3, none_ok=True))

    @property
    def worst_hand_loss(self) -> int:
        """The most a team can lose on one hand under these options (the illegal-move
        penalty of ``butifarra_v0.env()``: an illegal move is never better than playing on)."""
        return worst_hand_loss(self.max_doubling_level, self.butifarra_base)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Options:
        if not isinstance(data, dict):
            raise ValueError(f"options must be a dict, got {type(data).__name__}")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            names = sorted(unknown)
            raise UnknownOptionError(
                f"got an unexpected keyword argument {names[0]!r}: unknown option(s) {names}; "
                f"allowed: {sorted(cls.__dataclass_fields__)}"
            )
        return cls(**data)


class UnknownOptionError(TypeError, ValueError):
    """An option name the game does not have. A ``TypeError``, as Python raises for an
    unexpected keyword argument (wrappers such as torchrl's ``GymEnv`` probe keywords and fall
    back on exactly that), and a ``ValueError`` like every other refused option."""
