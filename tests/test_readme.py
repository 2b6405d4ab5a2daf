"""The README's Python examples run as written, and it opens with the two commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_example_runs(code: str, capsys) -> None:
    exec(compile(code, str(README), "exec"), {})


def test_readme_starts_with_install_and_test_commands() -> None:
    text = README.read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first and text.index(first.group(0)) < 40
    install, tests = first.group(1).strip().splitlines()
    assert "torch==2.13.0" in install and "butifarra demo" in install
    assert tests.endswith("python -m pytest")
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest" in ci and "torch==2.13.0" in ci
