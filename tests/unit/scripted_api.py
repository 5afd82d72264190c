"""A scripted Kubernetes API at the transport: fixed answers per request, every request kept.

Not an emulator: nothing is stored or computed. A test lists, per (verb, path), the answers
the API server gives in turn (the last one repeats); anything unscripted is answered 404
NotFound. ``WATCH`` is the verb of a GET with ``watch=true``. Tests then assert what went on
the wire (``api.sent``, ``api.writes``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
from lightkube import AsyncClient, Client, KubeConfig

SERVER = "https://api.test"
CONFIG = KubeConfig.from_dict(
    {
        "clusters": [{"name": "c", "cluster": {"server": SERVER}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
)

Answer = httpx2.Response | Callable[[httpx2.Request], httpx2.Response]
VERBS = {"POST": "CREATE", "PUT": "UPDATE", "PATCH": "PATCH", "DELETE": "DELETE"}


@dataclass(frozen=True)
class Sent:
    verb: str  # GET, WATCH, CREATE, UPDATE, PATCH, DELETE
    path: str
    params: dict[str, str]
    body: Any


def verb_of(request: httpx2.Request) -> str:
    if request.method == "GET":
        return "WATCH" if request.url.params.get("watch") else "GET"
    return VERBS.get(request.method, request.method)


def status(code: int, reason: str = "", message: str = "", **extra: Any) -> httpx2.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    body.update(reason=reason or str(code), message=message or f"answer {code}", **extra)
    return httpx2.Response(code, json=body)


def ok(obj: Any, code: int = 200) -> httpx2.Response:
    return httpx2.Response(code, json=obj)


def listing(items: list[dict[str, Any]], rv: str, kind: str = "List") -> httpx2.Response:
    return ok({"kind": kind, "metadata": {"resourceVersion": rv}, "items": items})


def stream(*events: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, content="".join(json.dumps(e) + "\n" for e in events).encode())


def echo(code: int = 201, rv: str = "100") -> Answer:
    """Answer a create or replace with the body it sent, as stored at resourceVersion ``rv``."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        body.setdefault("metadata", {})["resourceVersion"] = rv
        return httpx2.Response(code, json=body)

    return answer


class ScriptedApi:
    def __init__(self) -> None:
        self._script: dict[tuple[str, str], list[Answer]] = {}
        self.sent: list[Sent] = []

    def on(self, verb: str, path: str, *answers: Answer) -> ScriptedApi:
        """Answer ``verb`` on ``path`` with ``answers`` in turn; the last one repeats."""
        self._script[(verb, path)] = list(answers)
        return self

    def scripted(self, verb: str, path: str) -> bool:
        """Whether ``verb`` on ``path`` has answers."""
        return (verb, path) in self._script

    def client(self) -> AsyncClient:
        return AsyncClient(CONFIG, transport=httpx2.MockTransport(self), field_manager="unit-tests")

    def sync_client(self) -> Client:
        """lightkube's synchronous client (the charm's) on this script."""
        return Client(CONFIG, transport=httpx2.MockTransport(self), field_manager="unit-tests")

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        verb = verb_of(request)
        body = json.loads(request.content) if request.content else None
        self.sent.append(Sent(verb, request.url.path, dict(request.url.params), body))
        answers = self._script.get((verb, request.url.path))
        if not answers:
            return status(404, "NotFound", f"{request.url.path} not found")
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if callable(answer):
            return answer(request)
        # A fresh copy each time: a response object belongs to one request.
        return httpx2.Response(answer.status_code, headers=answer.headers, content=answer.content)

    def requests(self, *verbs: str) -> list[tuple[str, str]]:
        """(verb, path) of what was sent, only ``verbs`` when given."""
        return [(s.verb, s.path) for s in self.sent if not verbs or s.verb in verbs]

    @property
    def writes(self) -> list[tuple[str, str]]:
        return self.requests("CREATE", "UPDATE", "PATCH", "DELETE")

    def bodies(self, verb: str, path: str) -> list[Any]:
        return [s.body for s in self.sent if (s.verb, s.path) == (verb, path)]
