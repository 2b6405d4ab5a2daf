"""The RLlib sampler of the trainer: an env runner for
:class:`~butifarra_env.integrations.rllib.BatchedHandsEnv` that keeps up with the engine.

RLlib's ``MultiAgentEnvRunner`` does per-agent, per-step bookkeeping that costs ~10x the game
itself. :class:`BatchedHandsEnvRunner` steps the env's batched engine directly and writes each
finished hand as one ``MultiAgentEpisode`` in bulk (numpy arrays per seat,
:func:`hand_episode`): same episodes, same learner. It lives with the trainer
(``train/rllib_ppo.py``, ``--env-path fast``) rather than in the environment package because
it is a piece of RLlib's training machinery (torch modules, RLlib metrics), not an adapter.

Usage (a complete PPO config is ``train/rllib_ppo.py``)::

    from butifarra_env.integrations.rllib import BatchedHandsEnv, shared_policy_mapping
    from train.rllib_sampler import BatchedHandsEnvRunner
    config = (PPOConfig()
        .environment(BatchedHandsEnv, env_config={"num_hands": 64, "reward_scale": 1 / 36},
                     disable_env_checking=True)
        .env_runners(env_runner_cls=BatchedHandsEnvRunner, num_envs_per_env_runner=1)
        .multi_agent(policies={"shared"}, policy_mapping_fn=shared_policy_mapping,
                     count_steps_by="agent_steps"))
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.utils.metrics import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
    NUM_EPISODES_LIFETIME,
    NUM_MODULE_STEPS_SAMPLED,
    NUM_MODULE_STEPS_SAMPLED_LIFETIME,
    SAMPLE_TIMER,
    WEIGHTS_SEQ_NO,
)

from agents import Agent
from agents.ppo_net import hidden_hands
from butifarra_env.core.actions import N_ACTIONS, random_legal_actions
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.observation import OBS_SIZE
from butifarra_env.core.rules import N_SEATS
from butifarra_env.integrations.rllib import MASK_KEY, OBS_KEY, BatchedHandsEnv
from train.ppo_settings import bidding_rows, make_opponent_agent

__all__ = [
    "HIDDEN_HANDS",
    "MAX_DECISIONS",
    "SAMPLE_WALL_S",
    "TEACHER_ACTION",
    "BatchedHandsEnvRunner",
    "bidding_rows",
    "hand_episode",
]

SAMPLE_WALL_S = "sample_wall_s"
"""Env-runner metric: wall seconds of the latest ``sample()`` call (the slowest runner's)."""

MAX_DECISIONS = 64
"""More decisions than any hand has (48 cards, 2 trump choices, the doubling chain)."""
HIDDEN_HANDS = "hidden_hands"
"""Extra batch column (uint8, (T, 144)): the three hands the mover cannot see, relative to
it (:func:`agents.ppo_net.hidden_hands` of the engine's ``state()``), recorded at each
decision of a module whose ``needs_hidden`` is true (central critic, belief loss)."""
TEACHER_ACTION = "teacher_action"
"""Extra batch column (int64, (T,)): the teacher's action at each decision of a module with a
``teacher`` spec (-1 where it was not asked: after the teacher's schedule, only the bidding
and doubling decisions are asked, see :meth:`BatchedHandsEnvRunner.set_teacher_scope`)."""


# ------------------------------------------------------------------------------ episodes
def hand_episode(
    episode: MultiAgentEpisode,
    agents: Sequence[str],
    seats: np.ndarray,
    obs: np.ndarray,
    masks: np.ndarray,
    actions: np.ndarray,
    extra: Mapping[str, np.ndarray],
    rewards: np.ndarray,
    keep: Sequence[bool],
    dtype: Any = np.float32,
) -> MultiAgentEpisode:
    """Fill ``episode`` (new, empty, its agents mapped) with one finished hand, in bulk.

    The hand's ``T`` decisions in play order: ``seats`` (T,), ``obs`` (T, 491), ``masks``
    (T, 56), ``actions`` (T,) and ``extra`` model outputs (each (T, ...)); ``rewards`` (4,)
    are each seat's final reward; ``agents[s]`` is seat ``s``'s agent id and ``keep[s]``
    whether its data goes in (a frozen opponent's need not); observations and masks are
    stored as ``dtype`` (the env's ``obs_dtype``). The result is what RLlib's
    ``MultiAgentEnvRunner`` builds step by step for the same hand (tests compare them): per
    seat, its decisions, then an all-zero final observation with the reward on the last
    decision; ``env_t_to_agent_t`` marks which env steps each agent observed.
    """
    n_steps = len(seats)
    zero_obs = np.zeros((1, OBS_SIZE), dtype)
    zero_mask = np.zeros((1, N_ACTIONS), dtype)
    for s in range(N_SEATS):
        if not keep[s]:
            continue
        aid = agents[s]
        pos = np.flatnonzero(seats == s)
        n = len(pos)
        reward = np.zeros(n, np.float32)
        reward[-1] = rewards[s]
        # Already-numpy data, as ``SingleAgentEpisode.to_numpy()`` leaves it (RLlib's
        # annotations only name the list form, hence the untyped keyword dict).
        data: dict[str, Any] = {
            "observations": {
                MASK_KEY: np.concatenate([masks[pos].astype(dtype), zero_mask]),
                OBS_KEY: np.concatenate([obs[pos].astype(dtype), zero_obs]),
            },
            "infos": [{} for _ in range(n + 1)],
            "actions": actions[pos].astype(np.int32),
            "rewards": reward,
            "extra_model_outputs": {k: v[pos] for k, v in extra.items()},
            "multi_agent_episode_id": episode.id_,
        }
        episode.agent_episodes[aid] = SingleAgentEpisode(
            terminated=True,
            len_lookback_buffer=0,
            agent_id=aid,
            module_id=episode.module_for(aid),
            **data,
        )
        index: list[int | str] = [MultiAgentEpisode.SKIP_ENV_TS_TAG] * (n_steps + 1)
        for i, p in enumerate(pos.tolist()):
            index[p] = i
        index[n_steps] = n
        episode.env_t_to_agent_t[aid] = InfiniteLookbackBuffer(index)
        episode.agent_t_started[aid] = 0
    episode.env_t = n_steps
    episode.is_terminated = True
    return episode


class BatchedHandsEnvRunner(MultiAgentEnvRunner):
    """RLlib's multi-agent env runner for :class:`BatchedHandsEnv`, with bulk bookkeeping.

    It steps the env's engine directly: one forward pass per RLModule per engine step (the
    rows of the hands whose mover maps to it), actions sampled from the module's action
    distribution as RLlib's ``GetActions`` connector does, decisions kept in numpy arrays,
    and every finished hand returned as its own ``MultiAgentEpisode`` (:func:`hand_episode`)
    with the agents of ``policies_to_train`` in it. Each hand is mapped to modules when it is
    dealt, by ``config.policy_mapping_fn(agent_id, episode)``, so an opponent league works as
    it does on RLlib's own runner. Slots are refilled as soon as a hand ends (no waiting),
    and hands still in progress when ``sample()`` returns carry on at the next call.

    A trained module can ask for two extra columns (:data:`HIDDEN_HANDS` when its
    ``needs_hidden`` attribute is true, :data:`TEACHER_ACTION` when its ``teacher`` attribute
    names a registry agent): they are recorded at its decisions as extra model outputs, so
    RLlib's learner connectors put them in the train batch as columns.

    Limits (checked or documented): one env per runner (``num_envs_per_env_runner=1``; raise
    ``num_hands`` instead); env-to-module and module-to-env connectors are not run (the
    modules get ``{"obs": {"observations", "action_mask"}}`` tensors); stateless modules
    only; per-step episode callbacks are not called.
    """

    def __init__(self, config: Any, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self._hands: BatchedHandsEnv | None = None
        if self.env is None:
            return
        if self.num_envs != 1:
            raise ValueError(
                "BatchedHandsEnvRunner steps one BatchedHandsEnv per runner: set "
                f"num_envs_per_env_runner=1 (raise num_hands instead), got {self.num_envs}"
            )
        env = getattr(self.env, "envs", [None])[0]
        env = getattr(env, "unwrapped", env)
        if not isinstance(env, BatchedHandsEnv):
            raise ValueError(
                f"BatchedHandsEnvRunner needs a BatchedHandsEnv, got {type(env).__name__}"
            )
        self._hands = env
        self._rng = np.random.default_rng(self._seed)
        n = env.num_hands
        self._dec_obs = np.zeros((n, MAX_DECISIONS, OBS_SIZE), np.uint8)
        self._dec_mask = np.zeros((n, MAX_DECISIONS, N_ACTIONS), np.int8)
        self._dec_act = np.zeros((n, MAX_DECISIONS), np.int64)
        self._dec_seat = np.zeros((n, MAX_DECISIONS), np.int8)
        self._dec_extra: dict[str, np.ndarray] = {}
        self._dec_len = np.zeros(n, np.int64)
        self._module_ids: list[str] = []
        self._slot_module = np.zeros((n, N_SEATS), np.int64)
        self._slot_episode: list[MultiAgentEpisode | None] = [None] * n
        self._slot_started = np.zeros(n)
        self._obs: np.ndarray | None = None
        self._mask = np.zeros((n, N_ACTIONS), np.int8)
        self._seat = np.zeros(n, np.int64)
        self._needs_hidden = np.zeros(0, bool)  # per module (in _module_ids order)
        self._teachers: list[Agent | None] = []
        self.teach_bids_only = False

    def set_teacher_scope(self, bids_only: bool) -> None:
        """Ask the teacher at every decision of the trained modules (False), or at the bidding
        and doubling ones only (True: once the imitation schedule has ended, only the
        ``teacher_bid_floor`` weighs)."""
        self.teach_bids_only = bool(bids_only)

    # -------------------------------------------------------------- sampling
    def sample(  # type: ignore[override]  # MultiAgentEnvRunner.sample's own signature
        self,
        *,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        explore: bool | None = None,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> list[MultiAgentEpisode]:
        """Play until ``num_timesteps`` decisions of the trained modules (in finished hands:
        what the learner gets) or ``num_episodes`` hands are done; by default this runner's
        rollout fragment (its share of the train batch). Returns the finished hands (see
        the class docs)."""
        if self._hands is None:
            raise ValueError(f"{self} has no env: it cannot sample")
        if num_timesteps is not None and num_episodes is not None:
            raise ValueError("give num_timesteps or num_episodes, not both")
        explore = self.config.explore if explore is None else explore
        if num_timesteps is None and num_episodes is None:
            # Both batch modes: about this runner's share of the train batch, counted in
            # learning decisions (whole hands are returned, so the batch means what it says)
            num_timesteps = self.config.get_rollout_fragment_length(self.worker_index)
        t0 = time.perf_counter()
        with self.metrics.log_time(SAMPLE_TIMER):
            if force_reset or self._needs_initial_reset or self._obs is None:
                self._reset_hands()
            episodes = self._play(num_timesteps, num_episodes, explore, random_actions)
        # RLlib's SAMPLE_TIMER is a moving average; this is the wall time of this call
        # ("max" over runners, which sample in parallel; cleared every iteration).
        self.metrics.log_value(SAMPLE_WALL_S, time.perf_counter() - t0, reduce="max")
        return episodes

    def _reset_hands(self) -> None:
        assert self._hands is not None
        seed = self._seed if self._needs_initial_reset else None
        self._obs, self._mask, self._seat = self._hands.engine.reset(seed=seed)
        self._needs_initial_reset = False
        if self.module is None:
            raise ValueError(f"{self} has no RLModule: it cannot sample")
        self._module_ids = sorted(self.module.keys())  # a stable order: same seed, same run
        for mid in self._module_ids:  # sampling never trains: no train/eval switch per call
            mod = self.module[mid]
            if isinstance(mod, torch.nn.Module):
                mod.eval()
        modules = [self.module[mid] for mid in self._module_ids]
        self._needs_hidden = np.array([bool(getattr(m, "needs_hidden", False)) for m in modules])
        built: dict[str, Agent] = {}
        self._teachers = []
        for m in modules:
            spec = getattr(m, "teacher", None)
            if isinstance(spec, str) and spec not in built:
                built[spec] = make_opponent_agent(spec, self._seed)
            self._teachers.append(built[spec] if isinstance(spec, str) else None)
        self._dec_len[:] = 0
        for slot in range(self._hands.num_hands):
            self._new_hand(slot)

    def _new_hand(self, slot: int) -> None:
        """A fresh episode for the hand just dealt in ``slot``: map its four agents."""
        assert self._hands is not None
        agents = self._hands.agent_ids[slot]
        spaces: dict[str, Any] = {  # per-agent dicts, as RLlib's runner gives them
            "observation_space": dict.fromkeys(agents, self._hands.agent_observation_space),
            "action_space": dict.fromkeys(agents, self._hands.agent_action_space),
            "agent_to_module_mapping_fn": self.config.policy_mapping_fn,
        }
        episode = MultiAgentEpisode(**spaces)
        for s, aid in enumerate(agents.tolist()):
            mid = episode.module_for(aid)
            if mid not in self._module_ids:
                raise ValueError(
                    f"policy_mapping_fn mapped {aid!r} to {mid!r}, which is not a module "
                    f"of this runner: {self._module_ids}"
                )
            self._slot_module[slot, s] = self._module_ids.index(mid)
        self._slot_episode[slot] = episode
        self._slot_started[slot] = time.perf_counter()
        self._dec_len[slot] = 0

    def _play(
        self,
        num_timesteps: int | None,
        num_episodes: int | None,
        explore: bool,
        random_actions: bool,
    ) -> list[MultiAgentEpisode]:
        assert self._hands is not None and self._obs is not None
        env = self._hands
        n = env.num_hands
        rows = np.arange(n)
        trainable = np.array([self._trains(mid) for mid in self._module_ids])
        counted = trainable if trainable.any() else np.ones_like(trainable)  # none learns
        done_eps: list[MultiAgentEpisode] = []
        done_steps = stepped = 0
        module_steps = np.zeros(len(self._module_ids), np.int64)
        tally = _HandTally(len(self._module_ids))
        while (
            (done_steps < num_timesteps)
            if num_timesteps is not None
            else (len(done_eps) < (num_episodes or 0))
        ):
            module = self._slot_module[rows, self._seat]
            actions, extra = self._act(module, explore, random_actions)
            learn = np.flatnonzero(trainable[module])
            if learn.size:
                pos = self._dec_len[learn]
                self._dec_obs[learn, pos] = self._obs[learn]
                self._dec_mask[learn, pos] = self._mask[learn]
                self._dec_act[learn, pos] = actions[learn]
                for k, v in extra.items():
                    self._extra_buffer(k, v)[learn, pos] = v[learn]
                for k, v in self._recipe_columns(module, learn).items():
                    self._extra_buffer(k, v)[learn, pos] = v
            self._dec_seat[rows, self._dec_len] = self._seat
            self._dec_len += 1
            module_steps += np.bincount(module, minlength=len(self._module_ids))
            self._obs, self._mask, seat, rewards, done = env.engine.step(actions)
            self._seat = seat
            stepped += n
            for slot in np.flatnonzero(done).tolist():
                episode = self._finish_hand(slot, rewards[slot], trainable)
                seats = self._dec_seat[slot, : self._dec_len[slot]]
                done_steps += int(counted[self._slot_module[slot]][seats].sum())
                if episode is not None:
                    done_eps.append(episode)
                tally.add(
                    self._slot_module[slot],
                    rewards[slot],
                    self._dec_seat[slot, : self._dec_len[slot]],
                    time.perf_counter() - float(self._slot_started[slot]),
                )
                self._new_hand(slot)
        self._log_counts(stepped, module_steps, tally)
        return done_eps

    def _recipe_columns(self, module: np.ndarray, learn: np.ndarray) -> dict[str, np.ndarray]:
        """The :data:`HIDDEN_HANDS` and :data:`TEACHER_ACTION` rows of the decisions at the
        slots ``learn`` (trained modules only), for the modules that ask for them."""
        assert self._hands is not None and self._obs is not None
        out: dict[str, np.ndarray] = {}
        mods = module[learn]
        if self._needs_hidden.any():
            hid = np.zeros((len(learn), 3 * N_CARDS), np.uint8)
            need = self._needs_hidden[mods]
            if need.any():
                rows = learn[need]
                state = np.asarray(self._hands.engine.state())
                hid[need] = hidden_hands(state[rows], self._seat[rows])
            out[HIDDEN_HANDS] = hid
        if any(t is not None for t in self._teachers):
            teach = np.full(len(learn), -1, np.int64)
            for k in np.unique(mods).tolist():
                teacher = self._teachers[k]
                if teacher is None:
                    continue
                at = np.flatnonzero(mods == k)
                if self.teach_bids_only:
                    at = at[bidding_rows(self._mask[learn[at]])]
                if at.size:
                    rows = learn[at]
                    obs = self._obs[rows].astype(np.uint8, copy=False)
                    mask = self._mask[rows].astype(np.int8, copy=False)
                    teach[at] = teacher.act_batch(obs, mask)
            out[TEACHER_ACTION] = teach
        return out

    def _trains(self, module_id: str) -> bool:
        fn = self.config.policies_to_train
        if fn is None:
            return True
        if callable(fn):
            return bool(fn(module_id, None))
        return module_id in fn

    def _extra_buffer(self, key: str, value: np.ndarray) -> np.ndarray:
        buf = self._dec_extra.get(key)
        if buf is None:
            assert self._hands is not None
            shape = (self._hands.num_hands, MAX_DECISIONS, *value.shape[1:])
            buf = self._dec_extra[key] = np.zeros(shape, value.dtype)
        return buf

    def _act(
        self, module: np.ndarray, explore: bool, random_actions: bool
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One action per hand from the module its mover maps to, and the extra outputs
        (log-probability, distribution inputs) the learner needs."""
        assert self._obs is not None and self.module is not None
        n = len(module)
        dtype = self._hands.obs_dtype if self._hands is not None else np.float32
        if random_actions:
            return random_legal_actions(self._mask, self._rng), {}
        actions = np.zeros(n, np.int64)
        logp = np.zeros(n, np.float32)
        dist_inputs: np.ndarray | None = None
        for k in np.unique(module).tolist():
            rows = np.flatnonzero(module == k)
            mod = self.module[self._module_ids[k]]
            batch = {
                Columns.OBS: {
                    OBS_KEY: torch.from_numpy(self._obs[rows].astype(dtype, copy=False)),
                    MASK_KEY: torch.from_numpy(self._mask[rows].astype(dtype, copy=False)),
                }
            }
            with torch.no_grad():
                out = mod.forward_exploration(batch) if explore else mod.forward_inference(batch)
                if Columns.ACTIONS not in out:
                    cls = (
                        mod.get_exploration_action_dist_cls()
                        if explore
                        else mod.get_inference_action_dist_cls()
                    )
                    dist = cls.from_logits(out[Columns.ACTION_DIST_INPUTS])
                    if not explore:
                        dist = dist.to_deterministic()
                    out[Columns.ACTIONS] = dist.sample()
                    out[Columns.ACTION_LOGP] = dist.logp(out[Columns.ACTIONS])
            actions[rows] = np.asarray(out[Columns.ACTIONS])
            if Columns.ACTION_LOGP in out:
                logp[rows] = np.asarray(out[Columns.ACTION_LOGP])
            if Columns.ACTION_DIST_INPUTS in out:
                inputs = np.asarray(out[Columns.ACTION_DIST_INPUTS], dtype=np.float32)
                if dist_inputs is None:
                    dist_inputs = np.zeros((n, inputs.shape[1]), np.float32)
                dist_inputs[rows] = inputs
        extra = {Columns.ACTION_LOGP: logp}
        if dist_inputs is not None:
            extra[Columns.ACTION_DIST_INPUTS] = dist_inputs
        extra[WEIGHTS_SEQ_NO] = np.full(n, self._weights_seq_no, np.int64)
        return actions, extra

    def _finish_hand(
        self, slot: int, rewards: np.ndarray, trainable: np.ndarray
    ) -> MultiAgentEpisode | None:
        """The finished hand in ``slot`` as an episode (None when no seat learns)."""
        assert self._hands is not None
        keep = trainable[self._slot_module[slot]].tolist()
        episode = self._slot_episode[slot]
        if not any(keep) or episode is None:
            return None
        t = int(self._dec_len[slot])
        return hand_episode(
            episode,
            self._hands.agent_ids[slot].tolist(),
            self._dec_seat[slot, :t],
            self._dec_obs[slot, :t],
            self._dec_mask[slot, :t],
            self._dec_act[slot, :t],
            {k: v[slot, :t] for k, v in self._dec_extra.items()},
            rewards,
            keep,
            self._hands.obs_dtype,
        )

    # -------------------------------------------------------------- metrics
    def _log_counts(self, stepped: int, module_steps: np.ndarray, tally: _HandTally) -> None:
        """Step counts, and the episode metrics of the hands finished in this call as one
        entry (per-hand entries would cost more than the hands); agents are keyed by seat
        (``player_S``), not by slot."""
        m = self.metrics
        m.log_value(NUM_ENV_STEPS_SAMPLED, stepped, reduce="sum")
        m.log_value(
            NUM_ENV_STEPS_SAMPLED_LIFETIME, stepped, reduce="lifetime_sum", with_throughput=True
        )
        m.log_value((NUM_AGENT_STEPS_SAMPLED, "all"), stepped, reduce="sum")
        m.log_value((NUM_AGENT_STEPS_SAMPLED_LIFETIME, "all"), stepped, reduce="lifetime_sum")
        for mid, k in zip(self._module_ids, module_steps.tolist(), strict=True):
            if k:
                m.log_value((NUM_MODULE_STEPS_SAMPLED, mid), k, reduce="sum")
                m.log_value((NUM_MODULE_STEPS_SAMPLED_LIFETIME, mid), k, reduce="lifetime_sum")
        m.log_value(NUM_EPISODES, tally.hands, reduce="sum")
        m.log_value(NUM_EPISODES_LIFETIME, tally.hands, reduce="lifetime_sum")
        if not tally.hands:
            return
        seats = [f"player_{s}" for s in range(N_SEATS)]
        modules = {
            mid: tally.module_return[k] / tally.module_hands[k]
            for k, mid in enumerate(self._module_ids)
            if tally.module_hands[k]
        }
        self._log_episode_metrics(
            tally.length / tally.hands,
            tally.total_return / tally.hands,
            tally.seconds / tally.hands,
            dict(zip(seats, (tally.seat_return / tally.hands).tolist(), strict=True)),
            modules,
            dict(zip(seats, (tally.seat_steps / tally.hands).tolist(), strict=True)),
        )


class _HandTally:
    """Sums over the hands finished in one ``sample()`` call (for its metrics)."""

    def __init__(self, n_modules: int) -> None:
        self.hands = 0
        self.length = 0
        self.seconds = 0.0
        self.total_return = 0.0
        self.seat_return = np.zeros(N_SEATS)
        self.seat_steps = np.zeros(N_SEATS)
        self.module_return = np.zeros(n_modules)
        self.module_hands = np.zeros(n_modules)

    def add(self, modules: np.ndarray, rewards: np.ndarray, seats: np.ndarray, sec: float) -> None:
        self.hands += 1
        self.length += len(seats)
        self.seconds += sec
        self.total_return += float(rewards.sum())
        self.seat_return += rewards
        self.seat_steps += np.bincount(seats, minlength=N_SEATS)
        np.add.at(self.module_return, modules, rewards)
        self.module_hands[np.unique(modules)] += 1
