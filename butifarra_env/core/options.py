"""Game options (RULES.md defaults, variants as options), validated in one place."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from butifarra_env.core import rules
from butifarra_env.core.validate import check_bool, check_int, is_int

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
    obligada: bool = False
    """Obligada play (RULES.md, Variants): against an opponent, a player who follows suit and
    cannot beat the winning card must play the lowest card of the led suit."""
    linear_doubling: bool = False
    """Linear doubling (RULES.md, Variants): level k multiplies the base by k + 1 (x1..x5)
    instead of 2^k (x1..x16)."""
    butifarra_max_doubling_level: int | None = None
    """Top doubling level when butifarra is chosen: 0 up to ``max_doubling_level``; None (the
    default) means ``max_doubling_level`` ("no Sant Vicenç in butifarra": 2)."""

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
        store("obligada", check_bool("obligada", self.obligada))
        store("linear_doubling", check_bool("linear_doubling", self.linear_doubling))
        top = self.max_doubling_level
        cap = self.butifarra_max_doubling_level
        if is_int(cap) and top < cap <= MAX_DOUBLING_LEVEL:  # type: ignore[operator]
            raise ValueError(
                f"butifarra_max_doubling_level must be an int 0-{top} or None, got {cap}: it "
                f"cannot be above max_doubling_level={top} (None means the same as "
                "max_doubling_level)"
            )
        cap = check_int("butifarra_max_doubling_level", cap, 0, top, none_ok=True)
        store("butifarra_max_doubling_level", cap)

    @property
    def worst_hand_loss(self) -> int:
        """The most a team can lose on one hand under these options (the illegal-move
        penalty of ``butifarra_v0.env()``: an illegal move is never better than playing on)."""
        return rules.worst_hand_loss(
            self.max_doubling_level,
            self.butifarra_base,
            self.linear_doubling,
            self.butifarra_max_doubling_level,
        )

    def doubling_cap(self, trump: int) -> int:
        """The top doubling level once ``trump`` (0-3, or 4 for butifarra) is chosen
        (:func:`butifarra_env.core.rules.doubling_cap`)."""
        return rules.doubling_cap(trump, self.max_doubling_level, self.butifarra_max_doubling_level)

    def multiplier(self, trump: int, level: int) -> int:
        """The multiplier of a hand played in ``trump`` at doubling ``level``
        (:func:`butifarra_env.core.rules.multiplier` under these options)."""
        return rules.multiplier(trump, level, self.butifarra_base, self.linear_doubling)

    def to_dict(self) -> dict[str, Any]:
        """The options as a JSON-friendly dict (what game records keep). The variants added
        after the first release (:data:`VARIANT_DEFAULTS`) appear only when they differ from
        their default, so a default game's dict, and its records, are what they always were
        and earlier versions still read them; :meth:`from_dict` fills in what is missing."""
        data = asdict(self)
        for name, default in VARIANT_DEFAULTS.items():
            if data[name] is default:
                del data[name]
        return data

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


VARIANT_DEFAULTS: dict[str, Any] = {
    "obligada": False,
    "linear_doubling": False,
    "butifarra_max_doubling_level": None,
}
"""The regional variants (RULES.md, Variants) and their defaults: left out of
:meth:`Options.to_dict` when at the default."""


class UnknownOptionError(TypeError, ValueError):
    """An option name the game does not have. A ``TypeError``, as Python raises for an
    unexpected keyword argument (wrappers such as torchrl's ``GymEnv`` probe keywords and fall
    back on exactly that), and a ``ValueError`` like every other refused option."""
