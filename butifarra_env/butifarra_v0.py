"""Butifarra — the Catalan four-player partnership card game — as a PettingZoo AEC env.

================  ===========================================================
Import            ``from butifarra_env import butifarra_v0``
Create            ``butifarra_v0.env(**options)`` (wrapped), ``butifarra_v0.raw_env(**options)``,
                  ``butifarra_v0.parallel_env(**options)`` (Parallel view: 57 actions, the
                  waiting agents' no-op last; ``butifarra_env.envs.parallel``)
Agents            ``player_0`` … ``player_3``; seat i = ``player_i``; teams {0, 2} and {1, 3}
Action space      ``Discrete(56)`` for every agent and phase (ids below)
Observation       ``Dict(observation=Box(0, 255, (491,), uint8),
                  action_mask=Box(0, 1, (56,), int8))``; with ``obs_format="float32"``,
                  ``observation=Box(0, 1, (491,), float32)``
State             ``Box(0, 255, (639,), uint8)``: everything, all four hands (``state()``);
                  ``Box(0, 1, (639,), float32)`` with ``obs_format="float32"``
Rewards           at each hand end: own team's score minus the other team's (zero-sum),
                  times ``reward_scale``
Render modes      ``"human"`` (printed text), ``"ansi"`` (text), ``"rgb_array"`` (an image)
================  ===========================================================

Rules: ``docs/RULES.md`` (card ids, action ids, the legal-card algorithm, doubling, scoring).

Actions
    0–47 play card ``c = suit * 12 + number - 1`` (oros, copas, espadas, bastos);
    48–51 choose that suit as trump; 52 butifarra (no trump); 53 delegate to partner;
    54 double (contrar → recontrar → Sant Vicenç → Verraca); 55 pass.

Observation
    ``observation`` is relative to the observing seat (0 me, 1 next, 2 partner, 3 previous;
    teams as (mine, theirs)); the layout is ``butifarra_env.core.observation.FIELDS`` and
    ``butifarra_env.core.observation.decode(vec)`` returns named fields. ``action_mask`` marks the
    legal actions of the agent to move; it is all zeros for every other agent and once the
    episode is over. The same mask is in ``infos[agent]["action_mask"]`` of the agent to move
    (``env.last()`` returns it; the other agents' infos have no such key).
    The observation carries the options ``target_score``, ``max_doubling_level`` and
    ``butifarra_base``; the variants ``obligada``, ``linear_doubling`` and
    ``butifarra_max_doubling_level`` are not in it (the layout is the same under every
    option): whoever seats an agent tells it the options. The mask always applies them.
    ``butifarra_v1`` is this env with those variants and the trick history (who led, who won,
    which trick each card fell in) appended to the observation.

Observation format
    ``obs_format="uint8"`` (default): the raw values, 0/1 flags and small counts (tricks
    0-12, points 0-72, match fields clipped at 255). ``obs_format="float32"``: the same layout
    with every entry in [0, 1], exactly ``uint8_obs *
    butifarra_env.core.observation.scale_vector()``
    (each field divided by its largest value, ``observation.FIELD_MAX``). ``state()`` follows
    the same option (``observation.state_scale_vector()``), so a centralised critic reads the
    same scale as the actors. Masks stay ``int8``. Opponent policies inside the Gymnasium
    wrappers always receive ``uint8``.

Reward scale
    Rewards are raw points by default: the winning team scores its points above 36 (at most
    36) times the multiplier (x1 to x16 by doubling, twice that for a butifarra), so a
    typical hand is worth a few dozen points and the worst is -1152 (a 72-0 butifarra at
    Verraca, 36 x 2 x 16: ``Options().worst_hand_loss``; -360 with ``linear_doubling``,
    36 x 2 x 5). For learners that expect rewards near one (PPO, DQN from external
    libraries), pass ``reward_scale=1/36``: a typical hand is then about +-1 and the extremes
    are +-1152/36 = +-32.

Options (each validated; a bad value raises ValueError naming it and what is allowed)
    ``target_score`` None (one hand per episode, default) or an int (e.g. 101: an episode is a
    match, the deal rotates, rewards at each hand end); ``max_doubling_level`` 0–4 (default 4);
    ``butifarra_base`` 1 or 2 (default 2); ``first_dealer`` None (random from the seed) or 0–3;
    the regional variants of ``docs/RULES.md`` ("Variants"), all off by default:
    ``obligada`` (bool: against an opponent, a player who follows suit and cannot beat must
    play the lowest card of the led suit), ``linear_doubling`` (bool: level k multiplies by
    k + 1 instead of 2^k) and ``butifarra_max_doubling_level`` (None, the same as
    ``max_doubling_level``, or 0 up to it: where the chain stops in a butifarra);
    ``render_mode`` None, ``"human"``, ``"ansi"``, ``"rgb_array"``; ``reward_scale`` (default
    1.0, raw points); ``obs_format`` ``"uint8"`` (default) or ``"float32"``.

Rendering
    ``"ansi"`` and ``"human"`` give a text table; ``"rgb_array"`` an RGB ``uint8`` image
    (720, 960, 3) of the whole table (all four hands face up, ``player_0`` at the bottom): the
    trick on the table, trump, the doubling level and multiplier, team tricks and points, whose
    turn, the last trick and, in match mode, the match score. Drawn with Pillow, imported on the
    first ``rgb_array`` render only; with ``render_mode=None`` rendering costs nothing.
    ``SingleAgentEnv`` renders the learner's view (other hands face down;
    ``render_all_hands=True`` shows all four); Gymnasium's ``RecordVideo`` records it.

Reset
    ``reset(seed=...)`` fixes the deals and the first dealer; ``reset(options={"dealer": d,
    "hands": [[…12 ids…] × 4]})`` plays a given deal (duplicate arenas, replays);
    ``hand_number`` and ``match_scores`` resume a match position; ``one_hand=True`` ends the
    episode after the first hand even in match mode. Everything is checked before the env
    changes.

Illegal moves
    ``raw_env`` raises ``butifarra_env.core.errors.IllegalActionError`` (a ``ValueError``) naming
    the action, the phase and the legal actions.
    ``env()`` follows PettingZoo's convention (``TerminateIllegalWrapper``): the episode ends and
    the mover receives minus the worst possible hand loss under the options.

Records
    ``raw_env.game_record()`` is a JSON-serialisable dict of the current hand;
    ``butifarra_env.envs.replay.replay(record)`` rebuilds it; JSON Lines via ``save_records`` /
    ``load_records``.

Version history
    v0: initial release.
    v1 (``butifarra_v1``): the observation adds the trick history and the variants; v0
    unchanged.
"""

from butifarra_env.envs.aec import env, raw_env
from butifarra_env.envs.parallel import parallel_env

__all__ = ["env", "parallel_env", "raw_env"]
