"""A Ray that stays on this machine: loopback-only nodes, token auth, and no leftovers.

Why this module exists (Ray 2.60, Linux, a machine with a network interface):

- ``ray.init(_node_ip_address="127.0.0.1")`` and ``ray start --node-ip-address 127.0.0.1``
  rewrite 127.0.0.1 to the machine's outward address (``resolve_ip_for_localhost``), and a
  node whose address is not 127.0.0.1 binds its gRPC servers (GCS, raylet, workers, agents)
  on every interface. ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` stops the rewrite but makes
  ``ray start --address`` refuse to start a second node. :func:`keep_loopback` stops only
  the rewrite: a node on 127.0.0.1 then binds 127.0.0.1 alone, and more nodes can join it.
- Token auth depends on a file: with ``~/.ray/auth_token`` present, a head (and a driver)
  turn token auth on while ``ray start --address`` nodes stay off and are refused
  (``InvalidAuthToken``). Every process started here sets ``RAY_AUTH_MODE=token``.
- ``ray.init()``'s own local cluster outlives a ``kill -9`` of the driver. Here the local
  head runs under a *supervisor* process in its own session (process group): it polls the
  driver's pid and, once the driver is gone (any exit, also ``kill -9``), stops the head
  (SIGTERM to ``ray start --block``, which stops its children) and then SIGKILLs whatever
  is left in the group. The head also has ``PR_SET_PDEATHSIG`` on the supervisor, so a
  killed supervisor still takes the head down.

Commands (this file runs with the standard library alone until it calls Ray's CLI)::

    python -m train.local_ray start --head --node-ip-address 127.0.0.1 --port 6379 ...
    python -m train.local_ray start --address 127.0.0.1:6379 --node-ip-address 127.0.0.1 ...

``start`` is Ray's ``ray start`` (same flags) with the loopback fix and
``RAY_AUTH_MODE=token`` (a token is generated in ``~/.ray/auth_token`` if there is none).
The trainer (``train/rllib_ppo.py``) uses :func:`local_cluster`; ``docs/distributed.md``
says what each setup exposes.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"
AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""Ray's auth variables (a local cluster sets them for its head and its driver)."""
READY_TIMEOUT_S = 120.0
"""How long a local head may take to start (a loaded 2-core machine needs ~10-30 s)."""
POLL_S = 0.2
"""How often the supervisor checks that the driver is alive."""
GRACE_S = 10.0
"""How long the supervisor lets ``ray start --block`` stop its processes before SIGKILL."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP or ``localhost``, ``[...]`` allowed) is a loopback address;
    IPv4-mapped IPv6 (``::ffff:127.0.0.1``) counts as its IPv4 address."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


def address_host(address: str) -> str:
    """The host of ``HOST:PORT`` (``[V6]:PORT`` too)."""
    return address.rsplit(":", 1)[0].strip("[]") if ":" in address else address


# ----------------------------------------------------------------------------- in Ray
def keep_loopback() -> None:
    """Make this process's Ray leave loopback addresses as they are (instead of replacing
    them by the outward address): a node on 127.0.0.1 then listens on 127.0.0.1 only and a
    driver connects to it there. A no-op for any other address; patches
    ``ray._private.services.resolve_ip_for_localhost`` (Ray 2.60; checked at call)."""
    from ray._private import services

    original = services.resolve_ip_for_localhost
    if getattr(original, "_butifarra_keeps_loopback", False):
        return

    def resolve(host: str) -> str:
        return host if host and is_loopback(host) else original(host)

    resolve._butifarra_keeps_loopback = True  # type: ignore[attr-defined]
    services.resolve_ip_for_localhost = resolve


def use_token_auth(env: dict[str, str] | os._Environ[str]) -> None:
    """Token auth in ``env`` unless it says otherwise: ``RAY_AUTH_MODE=token``, and a token
    in ``~/.ray/auth_token`` when no token is given (Ray's own default place)."""
    env.setdefault("RAY_AUTH_MODE", "token")
    if env["RAY_AUTH_MODE"].lower() != "token" or "RAY_AUTH_TOKEN" in env:
        return
    path = Path(env.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))


def ray_start(argv: Sequence[str]) -> None:
    """Ray's ``ray start`` with :func:`keep_loopback` and :func:`use_token_auth` (this
    process must not have imported Ray yet: its config reads the environment once)."""
    use_token_auth(os.environ)
    keep_loopback()
    from ray.scripts.scripts import main as ray_cli

    sys.argv = ["ray", "start", *argv]
    ray_cli()


# ----------------------------------------------------------------------------- local cluster
@dataclass
class LocalCluster:
    """A running local head: its GCS address, temp dir and supervisor process."""

    address: str
    temp_dir: Path
    supervisor: subprocess.Popen[bytes]
    env: dict[str, str]

    def pids(self) -> list[int]:
        """The pids of the cluster's processes (supervisor, head, and all their children)."""
        import psutil

        try:
            root = psutil.Process(self.supervisor.pid)
            return [root.pid, *(p.pid for p in root.children(recursive=True))]
        except psutil.Error:
            return []

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the head and everything it started (SIGTERM to the supervisor, which stops
        the head; SIGKILL to the process group if it is still there after ``timeout``)."""
        if self.supervisor.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.supervisor.send_signal(signal.SIGTERM)
            try:
                self.supervisor.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.supervisor.pid, signal.SIGKILL)
                self.supervisor.wait(5)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the head's GCS takes it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def start_local_cluster(num_cpus: int, object_store_bytes: int) -> LocalCluster:
    """Start a one-node Ray on 127.0.0.1 for this process (the driver) and wait until it
    takes connections. Its own temp dir and auth token; no dashboard; it stops when this
    process ends, however it ends. RuntimeError with the head's log if it does not start."""
    temp_dir = Path(tempfile.mkdtemp(prefix="butifarra-ray-"))  # short: socket paths
    token_path = temp_dir / "auth_token"
    fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if k not in AUTH_ENV}
    env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path)}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    port = free_port()
    head = [
        "--head", "--block", "--node-ip-address", LOOPBACK, "--port", str(port),
        "--num-cpus", str(num_cpus), "--object-store-memory", str(object_store_bytes),
        "--include-dashboard", "false", "--dashboard-host", LOOPBACK,
        "--ray-client-server-port", str(free_port()), "--temp-dir", str(temp_dir),
        "--disable-usage-stats",
    ]  # fmt: skip
    log = open(temp_dir / "head.log", "wb")  # noqa: SIM115 - the supervisor's, kept open
    cmd = [sys.executable, str(Path(__file__).resolve()), "supervise", str(os.getpid()), *head]
    supervisor = subprocess.Popen(
        cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    log.close()
    cluster = LocalCluster(f"{LOOPBACK}:{port}", temp_dir, supervisor, env)
    try:
        _wait_until_ready(cluster, temp_dir / "head.log")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait_until_ready(cluster: LocalCluster, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "Ray runtime started" in text:
            return
        if cluster.supervisor.poll() is not None:
            break
        time.sleep(0.5)
    text = log.read_text(errors="replace") if log.exists() else ""
    tail = "\n".join(text.splitlines()[-30:])
    raise RuntimeError(f"the local Ray head did not start within {READY_TIMEOUT_S:g} s:\n{tail}")


@contextlib.contextmanager
def local_cluster(num_cpus: int, object_store_bytes: int) -> Iterator[LocalCluster]:
    """A local head (:func:`start_local_cluster`) with this process connected to it as the
    driver (loopback kept, the head's token); disconnected and stopped at the end."""
    import ray

    cluster = start_local_cluster(num_cpus, object_store_bytes)
    saved = {k: os.environ.get(k) for k in AUTH_ENV}
    try:
        with driver_environment({k: cluster.env[k] for k in AUTH_ENV if k in cluster.env}):
            ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
            try:
                yield cluster
            finally:
                ray.shutdown()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        cluster.stop()


@contextlib.contextmanager
def driver_environment(auth: dict[str, str]) -> Iterator[None]:
    """Ray's auth variables ``auth`` (the others unset) for a ``ray.init`` in this process:
    Ray's config and token cache read them again; restored afterwards."""
    from ray._raylet import AuthenticationTokenLoader, Config

    saved = {k: os.environ.get(k) for k in AUTH_ENV}

    def apply(values: dict[str, str | None]) -> None:
        for k in AUTH_ENV:
            v = values.get(k)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()

    keep_loopback()
    apply(dict(auth))
    try:
        yield
    finally:
        apply(saved)


# ----------------------------------------------------------------------------- supervisor
def supervise(driver_pid: int, head_args: Sequence[str]) -> int:
    """Run ``ray start`` (``head_args``) as a child while ``driver_pid`` lives; then stop
    it and kill the rest of this process group. Runs in its own session (the group)."""
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    me = os.getpid()
    head = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "head", str(me), *head_args]
    )
    while not stopping and os.getppid() == driver_pid and head.poll() is None:
        time.sleep(POLL_S)
    if head.poll() is None:
        head.send_signal(signal.SIGTERM)  # ray start --block stops its processes
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(GRACE_S)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--temp-dir" in head_args:  # the cluster's own dir (a killed driver cannot remove it)
        _kill_group_but_me()
        shutil.rmtree(head_args[list(head_args).index("--temp-dir") + 1], ignore_errors=True)
    os.killpg(os.getpgid(0), signal.SIGKILL)  # whatever is left, this process last
    return 0


def _kill_group_but_me() -> None:
    """SIGKILL every other process of this process group (Linux ``/proc``), bounded wait."""
    me, group = os.getpid(), os.getpgid(0)
    for _ in range(20):
        others = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != me:
                with contextlib.suppress(OSError):
                    if os.getpgid(int(entry.name)) == group:
                        others.append(int(entry.name))
        if not others:
            return
        for pid in others:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.1)


def _die_with_parent(parent: int) -> None:
    """PR_SET_PDEATHSIG: SIGTERM this process when ``parent`` (its parent) ends (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent was gone before prctl
        raise SystemExit(1)


def main(argv: Sequence[str] | None = None) -> None:
    """``start ARGS`` (Ray's ``ray start`` with the fixes), or the internal ``supervise`` /
    ``head`` commands of :func:`start_local_cluster`."""
    args = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m train.local_ray start RAY_START_ARGS..."
    if not args:
        raise SystemExit(usage)
    command, rest = args[0], args[1:]
    if command == "start":
        ray_start(rest)
    elif command == "supervise":
        raise SystemExit(supervise(int(rest[0]), rest[1:]))
    elif command == "head":
        _die_with_parent(int(rest[0]))
        ray_start(rest[1:])
    else:
        raise SystemExit(f"unknown command {command!r}; {usage}")


if __name__ == "__main__":
    main()
