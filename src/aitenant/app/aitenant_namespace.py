"""The AITenant namespace (``--aitenant-namespace``, docs/glossary.md): ensured at start, then
kept by a leader-only monitor (docs/contract.md §1.3).
"""

from __future__ import annotations

import asyncio
import logging

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from aitenant import contract
from aitenant.runtime.client.api_errors import already_exists, is_not_found, status_code

log = logging.getLogger(__name__)


class NamespaceSetupError(RuntimeError):
    """The namespace cannot be ensured; the process must not start."""


async def ensure_managed_namespace(
    client: AsyncClient,
    name: str,
    *,
    poll: float = 2.0,
    terminating_timeout: float = 90.0,
    create_steps: int = 5,
    create_backoff: float = 1.0,
) -> None:
    ns: Namespace | None = None
    delay = create_backoff
    for attempt in range(create_steps):
        try:
            ns = await client.get(Namespace, name)
            break
        except ApiError as exc:
            if status_code(exc) == 403:
                log.info("namespace %s: get forbidden; assuming it is managed externally", name)
                return
            if is_not_found(exc):
                break
            # A transient answer (429, 5xx) must not stop the process: retry with backoff.
            if attempt == create_steps - 1:
                raise NamespaceSetupError(f"get namespace {name}: {exc}") from exc
        except OSError as exc:
            if attempt == create_steps - 1:
                raise NamespaceSetupError(f"get namespace {name}: {exc}") from exc
        await asyncio.sleep(delay)
        delay *= 2
    if ns is not None and ns.status is not None and ns.status.phase == "Terminating":
        try:
            ns = await _wait_terminated(client, name, poll, terminating_timeout)
        except _ManagedExternally:
            return
    if ns is None:
        await _create(client, name, create_steps, create_backoff)
        return
    await _ensure_label(client, name, ns)


class _ManagedExternally(Exception):
    """Forbidden while polling: someone else manages this namespace."""


async def _wait_terminated(
    client: AsyncClient, name: str, poll: float, limit: float
) -> Namespace | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while loop.time() < deadline:
        await asyncio.sleep(poll)
        try:
            ns = await client.get(Namespace, name)
        except ApiError as exc:
            if is_not_found(exc):
                return None
            if status_code(exc) == 403:
                raise _ManagedExternally from None
            continue
        if ns.status is None or ns.status.phase != "Terminating":
            return ns
    raise NamespaceSetupError(f"namespace {name} still terminating after {limit:.0f}s")


async def _create(client: AsyncClient, name: str, steps: int, backoff: float) -> None:
    body = Namespace(metadata=ObjectMeta(name=name, labels=dict(contract.MANAGED_NAMESPACE_LABELS)))
    delay = backoff
    for attempt in range(steps):
        try:
            await client.create(body)
            log.info("created namespace %s", name)
            return
        except ApiError as exc:
            if status_code(exc) == 403:
                raise NamespaceSetupError(f"create namespace {name}: forbidden: {exc}") from exc
            if already_exists(exc):
                ns = await client.get(Namespace, name)
                if ns.status is None or ns.status.phase != "Terminating":
                    await _ensure_label(client, name, ns)
                    return
            elif attempt == steps - 1:
                raise NamespaceSetupError(f"create namespace {name}: {exc}") from exc
        await asyncio.sleep(delay)
        delay *= 2
    raise NamespaceSetupError(f"create namespace {name}: gave up after {steps} attempts")


async def _ensure_label(client: AsyncClient, name: str, ns: Namespace) -> None:
    labels = (ns.metadata.labels if ns.metadata else None) or {}
    if labels.get(contract.LABEL_GENERATED_NAMESPACE) == "true":
        return
    patch = {"metadata": {"labels": {contract.LABEL_GENERATED_NAMESPACE: "true"}}}
    await client.patch(Namespace, name, patch, patch_type=PatchType.MERGE)


async def monitor_managed_namespace(client: AsyncClient, name: str, interval: float) -> None:
    """Leader only: re-create or re-label the namespace every ``interval`` seconds."""
    while True:
        try:
            await ensure_managed_namespace(client, name)
        except Exception as exc:  # a bad tick must never take the process down
            log.warning("namespace monitor: %r", exc)
        await asyncio.sleep(interval)
