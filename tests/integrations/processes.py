"""The processes a Ray test started: their tree, and which of them are still alive."""

from __future__ import annotations

import contextlib

import psutil


def process_tree(pid: int, *, gone_ok: bool = False) -> list[psutil.Process]:
    """``pid`` and all its descendants; with ``gone_ok``, [] when ``pid`` has exited (else
    psutil's NoSuchProcess)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        if gone_ok:
            return []
        raise


def alive(pids: set[int]) -> list[int]:
    """Those of ``pids`` still running (zombies count as gone)."""
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
    return out
