"""The run folder of a training run (``runs/NAME/``), for both trainers: what keeps a user's
runs safe, kept out of the algorithms so that they read top to bottom.

Nothing here knows PPO or RLlib settings: callers pass paths, file names, CSV field lists and
argument lists. The API:

Refusals (raised before anything is changed)
    :class:`RunRefused` (a ValueError) -- a run that cannot start as asked.
    :func:`check_writable_folder` -- the folder is (or can be created as) writable.
    :func:`check_export_path` -- an export path is new, or an agent checkpoint this run wrote.
    :func:`existing_run_files` -- the run files already in a folder (a new run must not start
    there).
    :func:`clean_stale_temps` -- remove the temporary files an interrupted write left.

Checkpoint files (atomic; the newest and the previous good one)
    :func:`save_torch` -- ``torch.save``, atomically (``before_replace`` hook for rotation).
    :func:`keep_previous` -- make ``previous`` a copy (hard link) of ``newest``, atomically.
    :func:`set_aside` -- rename an unreadable file to ``NAME.unreadable[.N]`` (never deleted).
    :func:`save_rotating` -- save a new newest checkpoint, the old one becoming the previous.
    :func:`newest_readable` -- load the newest readable of (newest, previous), with the
    reasons a newer one was passed over.
    :data:`SAVE_DELAY_ENV` -- fault-injection hook for tests (pause mid-write).

Metrics (CSV and TensorBoard)
    :func:`repair_csv` -- before a run (re)starts: drop a row torn by a kill, rows with
    missing or extra fields and rows past the update resumed from; today's header.
    :func:`append_csv` -- one row (the header on a new file).
    :func:`open_tensorboard` / :func:`log_scalars` -- the SummaryWriter and grouped scalars.

Signals and messages
    :func:`deferred_interrupt` -- the first Ctrl-C is only noted (finish, save, stop).
    :class:`TrainingInterrupted` -- raised after that final save (a KeyboardInterrupt).
    :func:`resume_command` -- the command line that continues a run.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import shlex
import shutil
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch

from agents.ppo_net import CHECKPOINT_FORMAT, UnverifiedCheckpointWarning, load_checkpoint
from butifarra_env.core.fileio import atomic_writer, check_can_create

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

T = TypeVar("T")

SAVE_DELAY_ENV = "BUTIFARRA_PPO_SAVE_DELAY"
"""Fault-injection hook for tests: seconds to pause half-way through writing each file of
:func:`save_torch` (so that a test can kill the process mid-write). Unset in normal use."""
RUN_FILE_PREFIXES = ("checkpoint", "metrics.csv", "events.out.tfevents.")
"""Names that mark a folder as holding a run (:func:`existing_run_files`)."""


# ----------------------------------------------------------------------------- refusals
class RunRefused(ValueError):
    """A run that cannot start as asked (it exists, it has no readable checkpoint, its budget
    is spent, an output path is not its own...). Raised before anything was changed."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a training loop after it saved a final checkpoint (the message says
    where, and how to resume)."""


def check_writable_folder(path: Path, what: str) -> None:
    """RunRefused unless ``path`` is (or can be created as) a folder we may write in: a file
    is created and removed in it, or in the nearest folder on the way that exists
    (:func:`~butifarra_env.core.fileio.check_can_create`)."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise RunRefused(f"{what} {str(path)!r} cannot be created: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunRefused(f"{what} {str(path)!r} is not writable ({str(existing)!r} is not)")
    try:  # by trying: as root, /proc and /sys pass the access check
        check_can_create(path / "checkpoint.pt")
    except ValueError as exc:
        raise RunRefused(f"{what} {str(path)!r} cannot be used: {exc}") from None


def check_export_path(export_path: str | None, run_id: str, own_files: list[Path]) -> None:
    """RunRefused unless ``export_path`` can be written without destroying anything: a new
    file in a writable folder, or an agent checkpoint an earlier session of this run (same
    ``run_id``) wrote. ``own_files`` are the run's own files (an export must not be one)."""
    if export_path is None:
        return
    path = Path(export_path)
    if path.resolve() in {f.resolve() for f in own_files}:
        raise RunRefused(f"--export-path {export_path!r} is one of the run's own files")
    if path.is_dir():
        raise RunRefused(f"--export-path {export_path!r} is a folder; give a file name")
    try:  # by trying (as root, /proc and /sys pass the access check)
        check_can_create(path)
    except ValueError as exc:
        raise RunRefused(f"--export-path {export_path!r} cannot be written: {exc}") from None
    check_writable_folder(path.parent, "--export-path folder")
    if not path.exists():
        return
    hint = "pass another --export-path or move that file away (nothing was changed)"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnverifiedCheckpointWarning)
            data = load_checkpoint(path)
    except ValueError as exc:
        raise RunRefused(
            f"--export-path {export_path!r} exists and is not a {CHECKPOINT_FORMAT} checkpoint "
            f"({exc}); {hint}"
        ) from exc
    if data.get("run_id") != run_id:
        raise RunRefused(
            f"--export-path {export_path!r} exists and holds another run's checkpoint; {hint}"
        )


def existing_run_files(out_dir: Path, prefixes: Sequence[str] = RUN_FILE_PREFIXES) -> list[str]:
    """The names of the run files (starting with one of ``prefixes``) already in
    ``out_dir``, sorted; [] when it does not exist. A new run must not start there."""
    if not out_dir.is_dir():
        return []
    return sorted(p.name for p in out_dir.iterdir() if p.name.startswith(tuple(prefixes)))


def clean_stale_temps(out_dir: Path, names: Sequence[str] = ()) -> list[Path]:
    """Remove the temporary files interrupted writes left in a run folder: ``.NAME.*.tmp``
    (``atomic_writer``) and, for each of ``names``, ``NAME.*.tmp`` (older versions). Only to
    be called at the start of a run, when nothing else writes there. Returns what it removed."""
    stale = set(out_dir.glob(".*.tmp"))
    for name in names:
        stale |= set(out_dir.glob(f"{name}.*.tmp"))
    removed = sorted(p for p in stale if p.is_file())
    for p in removed:
        p.unlink(missing_ok=True)
    return removed


# ----------------------------------------------------------------------------- checkpoint files
def save_torch(
    obj: Mapping[str, object],
    path: str | os.PathLike[str],
    before_replace: Callable[[], None] | None = None,
) -> None:
    """torch.save, atomically (a crash never leaves a torn checkpoint). ``before_replace``
    runs once the new file is completely written, just before it takes ``path``'s place."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getbuffer()
    with atomic_writer(path, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        _fault_injection_pause()
        f.write(data[len(data) // 2 :])
        if before_replace is not None:
            before_replace()


def _fault_injection_pause() -> None:
    try:
        delay = float(os.environ.get(SAVE_DELAY_ENV) or 0)
    except ValueError:
        delay = 0.0
    if delay > 0:
        time.sleep(delay)


def keep_previous(newest: Path, previous: Path) -> None:
    """Make ``previous`` a copy of ``newest`` (a hard link where the file system allows one,
    else a copy), atomically: the rotation step just before a new checkpoint replaces
    ``newest``, so the last two good checkpoints exist at every moment."""
    link = previous.with_name(f".{previous.name}.{os.getpid()}.link.tmp")
    link.unlink(missing_ok=True)
    try:
        os.link(newest, link)
    except OSError:
        with atomic_writer(previous, "wb") as f, open(newest, "rb") as src:
            shutil.copyfileobj(src, f)
        return
    os.replace(link, previous)


def set_aside(path: Path) -> Path:
    """Rename ``path`` to a free ``NAME.unreadable[.N]`` beside it (kept, never deleted)."""
    for n in range(1000):
        target = path.with_name(f"{path.name}.unreadable" + (f".{n}" if n else ""))
        if not target.exists():
            os.replace(path, target)
            return target
    raise RunRefused(f"too many unreadable checkpoints kept beside {str(path)!r}; remove some")


def save_rotating(
    obj: Mapping[str, object], newest: Path, previous: Path, newest_unreadable: bool = False
) -> Path | None:
    """Write ``obj`` as ``newest`` (:func:`save_torch`); the file it replaces becomes
    ``previous`` just before (:func:`keep_previous`). With ``newest_unreadable`` (the run
    resumed from ``previous`` because ``newest`` could not be read) the old ``newest`` is
    set aside instead of rotated over the good previous one; returns where it went."""
    rotate: Callable[[], None] | None = None
    kept = None
    if newest.exists() and newest_unreadable:
        kept = set_aside(newest)
    elif newest.exists():
        rotate = lambda: keep_previous(newest, previous)  # noqa: E731
    save_torch(obj, newest, before_replace=rotate)
    return kept


def newest_readable(
    newest: Path, previous: Path, load: Callable[[Path], T]
) -> tuple[T | None, Path | None, list[str]]:
    """``(load(path), path, problems)`` for the first of ``newest``, ``previous`` that
    ``load`` reads without a ValueError, with the reasons a newer one was passed over;
    ``(None, None, [])`` when neither exists. RunRefused when some exist but none is readable."""
    problems: list[str] = []
    for path in (newest, previous):
        if not path.exists():
            if path == newest and previous.exists():
                problems.append(f"checkpoint {str(newest)!r} is missing")
            continue
        try:
            return load(path), path, problems
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise RunRefused(f"cannot resume: no readable checkpoint ({'; '.join(problems)})")
    return None, None, []


# ----------------------------------------------------------------------------- metrics
def repair_csv(path: Path, fields: Sequence[str], last: int, key: str = "update") -> None:
    """Make ``path`` the log of a run resuming after row ``key == last`` (0: a fresh start,
    an empty log). Drops a last row torn by a kill mid-append (no line end), rows with
    missing or extra fields (``csv.DictReader`` gives them None keys or values), rows whose
    ``key`` is not a count, and rows past ``last`` (the resumed run redoes them). A file
    written with other columns gets ``fields`` as its header (blank where absent). The file
    is rewritten atomically, and only when something changes."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    torn = bool(text) and not text.endswith(("\n", "\r"))
    if torn:
        text = text[: max(text.rfind("\n"), text.rfind("\r")) + 1]
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = list(reader)
    header = reader.fieldnames

    def kept(row: dict[str | None, str | None]) -> bool:
        if None in row or any(v is None for v in row.values()):
            return False
        count = row.get(key) or ""
        return count.isdigit() and int(count) <= last

    keep = [r for r in rows if kept(r)] if last else []
    if torn or len(keep) != len(rows) or not last or list(header or ()) != list(fields):
        with atomic_writer(path, "w") as out:
            w = csv.DictWriter(out, fieldnames=list(fields), extrasaction="ignore")
            w.writeheader()
            w.writerows(keep)


def append_csv(path: Path, fields: Sequence[str], metrics: Mapping[str, object]) -> None:
    """Append one row of ``metrics`` (the ``fields`` columns, blank where absent; others are
    ignored); the header first when the file is new."""
    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fields))
        if new:
            w.writeheader()
        w.writerow({k: metrics.get(k, "") for k in fields})


def open_tensorboard(out_dir: Path, step: int, enabled: bool = True) -> SummaryWriter | None:
    """A TensorBoard writer in ``out_dir`` that drops events after ``step`` (a resumed run
    redoes them); None when not ``enabled``."""
    if not enabled:
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(out_dir), purge_step=step + 1)


def log_scalars(
    writer: SummaryWriter | None, metrics: Mapping[str, float], groups: Mapping[str, str], step: int
) -> None:
    """``groups[name]/name`` scalars of the ``metrics`` named in ``groups`` (NaN skipped)."""
    if writer is None:
        return
    for k, v in metrics.items():
        if k in groups and not math.isnan(v):
            writer.add_scalar(f"{groups[k]}/{k}", v, step)


# ----------------------------------------------------------------------------- signals
@contextlib.contextmanager
def deferred_interrupt() -> Iterator[list[int]]:
    """While training, the first Ctrl-C (SIGINT) is only noted in the yielded list: the loop
    finishes the step in progress (a half-done update cannot be saved consistently), saves
    a checkpoint and stops. A second Ctrl-C interrupts at once. Signals can only be caught in
    the main thread; elsewhere Ctrl-C behaves as usual."""
    hits: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield hits
        return

    def on_sigint(signum: int, frame: object) -> None:
        hits.append(signum)
        if len(hits) > 1:
            raise KeyboardInterrupt
        os.write(2, b"\ninterrupted: finishing this update, then saving a checkpoint "
                 b"(Ctrl-C again to stop at once, without one)\n")  # fmt: skip

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield hits
    finally:
        signal.signal(signal.SIGINT, previous)


def resume_command(module: str, args: Sequence[str]) -> str:
    """``python -m MODULE ARGS... --resume``, shell-quoted: how to continue a run."""
    return shlex.join(["python", "-m", module, *args, "--resume"])


# ----------------------------------------------------------------------------- checkpoint folders
# (appended for train/rllib_ppo.py: RLlib checkpoints are folders, not files)
def save_rotating_folder(
    write: Callable[[Path], None], newest: Path, previous: Path, newest_unreadable: bool = False
) -> Path | None:
    """The folder form of :func:`save_rotating`: ``write(folder)`` fills a hidden
    ``.NAME.new.PID`` folder beside ``newest``; then ``newest`` becomes ``previous`` (or is
    set aside, :func:`set_aside`, with ``newest_unreadable``) and the new folder ``newest``.
    Every step is a rename, so at each moment one complete checkpoint exists (``newest``,
    else ``previous``: what :func:`newest_readable` loads). Returns where a set-aside folder
    went. Leftovers of an interrupted save: :func:`clean_stale_folders`."""
    new = newest.with_name(f".{newest.name}.new.{os.getpid()}")
    old = newest.with_name(f".{newest.name}.old.{os.getpid()}")
    for stale in (new, old):
        shutil.rmtree(stale, ignore_errors=True)
    write(new)
    kept = None
    if newest.exists() and newest_unreadable:
        kept = set_aside(newest)
    elif newest.exists():
        if previous.exists():
            os.replace(previous, old)
        os.replace(newest, previous)
    os.replace(new, newest)
    shutil.rmtree(old, ignore_errors=True)
    return kept


def clean_stale_folders(newest: Path) -> list[Path]:
    """Remove the hidden folders an interrupted :func:`save_rotating_folder` left beside
    ``newest`` (only at the start of a run, when nothing else writes there)."""
    removed = sorted(p for p in newest.parent.glob(f".{newest.name}.*") if p.is_dir())
    for p in removed:
        shutil.rmtree(p, ignore_errors=True)
    return removed
