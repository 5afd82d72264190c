"""A TCP forwarder: every connection to one address piped, both ways, to another. Pods (the
node's, or a charm unit's network namespace) reach the API server, which listens on this
machine's loopback only, through one."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Iterator


class Forwarder(socketserver.ThreadingTCPServer):
    """Accepts on ``listen`` and relays each connection to ``target``; nothing else."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        super().__init__(listen, _Forward)

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    @contextlib.contextmanager
    def serving(self) -> Iterator[Forwarder]:
        self.start()
        try:
            yield self
        finally:
            self.stop()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class _Forward(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server = self.server
        assert isinstance(server, Forwarder)
        with contextlib.suppress(OSError), socket.create_connection(server.target) as upstream:
            back = threading.Thread(target=_pump, args=(upstream, self.request), daemon=True)
            back.start()
            _pump(self.request, upstream)
            back.join()
