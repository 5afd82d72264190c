"""Whether a tenant's maas-api is rolled out, and why not in the kubelet's words
(docs/differences.md D15): the Deployment's availability, a crashed pod's last words, the
serving certificate's rollout, and a new tenant's first-rollout window. Pure decisions over live
copies, used by the reconcile steps in ``reconciler.py``."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable

from lightkube.resources.core_v1 import Pod

from aitenant import contract
from aitenant.platform.apply import is_unmanaged
from aitenant.resources import Obj
from aitenant.runtime.control.controller import Key


class FirstRollout(Exception):
    """The platform was just written for the first time; no status until it had a moment."""

    def __init__(self, seconds_left: float) -> None:
        super().__init__(seconds_left)
        self.seconds_left = seconds_left


class FirstRollouts:
    """A new tenant's first rollout gets ``window`` seconds before its config says it waits.

    The pass that writes a platform whose config has no Ready condition yet opens the window;
    passes within it that find the Deployment not Available write no status. Without the window,
    a pass woken by one of the platform's own watch events (which arrive while the Deployment is
    still rolling out) wrote a "waiting for Deployment" status only for the next pass to replace
    it with Ready: one status write in two new tenants, on the way to Ready.
    """

    def __init__(self, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self._deadlines: dict[Key, float] = {}

    def seconds_left(self, key: Key, *, wrote_platform: bool) -> float | None:
        """What is left of ``key``'s window (opening one when ``wrote_platform``); None: no
        window is open, so the pass reports what it found."""
        now = self.clock()
        deadline = self._deadlines.get(key)
        if deadline is None and wrote_platform:
            deadline = self._deadlines[key] = now + self.window
        if deadline is None:
            return None
        if now >= deadline:
            del self._deadlines[key]
            return None
        return deadline - now

    def end(self, key: Key) -> None:
        self._deadlines.pop(key, None)


def observed(deployment: Obj) -> bool:
    """The deployment controller has seen the Deployment's current generation."""
    generation = int(deployment.get("metadata", {}).get("generation") or 0)
    return int((deployment.get("status") or {}).get("observedGeneration") or 0) >= generation


def deployment_available(obj: Obj | None) -> bool:
    """Available=True, observed at the Deployment's current generation."""
    if obj is None or not observed(obj):
        return False
    return any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


# What a crashed container said last is cut to this many characters in a condition.
LAST_WORDS_MAX = 200
# A word of a timestamp a log line starts with: 2026/12/04, 17:40:00, 2026-12-04T17:40:01.1Z.
TIMESTAMP_WORD = re.compile(r"\d[\d/:.,TZ+-]*")


def last_words(message: str | None) -> str:
    """The last line a crashed container logged (the kubelet keeps its log's tail as the
    termination message: ``FallbackToLogsOnError``, docs/platform.md §1), without a leading
    timestamp, so the same failure reads the same at every restart. A JSON log line gives
    its ``error`` or ``msg``."""
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    if line.startswith("{"):
        with contextlib.suppress(ValueError, AttributeError):
            entry = json.loads(line)
            line = " ".join(str(entry[k]) for k in ("msg", "error") if entry.get(k)) or line
    words = line.split()
    while words and TIMESTAMP_WORD.fullmatch(words[0]):
        words.pop(0)
    said = " ".join(words)
    return said if len(said) <= LAST_WORDS_MAX else said[: LAST_WORDS_MAX - 1] + "…"


def pod_problem(pod: Pod) -> str | None:
    """Why a pod is not ready, without what changes at every restart (counts, back-off
    times), so a crash loop does not rewrite the status at every pass."""
    status = pod.status
    if status is None:
        return None
    for cond in status.conditions or []:
        if cond.type == "PodScheduled" and cond.status == "False":
            return f"not scheduled ({cond.reason}: {cond.message})"
    for container in status.containerStatuses or []:
        if container.ready:
            continue
        state, last = container.state, container.lastState
        ended = last.terminated if last is not None else None
        exited = ""
        if ended is not None:
            said = last_words(ended.message)
            exited = f", last exited with code {ended.exitCode}" + (f": {said}" if said else "")
        if state is not None and state.waiting is not None:
            waiting = state.waiting
            detail = (
                f" ({waiting.message})"
                if waiting.message and waiting.reason != "CrashLoopBackOff"
                else ""
            )
            return f"container {container.name} {waiting.reason}{detail}{exited}"
        if state is not None and state.terminated is not None:
            said = last_words(state.terminated.message)
            return f"container {container.name} exited with code {state.terminated.exitCode}" + (
                f": {said}" if said else ""
            )
        if state is not None and state.running is not None:
            return f"container {container.name} running, not ready (readiness probe)"
    return None


def rolled_out_with(deployment: Obj | None, pem_sha256: str) -> bool:
    """No maas-api pod can still serve a certificate but the one ``pem_sha256`` names: the
    Deployment's template names it and is rolled out (observed, no pod of an older template
    left), or there is no Deployment, or it is opted out (we roll nothing of it)."""
    if deployment is None or is_unmanaged(deployment):
        return True
    template = (deployment.get("spec") or {}).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    if annotations.get(contract.ANNOTATION_SERVING_CERT_SHA256) != pem_sha256:
        return False
    if not observed(deployment):
        return False
    status = deployment.get("status") or {}
    return int(status.get("updatedReplicas") or 0) >= int(status.get("replicas") or 0)
