"""A real Pebble, started the way Juju starts a workload container's Pebble.

Juju runs ``pebble run --create-dirs --hold --verbose`` in the workload container, whose
``$PEBBLE/layers`` already holds the rock's own layer (rockcraft writes the ``services`` of
``rockcraft.yaml`` there as ``001-<rock>.yaml``); ``--hold`` starts nothing until the charm
asks. Here Pebble runs on this machine as root (it starts the controller as the rock's
``_daemon_`` user, uid 584792, because the charm's layer says so) in a private mount
namespace, so that:

- ``/etc/aitenant`` (where the charm writes the certificate files) is this instance's own
  folder: two units on one machine do not share it;
- the folders the controller needs (this test's virtual environment, the source its
  editable install points at, and its base Python, which may live under folders only root may
  enter) are visible to that user, and nothing else under them is.

The binary comes from ``scripts/build-control-plane.sh`` (``tools/pebble/go.mod`` pins the
version); the test command puts its folder on ``PATH``. A missing binary fails the test.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import ops
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
# The controller's service account user (rockcraft's `_daemon_`); the charm's layer runs it.
WORKLOAD_UID = 584792


def pinned_version() -> str:
    """The Pebble version ``tools/pebble/go.mod`` requires (``v1.26.0``)."""
    text = (ROOT / "tools" / "pebble" / "go.mod").read_text()
    match = re.search(r"github\.com/canonical/pebble (v\S+)", text)
    assert match is not None, "tools/pebble/go.mod requires no github.com/canonical/pebble"
    return match.group(1)


def pebble_binary() -> Path:
    """The ``pebble`` on PATH, checked against the pinned version; fails the test if absent."""
    found = shutil.which("pebble")
    if found is None:
        pytest.fail(
            "pebble is not on PATH: run scripts/build-control-plane.sh (it builds Pebble "
            f"{pinned_version()} into ~/.cache/aitenant-k8s/ and links it next to the "
            "control plane), then put that folder on PATH as the test command does",
            pytrace=False,
        )
    version = subprocess.run(
        [found, "version", "--client"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert version.lstrip("v") == pinned_version().lstrip("v"), (
        f"{found} is Pebble {version}; tools/pebble/go.mod pins {pinned_version()}"
    )
    return Path(found).resolve()


def rock_layer() -> dict[str, object]:
    """The layer rockcraft builds into the image from ``rockcraft.yaml``'s services."""
    rock = yaml.safe_load((ROOT / "rockcraft.yaml").read_text())
    return {"summary": f"{rock['name']} rock", "services": rock["services"]}


def _hidden_by(path: Path) -> Path | None:
    """The outermost folder above ``path`` that other users may not enter, if any."""
    for parent in reversed(path.parents):
        if not parent.stat().st_mode & stat.S_IXOTH:
            return parent
    return None


def _pth_folders(venv: Path) -> list[Path]:
    """Folders the virtual environment's ``.pth`` files add to ``sys.path``: where an editable
    install's source lives (the checkout's ``src``, which may sit under a folder only root may
    enter, such as a ``mktemp -d`` clone)."""
    found: list[Path] = []
    for pth in venv.glob("lib/python*/site-packages/*.pth"):
        for line in pth.read_text().splitlines():
            folder = Path(line.strip())
            if folder.is_absolute() and folder.is_dir():
                found.append(folder)
    return found


def _namespace_script(stashes: Path, expose: list[Path], etc_aitenant: Path) -> str:
    """Shell run under ``unshare --mount`` before Pebble: /etc/aitenant, and the paths the
    workload user needs under root-only folders (each hidden folder becomes an empty
    world-readable tmpfs with only those paths bound back in)."""
    lines = ["set -eu", "mount --make-rprivate /", "mkdir -p /etc/aitenant"]
    hidden: dict[Path, list[Path]] = {}
    for path in expose:
        top = _hidden_by(path)
        if top is not None:
            hidden.setdefault(top, []).append(path)
    for index, (top, paths) in enumerate(sorted(hidden.items())):
        # Mount points for the hidden folders themselves, outside all of them.
        stash = stashes / str(index)
        stash.mkdir(parents=True, exist_ok=True)
        lines += [
            f"mount --bind {shlex.quote(str(top))} {shlex.quote(str(stash))}",
            f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(top))}",
        ]
        for path in paths:
            inside = stash / path.relative_to(top)
            lines += [
                f"mkdir -p {shlex.quote(str(path))}",
                f"mount --bind {shlex.quote(str(inside))} {shlex.quote(str(path))}",
            ]
    lines += [f"mount --bind {shlex.quote(str(etc_aitenant))} /etc/aitenant", 'exec "$@"']
    return "\n".join(lines) + "\n"


class RealPebble:
    """One workload container's Pebble: ``start()``, ``client``, ``controller_pid()``."""

    def __init__(
        self,
        workdir: Path,
        *,
        kubeconfig: Path | None,
        name: str = "unit-0",
        netns: Path | None = None,
    ) -> None:
        """``kubeconfig``: what the controller authenticates with (None: a missing file, so
        every start of the controller fails). ``netns``: the network namespace Pebble and the
        controller run in (a pod's, e.g. ``/run/netns/<name>``); None: this machine's."""
        self.binary = pebble_binary()
        self.netns = netns
        self.workdir = workdir / name
        self.workdir.mkdir(parents=True)
        # The workload user reads its kubeconfig from here.
        self.workdir.chmod(0o755)
        self.kubeconfig = self.workdir / "kubeconfig"
        if kubeconfig is not None:
            shutil.copyfile(kubeconfig, self.kubeconfig)
            self.kubeconfig.chmod(0o644)
        self.state = self.workdir / "pebble"
        self.etc_aitenant = self.workdir / "etc-aitenant"
        self.etc_aitenant.mkdir()
        self.log = self.workdir / "pebble.log"
        self.socket = self.state / ".pebble.socket"
        self._proc: subprocess.Popen[bytes] | None = None
        self._stashes = Path(tempfile.mkdtemp(prefix="aitenant-pebble-ns-"))

    def start(self, timeout: float = 15.0) -> None:
        layers = self.state / "layers"
        layers.mkdir(parents=True)
        (layers / "001-aitenant-controller.yaml").write_text(yaml.safe_dump(rock_layer()))
        venv = Path(sys.prefix)
        base_python = Path(os.path.realpath(sys.executable)).parents[1]
        script = self.workdir / "enter-namespace.sh"
        script.write_text(
            _namespace_script(
                self._stashes,
                [venv, *_pth_folders(venv), base_python, self.binary.parent, self.workdir],
                self.etc_aitenant,
            )
        )
        env = {
            "PEBBLE": str(self.state),
            # The service's command is `aitenant-controller` (the rock's entry point).
            "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "KUBECONFIG": str(self.kubeconfig),
        }
        enter_pod = ["nsenter", f"--net={self.netns}"] if self.netns is not None else []
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                [
                    *enter_pod,
                    "unshare",
                    "--mount",
                    "sh",
                    str(script),
                    str(self.binary),
                    "run",
                    "--create-dirs",
                    "--hold",
                    # As Juju runs it: the services' output goes to Pebble's own (the log).
                    "--verbose",
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"pebble exited with {self._proc.returncode}: {self.tail()}")
            with contextlib.suppress(ops.pebble.ConnectionError, FileNotFoundError):
                self.client.get_system_info()
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"pebble did not answer on {self.socket}: {self.tail()}")
            time.sleep(0.05)

    @property
    def client(self) -> ops.pebble.Client:
        return ops.pebble.Client(socket_path=str(self.socket))

    def stop(self) -> None:
        try:
            self._stop()
        finally:
            shutil.rmtree(self._stashes, ignore_errors=True)

    def _stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def controller_pid(self) -> int | None:
        """The pid of the process Pebble runs for the service (its only child), if any."""
        assert self._proc is not None
        children: list[int] = []
        for task in Path(f"/proc/{self._proc.pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                children += [int(p) for p in (task / "children").read_text().split()]
        return children[0] if children else None

    def service(self, name: str) -> str:
        """The service's current status as Pebble names it (``backoff`` included)."""
        (info,) = self.client.get_services([name])
        current = info.current
        return current.value if isinstance(current, ops.pebble.ServiceStatus) else str(current)


@contextlib.contextmanager
def real_pebble(
    workdir: Path, *, kubeconfig: Path | None, name: str = "unit-0", netns: Path | None = None
) -> Iterator[RealPebble]:
    pebble = RealPebble(workdir, kubeconfig=kubeconfig, name=name, netns=netns)
    pebble.start()
    try:
        yield pebble
    finally:
        pebble.stop()
