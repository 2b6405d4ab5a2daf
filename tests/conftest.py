"""Test tiers: markers given by path and test name in one place, and xdist groups.

Tiers (markers registered in pyproject.toml, ``--strict-markers``):

- ``integration``: tests/integrations/ (framework clients: SB3, RLlib, OpenSpiel, ...);
- ``browser``: headless Chromium (tests/test_web_browser.py);
- ``notebook``: the notebooks executed in a kernel (tests/test_notebooks.py);
- ``cluster``: tests that start Ray (a two-node cluster or a local Ray);
- ``slow``: subprocess trainings, long arena / property runs and the like, each over about
  5 s on an idle 2-core machine (measured with ``--durations=0``), listed in :data:`SLOW`;
- the unmarked rest is the unit tier:
  ``python -m pytest -m "not (integration or browser or notebook or cluster or slow)"``.

The default run (``python -m pytest``) runs every tier on two xdist workers
(``-n 2 --dist loadgroup`` in pyproject.toml, scheduled by :func:`pytest_xdist_make_scheduler`
below). The heavy tests (browser, notebook, Ray) form one group that runs on one worker, so
a Ray cluster, Chromium and a notebook kernel never run at the same time as each other;
modules with an expensive module-scoped fixture (a trained model) stay on one worker each,
so the fixture is built once.
"""

from __future__ import annotations

import pytest

BY_PATH = {
    "tests/integrations/": "integration",
    "tests/test_web_browser.py": "browser",
    "tests/test_web_phone.py": "browser",
    "tests/integrations/test_rllib_cluster.py": "cluster",
    "tests/integrations/test_ray_local.py": "cluster",  # train.rllib_ppo's own local Ray
}
"""Path prefix -> marker."""

BY_NAME = {
    "tests/test_notebooks.py::test_notebook_executes": "notebook",
}
"""``path::function`` -> marker (every parametrization of the function)."""

RAY_FIXTURES = {"local_ray", "two_nodes"}
"""Fixtures that start Ray: a test using one is a ``cluster`` test."""

SLOW = {
    # subprocess trainings and commands
    "tests/test_demo.py::test_demo_is_reproducible_and_rejects_bad_counts",
    "tests/test_demo.py::test_demo_narrates_a_hand_and_prints_the_arena_figures",
    "tests/test_training_faults.py::test_kill_9_anywhere_then_resume_ends_like_an_uninterrupted_run",
    "tests/test_training_faults.py::test_ctrl_c_saves_a_final_checkpoint_and_exits_130",
    "tests/test_training_faults.py::test_rerun_without_resume_is_refused_and_changes_nothing",
    "tests/test_exploit.py::test_exploit_random_end_to_end_then_refuses_to_overwrite",
    "tests/test_exploit.py::test_ctrl_c_saves_the_run_and_says_where",
    "tests/test_exploit.py::test_opponent_agent_fills_every_opponent_seat_and_is_evaluated",
    "tests/test_exploit.py::test_ctrl_c_while_measuring_then_the_printed_command_only_measures",
    "tests/test_exploit.py::test_resume_of_a_run_interrupted_while_training_trains_then_measures",
    "tests/test_ppo_guards.py::test_a_time_budget_spent_before_any_hand_finished_goes_on_until_one_has",
    "tests/test_ppo_guards.py::test_the_trainers_without_their_extra_say_which_to_install",
    "tests/test_web_server_limits.py::test_idle_connections_are_timed_out_while_a_normal_client_is_served",
    "tests/test_ppo.py::test_smoke_training_subprocess",
    "tests/test_ppo.py::test_cli_help_lists_flags",
    "tests/test_ppo_distill.py::test_distillation_makes_the_learner_play_the_search_best_cards",
    "tests/test_arena.py::test_console_script_exit_status_without_traceback",
    # in-process training
    "tests/test_ppo_device.py::test_torch_engine_trains_and_writes_a_loadable_checkpoint",
    "tests/test_ppo_device.py::test_torch_engine_same_seed_same_weights_and_resume_is_bit_exact",
    "tests/test_ppo_schedules.py::test_teacher_makes_the_learner_play_like_it",
    "tests/test_ppo_schedules.py::test_belief_training_learns_who_holds_what",
    "tests/test_env_formats.py::test_sb3_contrib_maskable_ppo_finds_the_masks_and_learns_through_env_kwargs",
    # strength and long arena runs
    "tests/test_ppo.py::test_shipped_checkpoint_clearly_beats_random",
    "tests/test_agents.py::test_ppo_r1_stays_the_panel_and_its_search_bidder",
    "tests/test_arena.py::test_results_depend_on_the_seed_not_on_the_worker_count",
    "tests/test_arena.py::test_match_results_do_not_depend_on_the_worker_count",
    "tests/test_eval.py::test_results_do_not_depend_on_the_number_of_workers",
    "tests/test_variants_agents.py::test_a_ppo_spec_refuses_a_variant_unless_allowed",
    "tests/test_variance.py::test_many_deals_reduced_and_plain_agree_within_their_intervals",
    "tests/test_batched_torch.py::test_compiled_engine_matches_numpy_engine",
    # many random hands against a reference
    "tests/test_rule_torch.py::test_torch_decides_like_decide_batch_on_many_hands",
    "tests/test_rule_torch.py::test_torch_decides_like_decide_batch_in_every_phase",
    "tests/test_batched_torch.py::test_torch_engine_matches_numpy_engine_200k_decisions",
    "tests/test_batched.py::test_variants_single_hands_match_reference",
    "tests/test_batched.py::test_variants_matches_match_reference",
    "tests/test_rule_batch.py::test_batch_decides_like_the_scalar_rules_on_many_hands",
    "tests/test_properties.py::test_incremental_observer_equals_reference_encoding",
    "tests/test_properties.py::test_env_masks_zero_sum_and_replay_reproduces_every_observation",
    "tests/test_properties.py::test_random_hand_invariants",
    "tests/test_batched.py::test_hand_number_is_clipped_after_255_hands",
    "tests/test_batched.py::test_single_hands_match_reference",
    "tests/test_batched.py::test_matches_match_reference",
    "tests/test_batched.py::test_large_batch_matches_reference",
    "tests/test_gym_vector.py::test_each_sub_env_is_a_single_agent_env_on_the_same_deals",
    "tests/test_deal_sets.py::test_shipped_file_matches_its_hash_and_the_generator",
    # integrations that train or play many hands (also marked integration)
    "tests/integrations/test_openspiel.py::test_ismcts_plays_legally_and_beats_random_on_duplicate_deals",
    "tests/integrations/test_openspiel.py::test_deal_consistent_is_uniform_over_exactly_the_consistent_deals",
    "tests/integrations/test_tianshou.py::test_collector_reads_the_mask_and_plays_only_legal_moves",
    "tests/integrations/test_tianshou.py::test_tiny_training_run_then_the_arena",
    "tests/integrations/test_agilerl.py::test_train_off_policy_reads_masks_from_info",
    "tests/integrations/test_sb3.py::test_maskable_ppo_trains_on_make_vec_env_defaults_without_illegal_moves",
    "tests/integrations/test_sb3.py::test_as_agent_feeds_the_model_what_it_was_trained_on",
    "tests/integrations/test_sb3.py::test_trained_model_plays_a_duplicate_duel",
    "tests/integrations/test_search_vs_ismcts.py::test_both_agents_reported_and_reproducible",
    "tests/integrations/test_rllib_cluster.py::test_training_spans_two_nodes_resumes_and_exports",
}
"""``path::function`` of the slow tests (every parametrization); tests/test_tiers.py checks
that each still names a test."""


def _where(item: pytest.Item) -> tuple[str, str]:
    """``(path, path::function)`` of a test, the path relative to the repository root."""
    path = item.nodeid.split("::", 1)[0]
    name = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
    return path, f"{path}::{name}"


HEAVY_GROUP = {
    "tests/test_web_browser.py",
    "tests/test_web_phone.py",
    "tests/test_notebooks.py::test_notebook_executes",
    "tests/integrations/test_rllib.py",  # its Ray tests share a module-scoped local Ray
    "tests/integrations/test_rllib_cluster.py",
    "tests/integrations/test_ray_local.py",
}
"""What runs on one worker, one test at a time (``path`` or ``path::function``): Chromium,
the notebook kernels and everything that starts Ray (which also could not share its ports)."""

MODULE_GROUPS = {
    "tests/integrations/test_sb3.py",  # a model trained once (module-scoped fixture)
    "tests/integrations/test_tianshou.py",
    "tests/integrations/test_search_vs_ismcts.py",
    "tests/test_training_faults.py",  # an uninterrupted reference run
    "tests/test_rule_batch.py",  # the positions both rule-agent paths decide
    "tests/test_rule_torch.py",
    "tests/test_variance.py",  # duels played once
    "tests/test_ppo_speed.py",  # the positions both training paths see
}
"""Modules whose module-scoped fixtures are expensive: each module stays on one worker so
the fixture is built once (tests/test_tiers.py checks that every such module is here)."""


def xdist_group_of(nodeid: str) -> str | None:
    """The scheduling group of a test id, or None for a test scheduled on its own."""
    path = nodeid.split("::", 1)[0]
    name = nodeid.split("[", 1)[0]
    if path in HEAVY_GROUP or name in HEAVY_GROUP:
        return "heavy"
    if path in MODULE_GROUPS:
        return path
    return None


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path, name = _where(item)
        marks = {m for prefix, m in BY_PATH.items() if path.startswith(prefix)}
        if name in BY_NAME:
            marks.add(BY_NAME[name])
        if RAY_FIXTURES & set(getattr(item, "fixturenames", ())):
            marks.add("cluster")
        if name in SLOW:
            marks.add("slow")
        for mark in sorted(marks - {m.name for m in item.iter_markers()}):
            item.add_marker(getattr(pytest.mark, mark))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadgroup`` with the groups above. (xdist's own loadgroup renames each
    grouped test's nodeid, which pytest 9 no longer allows: its groups are silently lost.)
    Tests are handed out one at a time like ``--dist load``; a group goes whole to one
    worker, which runs it in collection order."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid) or nodeid

    return TierScheduling(config, log)
