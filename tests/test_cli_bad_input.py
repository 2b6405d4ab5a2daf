"""The user-facing programs: every bad input a clear error, nothing a user made is touched.

Hypothesis generates wrong types, out-of-range and malformed values for every argument of
every ``butifarra`` subcommand (``arena``, ``play``, ``demo``), for the lines a person types
at the table, and for the Python entry points behind them (``make_agent``, ``duel``,
``round_robin``). A refused command exits with status 2 and one line on stderr naming the
argument (a refused call: a ValueError naming it), never a traceback, and creates or changes
no file. The commands run in-process (``butifarra.cli.main``) with small deal counts.
"""

from __future__ import annotations

import io
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents import RandomAgent, make_agent
from agents.evaluation.arena import duel, round_robin
from agents.registry import AGENT_FACTORIES
from butifarra.cli import MAX_DEALS, MAX_HANDS, MAX_MATCHES, MAX_SEED, MAX_TARGET, MAX_WORKERS
from butifarra.cli import main as cli_main
from butifarra_env.core.options import Options

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# ----------------------------------------------------------------------------- values
_ASCII_INT = re.compile(r"\s*[+-]?[0-9]+\s*")
NOT_AN_INT_TEXT = st.one_of(
    st.text(max_size=12).filter(lambda t: not _ASCII_INT.fullmatch(t)),
    st.sampled_from(
        [
            "²",
            "٣",
            "１２",
            "𝟗",
            "Ⅻ",
            "½",
            "1.5",
            "1e3",
            "0x10",
            "1_000",
            "",
            " ",
            "\x00",
            "5\x00",
            "\udcff",
            "--",
            "-",
            "NaN",
            "inf",
        ]
    ),  # fmt: skip
    st.integers(31, 5000).map(lambda n: "9" * n),  # a 5,000-digit line
)


def int_text_outside(lo: int, hi: int) -> st.SearchStrategy[str]:
    """Integers just or far outside [lo, hi], as typed."""
    return st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1)).map(str)


def bad_int_text(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.one_of(NOT_AN_INT_TEXT, int_text_outside(lo, hi))


NOT_INTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
    st.lists(st.integers(0, 3), max_size=2),
    st.just(np.float64(2.0)),
    st.just(np.bool_(True)),
    st.binary(max_size=3),
)


def bad_int(lo: int, none_ok: bool = False) -> st.SearchStrategy[object]:
    values = st.one_of(NOT_INTS, st.integers(max_value=lo - 1))
    return values.filter(lambda v: v is not None) if none_ok else values


_NAMES = set(AGENT_FACTORIES)
_ARGUMENT = st.text(min_size=1, max_size=20).filter(lambda a: a.strip())
BAD_SPEC = st.one_of(
    st.text(max_size=20).filter(lambda s: s.strip().partition(":")[0].lower() not in _NAMES),
    st.sampled_from(sorted(_NAMES - {"ppo"})).flatmap(
        lambda name: _ARGUMENT.map(lambda arg: f"{name}:{arg}")  # takes no argument
    ),
    _ARGUMENT.filter(lambda a: not Path(a.strip()).exists()).map(lambda a: f"ppo:{a}"),
    st.sampled_from(["", " ", "\x00", "\udcff", "x" * 5000, "ppo:\x00", "ppo:" + "a" * 300]),
)


# ----------------------------------------------------------------------------- helpers
def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``folder``."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``butifarra ARGS`` in-process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        code = cli_main(args)
    except SystemExit as e:  # argparse refusals
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code: int, err: str, argument: str) -> None:
    """Exit status 2, one line on stderr naming the argument, no traceback."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), err
    assert argument in lines[0], err
    assert lines[0].startswith("butifarra"), err


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current folder of its own: a refused command must leave it exactly as it was."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "keep.txt").write_text("the person's own file\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # a command that gets to play leaves
    return tmp_path


def refused_without_a_trace(
    args: list[str], argument: str, root: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[str, str]:
    """Run a command that must be refused; (stdout, stderr)."""
    before = snapshot(root)
    code, out, err = run(args, capsys)
    assert_refused(code, err, argument)
    assert snapshot(root) == before
    return out, err


# ----------------------------------------------------------------------------- integers
ARENA = ["arena", "rule", "random", "-n", "1", "--no-progress"]
PLAY = ["play", "--seed", "1", "--dealer", "0"]
DEMO = ["demo", "-n", "1", "--workers", "1"]
INT_OPTIONS = [
    (ARENA, "--deals", "-n/--deals", 1, MAX_DEALS),
    (ARENA, "--seed", "--seed", 0, MAX_SEED),
    (ARENA, "--workers", "--workers", 0, MAX_WORKERS),
    (ARENA, "--matches", "--matches", 0, MAX_MATCHES),
    (ARENA, "--target", "--target", 1, MAX_TARGET),
    (PLAY, "--seat", "--seat", 0, 3),
    (PLAY, "--dealer", "--dealer", 0, 3),
    (PLAY, "--seed", "--seed", 0, MAX_SEED),
    (PLAY, "--hands", "--hands", 1, MAX_HANDS),
    (DEMO, "--deals", "-n/--deals", 1, MAX_DEALS),
    (DEMO, "--seed", "--seed", 0, MAX_SEED),
    (DEMO, "--workers", "--workers", 1, MAX_WORKERS),
]


@SETTINGS
@given(case=st.sampled_from(INT_OPTIONS), data=st.data())
def test_every_integer_option_refuses_what_is_not_an_integer_in_range(
    case: tuple[list[str], str, str, int, int],
    data: st.DataObject,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base, flag, named, lo, hi = case
    value = data.draw(bad_int_text(lo, hi), label=flag)
    refused_without_a_trace([*base, f"{flag}={value}"], f"argument {named}: ", workdir, capsys)


def test_the_allowed_range_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run(["arena", "rule", "random", "--seed=-1"], capsys)
    assert f"expected an integer from 0 to {MAX_SEED}, got -1" in err
    _, _, err = run(["play", "--seat", "9" * 5000], capsys)
    assert "a seat is 0, 1, 2 or 3, got '999" in err and len(err) < 200


# ----------------------------------------------------------------------------- agents
@SETTINGS
@given(spec=BAD_SPEC, position=st.integers(0, 1))
def test_arena_agent_specs(
    spec: str, position: int, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = ["random", spec] if position else [spec, "random"]
    args = ["arena", "-n", "1", "--no-progress", "--", *agents]
    refused_without_a_trace(args, "argument AGENT: ", workdir, capsys)


OPPONENTS = st.one_of(
    BAD_SPEC,
    BAD_SPEC.map(lambda s: f"rule,{s}"),
    st.lists(st.sampled_from(["rule", "random"]), min_size=3, max_size=5).map(",".join),
    st.sampled_from([",", "rule,", ",random", " , "]),
)


@SETTINGS
@given(flag=st.sampled_from(["--partner", "--opponents"]), data=st.data())
def test_play_agent_specs(
    flag: str, data: st.DataObject, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = data.draw(BAD_SPEC if flag == "--partner" else OPPONENTS, label=flag)
    refused_without_a_trace([*PLAY, f"{flag}={value}"], f"argument {flag}: ", workdir, capsys)


# ----------------------------------------------------------------------------- files
NOT_RECORDS = st.binary(min_size=1, max_size=40).filter(lambda b: b.strip() != b"")
FILE_KINDS = ["folder", "not records", "under a file", "nul", "too long", "empty"]


def bad_records_target(root: Path, kind: str, content: bytes) -> str:
    """A file name that must be refused for records, made in ``root``."""
    if kind == "folder":
        (root / "games").mkdir()
        return str(root / "games")
    if kind == "not records":
        (root / "notes.jsonl").write_bytes(content)
        return str(root / "notes.jsonl")
    if kind == "under a file":
        (root / "notes.txt").write_bytes(content)
        return str(root / "notes.txt" / "games.jsonl")
    if kind == "nul":
        return str(root / "ga\x00mes.jsonl")
    if kind == "too long":
        return str(root / ("g" * 300 + ".jsonl"))
    return ""


@SETTINGS
@given(
    kind=st.sampled_from(FILE_KINDS),
    content=NOT_RECORDS,
    flag=st.sampled_from(["--save", "--records"]),
)
def test_a_records_file_that_cannot_take_records_is_refused_before_playing(
    kind: str,
    content: bytes,
    flag: str,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = Path(tempfile.mkdtemp(dir=workdir))
    target = bad_records_target(root, kind, content)
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n" * 100))  # would play, if it started
    base = PLAY if flag == "--save" else ARENA
    args = [*base, f"{flag}={target}"]
    out, _ = refused_without_a_trace(args, f"argument {flag}: ", workdir, capsys)
    assert out == ""  # refused before the first hand


@SETTINGS
@given(kind=st.sampled_from(["exists", "folder", "under a file", "too long", "slash", "empty"]),
       ending=st.sampled_from([".json", ".csv"]), agents=st.integers(2, 3))  # fmt: skip
def test_arena_out_is_checked_before_playing_and_never_overwrites(
    kind: str, ending: str, agents: int, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(tempfile.mkdtemp(dir=workdir))
    prefix = str(root / "results")
    if kind == "exists":
        (root / f"results{ending}").write_text("results of an earlier run\n")
    elif kind == "folder":
        (root / f"results{ending}").mkdir()
    elif kind == "under a file":
        (root / "notes.txt").write_text("notes\n")
        prefix = str(root / "notes.txt" / "results")
    elif kind == "too long":
        prefix = str(root / ("r" * 300))
    elif kind == "slash":
        prefix = str(root) + "/"
    else:
        prefix = ""
    args = ["arena", *["rule", "random", "random"][:agents], "-n", "1", "--no-progress"]
    args.append(f"--out={prefix}")
    out, err = refused_without_a_trace(args, "argument --out: ", workdir, capsys)
    assert out == ""  # refused before any hand
    if kind == "exists":
        assert f"results{ending}' exists (a file); not overwriting it: choose another --out" in err


# ----------------------------------------------------------------------------- the table
def _no_newline(text: str) -> bool:
    return "\n" not in text


TYPED_LINE = st.one_of(
    st.text(max_size=30).filter(_no_newline),
    st.sampled_from(
        [
            "²",
            "³",
            "٣",
            "１",
            "𝟗",
            "Ⅻ",
            "½",
            "",
            " ",
            "\t",
            "\x00",
            "\x07",
            "\x1b[2J",
            "\x7f",
            "\r",
            "\u202e",
            "-1",
            "0",
            "+3",
            "1e9",
            "3.0",
            "٣o",
            "12 de nada",
            "rey de",
            "¿?",
        ]
    ),  # fmt: skip
    st.integers(5, 5000).map(lambda n: "9" * n),
    st.integers().map(str),
)
CYCLE = "".join(f"{k}\n" for k in range(1, 13)) * 45  # ends any hand: each card index in turn


@settings(SETTINGS, max_examples=30)
@given(
    lines=st.lists(TYPED_LINE, max_size=8),
    then=st.sampled_from(["end of input", "a good player"]),
    seat=st.integers(0, 3),
)
def test_any_line_typed_at_the_table_is_answered_and_the_game_goes_on(
    lines: list[str],
    then: str,
    seat: int,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "".join(line + "\n" for line in lines)
    text += "oros\npass\n" + CYCLE if then == "a good player" else ""
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code, out, err = run(["play", "--seed", "3", f"--seat={seat}", "--opponents=random"], capsys)
    assert code == 0 and err == "", err
    assert "Traceback" not in out
    finished, left = "Hand over:" in out, "Leaving the table. Bye!" in out
    assert finished or left
    if then == "a good player" and not any(_normal(x) in QUIT for x in lines):
        assert finished  # nothing typed loses the hand
    for message in re.findall(r"^ {2}! (.*)$", out, flags=re.M):  # every refusal is short
        assert len(message) < 400


QUIT = {"quit", "exit", "q", "salir", "sortir"}


def _normal(line: str) -> str:
    return " ".join(line.strip().lower().split())


# ----------------------------------------------------------------------------- Python API
@SETTINGS
@given(spec=st.one_of(BAD_SPEC, NOT_INTS.filter(lambda v: not isinstance(v, str))))
def test_make_agent_refuses_bad_specs(spec: object) -> None:
    with pytest.raises(
        ValueError, match=r"agent spec|unknown agent|takes no argument|PPO|search agent"
    ):
        make_agent(spec)  # type: ignore[arg-type]


@SETTINGS
@given(spec=st.sampled_from(sorted(_NAMES)), seed=bad_int(0, none_ok=True))
def test_make_agent_refuses_bad_seeds(spec: str, seed: object) -> None:
    with pytest.raises(ValueError, match="seed"):
        make_agent(spec, seed)  # type: ignore[arg-type]


def _not_records(root: Path) -> Path:
    path = root / "notes.jsonl"
    path.write_text("not a record\n")
    return path


DUEL_BAD: dict[str, st.SearchStrategy[Any]] = {
    "agent_a": st.one_of(BAD_SPEC, NOT_INTS.filter(lambda v: not isinstance(v, str))),
    "agent_b": st.one_of(BAD_SPEC, st.just(RandomAgent)),  # the class, not an agent
    "n_deals": bad_int(1),
    "seed": bad_int(0),
    "workers": bad_int(1),
    "n_matches": bad_int(0),
    "target_score": bad_int(1),
    "progress": st.one_of(st.integers(), st.text(max_size=3), st.none()),
    "names": st.one_of(
        st.text(max_size=4),
        st.tuples(st.text(max_size=3)),
        st.tuples(st.just(""), st.just("b")),
        st.tuples(st.integers(), st.just("b")),
        st.lists(st.just("a"), min_size=3, max_size=3),
    ),
    "options": st.one_of(st.dictionaries(st.text(max_size=3), st.integers()), st.integers()),
    "deal_fn": st.one_of(st.integers(), st.text(max_size=3), st.none()),
    "records_path": st.one_of(
        st.sampled_from(["", "folder", "not records", "under a file"]), st.integers()
    ),
}


def _records_value(value: object, root: Path) -> object:
    if value == "folder":
        return root
    if value == "not records":
        return _not_records(root)
    if value == "under a file":
        return _not_records(root) / "games.jsonl"
    return value


@SETTINGS
@given(name=st.sampled_from(sorted(DUEL_BAD)), data=st.data())
def test_duel_refuses_each_bad_argument_by_name_and_plays_nothing(
    name: str, data: st.DataObject, tmp_path: Path
) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    value = data.draw(DUEL_BAD[name], label=name)
    if name == "records_path":
        value = _records_value(value, root)
    kwargs: dict[str, Any] = {"agent_a": "rule", "agent_b": "random", "n_deals": 1}
    kwargs["records_path"] = root / "games.jsonl"  # a good one: it must not be begun
    kwargs[name] = value
    before = snapshot(root)
    with pytest.raises(ValueError, match=name):
        duel(**kwargs)
    assert snapshot(root) == before  # no records file begun, nothing changed


ROUND_ROBIN_AGENTS = st.one_of(
    st.lists(st.sampled_from(["rule", "random"]), max_size=3),  # a list, not a dict
    st.dictionaries(st.sampled_from(["a"]), st.just("rule"), max_size=1),  # fewer than two
    st.just({"a": "rule", 3: "random"}),
    st.just({"a": "rule", "": "random"}),
    BAD_SPEC.map(lambda s: {"a": "rule", "b": s}),
)


@SETTINGS
@given(
    name=st.sampled_from(["agents", "n_deals", "seed", "workers", "records_path"]),
    data=st.data(),
)
def test_round_robin_refuses_each_bad_argument_by_name(
    name: str, data: st.DataObject, tmp_path: Path
) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    strategy = ROUND_ROBIN_AGENTS if name == "agents" else DUEL_BAD[name]
    value = data.draw(strategy, label=name)
    if name == "records_path":
        value = _records_value(value, root)
    kwargs: dict[str, Any] = {"agents": {"a": "rule", "b": "random"}, "n_deals": 1}
    kwargs[name] = value
    before = snapshot(root)
    pattern = r"agents|round robin" if name == "agents" else name
    with pytest.raises(ValueError, match=pattern):
        round_robin(**kwargs)
    assert snapshot(root) == before


def test_a_lambda_deal_fn_is_refused_up_front_when_workers_would_need_it() -> None:
    calls: list[int] = []
    deal: Callable[[np.random.Generator], Any] = lambda rng: calls.append(1)  # noqa: E731
    with pytest.raises(ValueError, match="deal_fn must be a module-level function"):
        duel("rule", "random", 100, workers=2, deal_fn=deal)
    assert calls == []


def test_options_of_the_wrong_type_are_named() -> None:
    with pytest.raises(ValueError, match="options must be an Options"):
        duel("rule", "random", 1, options={"target_score": 5})  # type: ignore[arg-type]
    assert duel("rule", "random", 1, options=Options()).n_deals == 1
