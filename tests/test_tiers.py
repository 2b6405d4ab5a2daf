"""The tier lists in tests/conftest.py name tests that exist, the heavy tests share one
xdist group, and modules with module-scoped fixtures stay on one worker."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent
TEST_FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))
CHEAP_MODULE_FIXTURES = {"tests/test_eval.py"}  # loads a deal set: no need to keep it together


def _tree(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"))


def _functions(path: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(_tree(path)) if isinstance(n, ast.FunctionDef)}


def _has_wide_fixture(path: str) -> bool:
    """Whether the module defines a module-, class- or session-scoped fixture."""
    for node in _functions(path).values():
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and any(
                k.arg == "scope"
                and getattr(k.value, "value", None) in ("module", "class", "session")
                for k in deco.keywords
            ):
                return True
    return False


@pytest.mark.parametrize(
    "entry", sorted(conftest.SLOW | set(conftest.BY_NAME) | set(conftest.HEAVY_GROUP))
)
def test_every_listed_test_exists(entry: str) -> None:
    path, _, name = entry.partition("::")
    assert (ROOT / path).is_file(), f"{entry}: no such file (renamed? update tests/conftest.py)"
    assert not name or name in _functions(path), f"{entry}: no such test (tests/conftest.py)"


def test_every_path_prefix_and_module_group_exists() -> None:
    for path in [*conftest.BY_PATH, *conftest.MODULE_GROUPS]:
        assert (ROOT / path).exists(), path


def test_browser_notebook_and_ray_tests_are_in_the_heavy_group() -> None:
    heavy = {"browser", "notebook", "cluster"}
    for where, mark in [*conftest.BY_PATH.items(), *conftest.BY_NAME.items()]:
        if mark in heavy:
            assert conftest.xdist_group_of(where + "::test_x") == "heavy" or (
                conftest.xdist_group_of(where) == "heavy"
            ), where
    for path in TEST_FILES:  # a test that takes a Ray fixture
        for name, node in _functions(path).items():
            args = {a.arg for a in node.args.args}
            if name.startswith("test_") and args & conftest.RAY_FIXTURES:
                assert conftest.xdist_group_of(f"{path}::{name}") == "heavy", (path, name)


@pytest.mark.parametrize("path", TEST_FILES)
def test_a_module_with_a_module_scoped_fixture_stays_on_one_worker(path: str) -> None:
    if _has_wide_fixture(path) and path not in CHEAP_MODULE_FIXTURES:
        assert conftest.xdist_group_of(f"{path}::test_x") is not None, (
            f"{path} builds a module-scoped fixture: add it to MODULE_GROUPS in tests/conftest.py"
        )


def test_groups_of_test_ids() -> None:
    group = conftest.xdist_group_of
    assert group("tests/test_notebooks.py::test_notebook_executes[01_quickstart.ipynb]") == "heavy"
    assert group("tests/test_notebooks.py::test_every_notebook_is_tested") is None
    assert group("tests/test_web_browser.py::test_two_browsers_do_not_see_each_other") == "heavy"
    sb3 = "tests/integrations/test_sb3.py"
    assert group(f"{sb3}::test_trained_model_plays_a_duplicate_duel") == sb3
    assert group("tests/test_rules_bidding_scoring.py::test_multiplier_table[suit]") is None


def test_this_test_is_in_the_unit_tier(request: pytest.FixtureRequest) -> None:
    names = {m.name for m in request.node.iter_markers()}
    assert names.isdisjoint({"integration", "browser", "notebook", "cluster", "slow"}), names
