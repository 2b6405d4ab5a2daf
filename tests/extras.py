"""Which extra installs each optional client, and the one skip that names it.

The README's test command runs on the light install (`.[train,dev]`) too: a test that needs a
client from another extra is skipped with a message saying what to install, never an import
error.
"""

from __future__ import annotations

from types import ModuleType

import pytest

EXTRA = {
    "torch": "train",
    "tyro": "train",
    "tqdm": "train",
    "starlette": "web",
    "uvicorn": "web",
    "nbformat": "notebooks",
    "nbclient": "notebooks",
    "matplotlib": "notebooks",
    "ipykernel": "notebooks",
    "stable_baselines3": "integrations",
    "sb3_contrib": "integrations",
    "moviepy": "integrations",
    "tianshou": "integrations",
    "ray.rllib": "integrations",
    "psutil": "integrations",
    "pyspiel": "integrations",
    "agilerl": "integrations",
    "peft": "integrations",
    "supersuit": "integrations",
    "torchrl": "integrations",
}
"""Importable name -> the extra of ``pyproject.toml`` that installs it."""


def need(module: str) -> ModuleType:
    """``module`` imported, or the test (module) skipped naming the extra that installs it."""
    extra = EXTRA[module]
    return pytest.importorskip(module, reason=f"needs {module}: pip install -e '.[{extra}]'")
