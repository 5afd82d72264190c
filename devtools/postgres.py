"""The database the real maas-api needs (docs/maas-api.md): Debian's PostgreSQL, started by the
node when ``AITENANT_MAAS_API_IMAGE`` is given, listening only on the node's bridge address.

PostgreSQL refuses to run as root: it runs as Debian's ``postgres`` user from a data folder of
its own (made here, removed at stop), and trusts the pod range without a password (nothing
else can reach that address).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PORT = 5432
# Debian's server user; the processes are started as it, without a shell in between.
SERVER_USER = "postgres"
USER = "maas"
DATABASE = "maas"


def server_binaries() -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` (``apt-get install postgresql``)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3])
    )
    if not found:
        raise RuntimeError("the real maas-api needs PostgreSQL: apt-get install postgresql")
    return found[-1].parent


def database_url(address: str) -> str:
    """What ``maas-db-config`` holds for maas-api (key ``DB_CONNECTION_URL``)."""
    return f"postgresql://{USER}@{address}:{PORT}/{DATABASE}?sslmode=disable"


@dataclass
class Postgres:
    """One server on ``address`` for clients of ``clients`` (a CIDR)."""

    address: str
    clients: str
    log: Path
    _data: Path | None = None
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, timeout: float = 60.0) -> None:
        bins = server_binaries()
        self._data = Path(tempfile.mkdtemp(prefix="aitenant-postgres-"))
        shutil.chown(self._data, SERVER_USER, SERVER_USER)
        self._run([str(bins / "initdb"), "-D", str(self._data / "db"), "-U", USER, "-A", "trust",
                   "--no-sync"])  # fmt: skip
        with (self._data / "db" / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {self.clients} trust\n")
        with self.log.open("ab") as out:
            self._proc = subprocess.Popen(
                [str(bins / "postgres"), "-D", str(self._data / "db"), "-h", self.address,
                 "-p", str(PORT), "-k", str(self._data)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=self._data,
                user=SERVER_USER, group=SERVER_USER, extra_groups=[],
            )  # fmt: skip
        self._wait_listening(time.monotonic() + timeout)
        self._run([str(bins / "createdb"), "-h", self.address, "-p", str(PORT), "-U", USER,
                   DATABASE])  # fmt: skip

    def _run(self, args: list[str]) -> None:
        subprocess.run(
            args, check=True, capture_output=True, cwd=self._data,
            user=SERVER_USER, group=SERVER_USER, extra_groups=[],
        )  # fmt: skip

    def _wait_listening(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self._proc.returncode}; see {self.log}")
            with contextlib.suppress(OSError), socket.create_connection((self.address, PORT), 1):
                return
            time.sleep(0.2)
        raise TimeoutError(f"postgres did not listen on {self.address}:{PORT}; see {self.log}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        self._proc = None
        if self._data is not None:
            shutil.rmtree(self._data, ignore_errors=True)
            self._data = None
