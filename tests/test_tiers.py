"""The tier lists in tests/conftest.py name tests that exist, and the markers reach them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent


def _test_functions(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("entry", sorted(conftest.SLOW | set(conftest.BY_NAME)))
def test_every_listed_test_exists(entry: str) -> None:
    path, name = entry.split("::")
    assert (ROOT / path).is_file(), f"{entry}: no such file (renamed? update tests/conftest.py)"
    assert name in _test_functions(path), f"{entry}: no such test (update tests/conftest.py)"


def test_every_path_prefix_exists() -> None:
    for prefix in conftest.BY_PATH:
        assert (ROOT / prefix).exists(), prefix


def test_markers_are_given_by_path_name_and_fixture(request: pytest.FixtureRequest) -> None:
    """This test itself is in the unit tier: unmarked and in no xdist group."""
    names = {m.name for m in request.node.iter_markers()}
    assert names.isdisjoint({"integration", "browser", "notebook", "cluster", "slow"}), names
    assert "xdist_group" not in names
