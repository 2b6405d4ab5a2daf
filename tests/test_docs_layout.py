"""The README's layout table names every module of the four packages, and nothing else.

Each row of the table under "Layout" names a folder (```butifarra_env/core/```) and the
modules in it (```cards.py```, ...). A module added without a row entry, or a row entry whose
module is gone, fails here, so the table a newcomer reads stays the code's real map.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("butifarra_env", "agents", "train", "butifarra")
SKIP = {"__init__.py", "__main__.py"}


def _layout_rows() -> dict[str, set[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("- Layout", 1)[1].split("\n- ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[1].startswith("`"):
            continue
        folder = cells[1].strip("`")
        rows.setdefault(folder, set()).update(re.findall(r"`([\w]+\.py)`", cells[2]))
    return rows


def _modules() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name in SKIP:
                continue
            folder = path.parent.relative_to(ROOT).as_posix() + "/"
            found.setdefault(folder, set()).add(path.name)
    return found


def test_every_module_is_in_the_layout_table() -> None:
    rows, modules = _layout_rows(), _modules()
    missing = {
        folder: sorted(names - rows.get(folder, set()))
        for folder, names in modules.items()
        if names - rows.get(folder, set())
    }
    assert not missing, f"README layout table lacks: {missing}"


def test_the_layout_table_names_no_missing_module() -> None:
    rows, modules = _layout_rows(), _modules()
    stale = {
        folder: sorted(names - modules.get(folder, set()))
        for folder, names in rows.items()
        if names - modules.get(folder, set())
    }
    assert not stale, f"README layout table names modules that do not exist: {stale}"
