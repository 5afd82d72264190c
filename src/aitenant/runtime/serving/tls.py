"""A server-side TLS context that follows its certificate files (``tls.crt`` / ``tls.key``).

Certificates are rotated by rewriting files (a Kubernetes Secret volume swaps a symlink, a
charm writes them one after the other), so the process must pick them up without a restart.
``CertReloader`` owns one ``ssl.SSLContext``, hands it to the server once, and afterwards loads
new pairs *into that same object*: every handshake that starts after a reload presents the new
certificate, while connections already open keep the session they negotiated.

Rotation is detected by polling each file's (device, inode, size, mtime) every ``interval``
seconds; polling works on every filesystem and through symlink swaps, and one ``stat`` per file
is cheap. A pair is first copied to a private directory and loaded into a scratch context; only
a pair that loads there is loaded into the live context. A half-written or mismatched pair is
therefore never half-applied (OpenSSL would otherwise drop the live key when the certificate
changes): the previous certificate stays in service and the failure is logged once per change.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

_Stamp = tuple[tuple[int, int, int, int] | None, tuple[int, int, int, int] | None]


def _file_stamp(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)  # follows symlinks: a swapped ..data link changes the inode
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _new_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class CertReloader:
    """Owns a server ``SSLContext`` loaded from ``<cert_dir>/tls.crt`` and ``tls.key``.

    The first pair is loaded by the constructor, which raises (``OSError`` or
    ``ssl.SSLError``) if it is missing or broken, so a misconfigured process stops at start::

        reloader = CertReloader(Path("/etc/tls"), interval=10.0)
        await reloader.start()  # begins polling
        site = web.TCPSite(runner, host, port, ssl_context=reloader.context)
        ...
        await reloader.stop()
    """

    def __init__(
        self,
        cert_dir: Path,
        *,
        interval: float = 10.0,
        cert_file: str = CERT_FILE,
        key_file: str = KEY_FILE,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self._cert_path = Path(cert_dir) / cert_file
        self._key_path = Path(cert_dir) / key_file
        self._interval = interval
        self._context = _new_context()
        self._task: asyncio.Task[None] | None = None
        self._reloads = 0
        stamp = self._stamp()
        self._context.load_cert_chain(self._cert_path, self._key_path)
        self._loaded: _Stamp = stamp
        self._seen: _Stamp = stamp

    @property
    def context(self) -> ssl.SSLContext:
        """The live context; hand it to the server once, it is updated in place."""
        return self._context

    @property
    def reloads(self) -> int:
        """How many times a new pair has been loaded since construction."""
        return self._reloads

    @property
    def cert_path(self) -> Path:
        return self._cert_path

    @property
    def key_path(self) -> Path:
        return self._key_path

    def _stamp(self) -> _Stamp:
        return (_file_stamp(self._cert_path), _file_stamp(self._key_path))

    def check(self) -> bool:
        """Reload if the files changed since the last attempt; True if a new pair was loaded."""
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        self._seen = stamp
        if stamp == self._loaded:
            return False  # changed and changed back
        try:
            self._load_validated()
        except (OSError, ssl.SSLError) as exc:
            log.warning(
                "TLS certificate in %s not reloaded, still serving the previous one: %s",
                self._cert_path.parent,
                exc,
            )
            return False
        self._loaded = stamp
        self._reloads += 1
        log.info("TLS certificate reloaded from %s", self._cert_path.parent)
        return True

    def _load_validated(self) -> None:
        # Load a private snapshot of the pair twice: into a scratch context to validate it, then
        # into the live one. Files that change meanwhile cannot make the live load fail.
        cert_pem = self._cert_path.read_bytes()
        key_pem = self._key_path.read_bytes()
        with tempfile.TemporaryDirectory(prefix="tls-reload-") as tmp:
            cert_copy, key_copy = Path(tmp, CERT_FILE), Path(tmp, KEY_FILE)
            cert_copy.write_bytes(cert_pem)
            fd = os.open(key_copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(key_pem)
            _new_context().load_cert_chain(cert_copy, key_copy)
            self._context.load_cert_chain(cert_copy, key_copy)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                self.check()
            except Exception:  # keep watching whatever happens to one attempt
                log.exception("TLS certificate check failed")

    async def start(self) -> None:
        """Start polling the files (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll(), name="tls-cert-reloader")

    async def stop(self) -> None:
        """Stop polling and wait for the task to finish (idempotent)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # our caller is being cancelled too: do not swallow that

    async def __aenter__(self) -> CertReloader:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
