"""Write a tenant's rendered platform to the cluster, and take it away again.

* ``apply_all``: for each rendered object, look up the live copy (the caller's cache, or the
  API), concurrently in two waves: Secrets, ServiceAccounts and Roles first, so they exist
  before the workloads that mount or run as them and the bindings that name them, then
  everything else. A missing object is created
  (a create, never an apply over whatever has its name). An existing one is ours only when its
  tracking labels name this tenant; it is left alone when annotated
  ``opendatahub.io/managed: "false"``; otherwise it is server-side applied (field manager
  ``aitenant-controller``, force, so any drift in the fields we set is taken back) on the
  version judged, unless it already holds every value we render (``covers``), so an unchanged
  tenant costs reads only. A create records our fields as an Update; the first apply that
  follows turns that entry into our Apply entry just before it (so an apply that renders fewer
  fields removes the rest), and a created object that never changes is never written again.
  ``create_only`` objects (the Gateway AuthPolicy) are created when
  missing and never written afterwards.
* ``prune``: delete the tenant's objects (found by the tracking labels) that are no longer
  rendered, e.g. the TelemetryPolicy once telemetry is turned off.
* ``delete_tracked``: the tenant's platform cleanup when its MaasTenantConfig goes away.

Objects annotated ``opendatahub.io/managed: "false"``, and objects another controller owns (a
controller ownerReference), are never written, pruned or deleted; nor is an object whose
tracking labels name another tenant (``OtherTenantsObject``, docs/contract.md §3.7), nor one
without them (``NotOursObject``, docs/differences.md D32): both are reported, never taken
over, and as they carry no label of this tenant, no cleanup of it finds them.

An object of this tenant that someone else made (the reference controller, before a takeover,
docs/differences.md D24) carries its tracking labels and is adopted by the apply (logged with
the managers it had). Where the API refuses that (422: a Deployment's selector is immutable),
``ForeignObject`` says so, with the fix; the refused version is remembered, and later passes
read the object instead of writing it again until it changes or goes: never a retry loop of
refused writes. An object found not ours is likewise only read by later passes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from aitenant import contract
from aitenant.platform.covers import covers
from aitenant.platform.kinds import Kind, Scope
from aitenant.platform.render import Manifest, Ref, ref_of
from aitenant.runtime.client.api_errors import (
    api_message,
    is_conflict,
    is_invalid,
    is_not_found,
    is_transient,
)
from aitenant.runtime.client.requests import LIST_PAGE, get_or_none

log = logging.getLogger(__name__)

# What a lookup answers when it does not know: read the object from the API.
UNKNOWN: Any = object()


async def get_dict_or_none(
    client: AsyncClient, kind: Kind, name: str, namespace: str | None
) -> dict[str, Any] | None:
    """A platform object from the API as a plain dict, or None when it does not exist."""
    obj = await get_or_none(client, kind.resource, name, namespace if kind.namespaced else None)
    return None if obj is None else dict(obj)


# Manifest → its live copy, None when it does not exist, or UNKNOWN. None must be certain: a
# create-only object may exist without our labels, and a lookup that would not see it answers
# UNKNOWN.
Lookup = Callable[[Manifest], Any]
# Applied (all at once) before the rest: workloads mount or run as them, and the API server
# refuses a RoleBinding to a Role that does not exist unless its writer holds `bind` on it.
PREREQUISITE_KINDS = frozenset({"Secret", "ServiceAccount", "Role"})
# Writes of one object per pass that may find it changed since it was read (409) and read again.
APPLY_ATTEMPTS = 3


class ApplyError(Exception):
    """An object could not be written; the message names it and the API's answer."""

    def __init__(self, message: str, cause: ApiError | None) -> None:
        super().__init__(message)
        self.cause = cause

    @property
    def transient(self) -> bool:
        return self.cause is not None and is_transient(self.cause)


class OtherTenantsObject(ApplyError):
    """An object we render already serves another tenant (its tracking labels say whose): it is
    never taken over, whatever name collision or edit brought the two together."""

    def __init__(self, manifest: Manifest, owner: tuple[str, str]) -> None:
        tenant, namespace = owner
        super().__init__(
            f"{manifest} belongs to tenant {tenant} ({contract.LABEL_TENANT_NAMESPACE}="
            f"{namespace}) and is not taken over",
            None,
        )


def tenant_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(tenant name, tenant namespace) of a platform object's tracking labels, if it has any
    (either may be empty: one label alone still names someone)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    name: str = labels.get(contract.LABEL_TENANT_NAME) or ""
    namespace: str = labels.get(contract.LABEL_TENANT_NAMESPACE) or ""
    return (name, namespace) if name or namespace else None


class NotOursObject(ApplyError):
    """An object we would render exists without this tenant's tracking labels: made by someone
    else (or kept by them, ``opendatahub.io/managed: "false"``); never written nor deleted."""

    def __init__(self, manifest: Manifest, live: Mapping[str, Any]) -> None:
        tenant = (tenant_of(manifest.obj) or ("", ""))[0]
        kept = " and annotated to be kept" if is_unmanaged(live) else ""
        super().__init__(
            f"{manifest} is in the way: it exists, made by {maker_of(live)}{kept}, without "
            f"{contract.LABEL_TENANT_NAME}={tenant}, and is not taken over; rename or delete it "
            "and the platform is applied",
            None,
        )


def maker_of(obj: Mapping[str, Any]) -> str:
    """Who made an object, as far as it says: its managed-by label, else its field managers."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if by := labels.get(contract.LABEL_MANAGED_BY):
        return f"{by} ({contract.LABEL_MANAGED_BY})"
    return ", ".join(managers_of(obj)) or "someone else"


def is_ours(obj: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """``obj`` carries the tracking labels of the tenant ``desired`` is rendered for."""
    owner = tenant_of(obj)
    return owner is not None and owner == tenant_of(desired)


class ForeignObject(ApplyError):
    """An object we render exists without our labels and the API refuses to let us take it
    over; the message names its managers and what the operator can do."""

    def __init__(self, manifest: Manifest, live: Mapping[str, Any], cause: ApiError) -> None:
        super().__init__(
            f"{manifest} exists, made by {', '.join(managers_of(live)) or 'someone else'}, and "
            f"cannot be taken over: {api_message(cause)}; delete it (the platform is then "
            f"applied again) or annotate it {contract.ANNOTATION_OPENDATAHUB_MANAGED}="
            f'"{contract.UNMANAGED_VALUE}" to keep it as it is',
            cause,
        )


def managers_of(obj: Mapping[str, Any]) -> list[str]:
    """The field managers that wrote ``obj`` (its managedFields), sorted; not those that only
    report its status (the deployment controller on every Deployment a kubelet runs), which
    made nothing."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return sorted(
        {entry.get("manager") or "?" for entry in entries if entry.get("subresource") != "status"}
    )


def carries_labels(obj: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """``obj`` has every label ``desired`` renders: made (or already adopted) by us."""
    wanted = (desired.get("metadata") or {}).get("labels") or {}
    return covers((obj.get("metadata") or {}).get("labels") or {}, wanted)


def is_unmanaged(obj: Mapping[str, Any] | None) -> bool:
    """Left alone: annotated ``opendatahub.io/managed: "false"``, or controlled by another
    controller (an ownerReference with ``controller: true``; ours never carry one,
    docs/differences.md D6)."""
    meta = (obj or {}).get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if annotations.get(contract.ANNOTATION_OPENDATAHUB_MANAGED) == contract.UNMANAGED_VALUE:
        return True
    return any(ref.get("controller") for ref in meta.get("ownerReferences") or [])


class _ReadItFirst(Exception):
    """A write is due on an object judged from a cached copy: judge it again on the API's."""


@dataclass
class ApplyReport:
    live: dict[Ref, dict[str, Any]] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    unmanaged: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def writes(self) -> int:
        return len(self.applied) + len(self.created)


class Applier:
    def __init__(
        self, client: AsyncClient, *, field_manager: str = contract.PLATFORM_FIELD_MANAGER
    ) -> None:
        self.client = client
        self.field_manager = field_manager
        # Objects someone else made whose takeover the API refused: the version refused and
        # the API's answer.
        self._refused: dict[Ref, tuple[str, ApiError]] = {}
        # Objects found not ours (NotOursObject): later passes read them, never create.
        self._not_ours: set[Ref] = set()

    async def get(self, kind: Kind, name: str, namespace: str | None) -> dict[str, Any] | None:
        return await get_dict_or_none(self.client, kind, name, namespace)

    async def apply_all(
        self, manifests: Sequence[Manifest], lookup: Lookup | None = None
    ) -> ApplyReport:
        """Apply the manifests concurrently, prerequisites first; ``lookup`` gives a live copy
        (None: absent) or UNKNOWN (ask the API). The report lists them in manifest order; when
        some of a wave fail, the whole wave has finished and its first failure (in manifest
        order) is raised."""
        parts = [ApplyReport() for _ in manifests]
        for wave in (True, False):
            outcomes = await asyncio.gather(
                *(
                    self._apply_one(m, lookup, part)
                    for m, part in zip(manifests, parts, strict=True)
                    if (m.kind.kind in PREREQUISITE_KINDS) is wave
                ),
                return_exceptions=True,
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        report = ApplyReport()
        for part in parts:
            report.live.update(part.live)
            report.applied += part.applied
            report.created += part.created
            report.unmanaged += part.unmanaged
            report.unchanged += part.unchanged
        return report

    async def _apply_one(
        self, manifest: Manifest, lookup: Lookup | None, report: ApplyReport
    ) -> None:
        live = lookup(manifest) if lookup is not None else UNKNOWN
        if manifest.ref in self._refused or manifest.ref in self._not_ours:
            live = UNKNOWN  # not in the caches (not labelled as ours): ask the API
        fresh = live is UNKNOWN
        if fresh:
            live = await self._read(manifest)
        result = await self._ensure(manifest, live, report, fresh=fresh)
        if result is not None:
            report.live[manifest.ref] = result

    async def _read(self, manifest: Manifest) -> dict[str, Any] | None:
        try:
            return await self.get(manifest.kind, manifest.name, manifest.namespace)
        except ApiError as exc:
            raise ApplyError(f"get {manifest}: {api_message(exc)}", exc) from None

    async def _ensure(
        self,
        manifest: Manifest,
        live: dict[str, Any] | None,
        report: ApplyReport,
        *,
        fresh: bool,
    ) -> dict[str, Any] | None:
        if manifest.create_only:
            if live is None:
                return await self._create_only(manifest, report)
            if is_unmanaged(live):
                report.unmanaged.append(str(manifest))
            else:
                report.unchanged += 1
            return live
        for _ in range(APPLY_ATTEMPTS):
            if live is None:
                created = await self._create(manifest)
                if created is not None:
                    report.created.append(str(manifest))
                    return created
                live, fresh = await self._read(manifest), True  # exists after all: judged below
                if live is None:
                    continue
            try:
                return await self._update(manifest, live, report, fresh=fresh)
            except _ReadItFirst:
                pass
            except ApiError as exc:
                if not is_conflict(exc):
                    raise ApplyError(f"apply {manifest}: {api_message(exc)}", exc) from None
            # Changed since it was judged (annotated, relabelled, deleted), or judged on a
            # cached copy: judge it again on the API's.
            live, fresh = await self._read(manifest), True
        raise ApplyError(f"apply {manifest}: it kept changing while it was written", None)

    async def _update(
        self, manifest: Manifest, live: dict[str, Any], report: ApplyReport, *, fresh: bool
    ) -> dict[str, Any]:
        """Write an existing object once it is judged ours and not opted out; the write holds
        the judged version as its precondition, so a change meanwhile (an opt-out, new labels)
        answers 409 and is judged again rather than written over."""
        if (owner := tenant_of(live)) and owner != tenant_of(manifest.obj):
            raise OtherTenantsObject(manifest, owner)
        if not is_ours(live, manifest.obj):
            self._not_ours.add(manifest.ref)
            raise NotOursObject(manifest, live)
        self._not_ours.discard(manifest.ref)
        if is_unmanaged(live):
            report.unmanaged.append(str(manifest))
            return live
        if covers(live, manifest.obj):
            report.unchanged += 1
            return live
        version = live["metadata"].get("resourceVersion") or ""
        refused = self._refused.pop(manifest.ref, None)
        if refused and refused[0] == version:
            self._refused[manifest.ref] = refused  # unchanged since: refused again, unwritten
            raise ForeignObject(manifest, live, refused[1])
        if not fresh:
            # The caches keep no managedFields, and whether our entry is still a create's
            # decides the write: read the object (a write is rare once a tenant is up).
            raise _ReadItFirst
        if (upgrade := self._upgrade_patch(live)) is not None:
            version = await self._own_as_applied(manifest, upgrade)
        try:
            applied = await self._patch(manifest, version)
        except ApiError as exc:
            if is_invalid(exc) and not carries_labels(live, manifest.obj):
                self._refused[manifest.ref] = (version, exc)
                raise ForeignObject(manifest, live, exc) from None
            raise
        report.applied.append(str(manifest))
        if not carries_labels(live, manifest.obj):
            log.info("adopted %s, made by %s", manifest, ", ".join(managers_of(live)) or "?")
        return applied

    async def _patch(self, manifest: Manifest, version: str) -> dict[str, Any]:
        """Server-side apply with force, on ``version`` only (the API answers 409 otherwise)."""
        body = {**manifest.obj, "metadata": {**manifest.obj["metadata"]}}
        body["metadata"]["resourceVersion"] = version
        return await self._send_patch(manifest, body, PatchType.APPLY)

    async def _send_patch(
        self, manifest: Manifest, body: dict[str, Any], patch_type: PatchType
    ) -> dict[str, Any]:
        """A patch of our field manager (an apply is forced: drift in our fields is ours)."""
        return dict(
            await self.client.patch(
                manifest.kind.resource,
                manifest.name,
                body,
                namespace=manifest.namespace,
                patch_type=patch_type,
                field_manager=self.field_manager,
                force=patch_type is PatchType.APPLY,
            )
        )

    async def _create(self, manifest: Manifest) -> dict[str, Any] | None:
        """Create ``manifest``; None when something has its name already (never written
        over)."""
        try:
            created = dict(
                await self.client.create(
                    manifest.kind.resource(manifest.obj), field_manager=self.field_manager
                )
            )
        except ApiError as exc:
            if is_conflict(exc):
                return None
            raise ApplyError(f"create {manifest}: {api_message(exc)}", exc) from None
        self._refused.pop(manifest.ref, None)
        self._not_ours.discard(manifest.ref)
        log.debug("created %s", manifest)
        return created

    async def _own_as_applied(self, manifest: Manifest, upgrade: dict[str, Any]) -> str:
        """Turn our Update entry (a create's) into our Apply entry, as kubectl's
        client-side-to-server-side upgrade does, so the apply that follows owns every field we
        set and removes those it no longer renders; the version it was judged on is the
        precondition (409 if it moved: judged again). The new version."""
        upgraded = await self._send_patch(manifest, upgrade, PatchType.MERGE)
        return str(upgraded["metadata"]["resourceVersion"])

    def _upgrade_patch(self, live: dict[str, Any]) -> dict[str, Any] | None:
        """The merge patch that makes our Update entry an Apply entry; None when there is none
        to upgrade."""
        meta = live["metadata"]
        entries: list[dict[str, Any]] = meta.get("managedFields") or []
        upgraded = [
            {**entry, "operation": "Apply"}
            if entry.get("manager") == self.field_manager
            and entry.get("operation") == "Update"
            and not entry.get("subresource")
            else entry
            for entry in entries
        ]
        if upgraded == entries:
            return None
        return {"metadata": {"resourceVersion": meta["resourceVersion"], "managedFields": upgraded}}

    async def _create_only(self, manifest: Manifest, report: ApplyReport) -> dict[str, Any] | None:
        try:
            created = await self.client.create(manifest.kind.resource(manifest.obj))
        except ApiError as exc:
            if is_conflict(exc):  # created by someone else meanwhile: theirs now
                report.unchanged += 1
                return None
            raise ApplyError(f"create {manifest}: {api_message(exc)}", exc) from None
        report.created.append(str(manifest))
        return dict(created)

    async def list_tracked(self, scope: Scope, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        """The tenant's objects of one kind; none when the kind is not served at all."""
        kind, namespace = scope
        labels: dict[str, Any] = dict(selector)
        try:
            if kind.namespaced:
                listing = self.client.list(
                    kind.resource, namespace=namespace, labels=labels, chunk_size=LIST_PAGE
                )
            else:
                listing = self.client.list(kind.resource, labels=labels, chunk_size=LIST_PAGE)
            found: list[dict[str, Any]] = []
            async for obj in listing:
                found.append(dict(obj))
                # lightkube's list omits apiVersion/kind on items: restore them for ref_of.
                found[-1].setdefault("apiVersion", kind.api_version)
                found[-1].setdefault("kind", kind.kind)
            return found
        except ApiError as exc:
            if is_not_found(exc):
                return []
            raise

    async def prune(
        self, tracked: Iterable[tuple[Kind, dict[str, Any]]], keep: set[Ref]
    ) -> list[str]:
        """Delete the tenant's ``tracked`` objects outside ``keep``; returns what was deleted."""
        deleted: list[str] = []
        for kind, obj in tracked:
            if ref_of(obj) in keep or is_unmanaged(obj):
                continue
            try:
                if await self._delete(kind, obj):
                    deleted.append(describe(obj))
            except ApiError as exc:
                raise ApplyError(f"delete {describe(obj)}: {api_message(exc)}", exc) from None
        return deleted

    async def delete_tracked(self, tracked: Iterable[tuple[Kind, dict[str, Any]]]) -> bool:
        """Delete the tenant's ``tracked`` objects; True once none is left (opted-out ones are
        kept). An object without finalizers is gone when its DELETE returns."""
        done = True
        for kind, obj in tracked:
            if is_unmanaged(obj):
                continue
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                done = False  # someone's finalizer still holds it
                continue
            await self._delete(kind, obj)
            if meta.get("finalizers"):
                done = False
        return done

    async def _delete(self, kind: Kind, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        try:
            if kind.namespaced:
                await self.client.delete(kind.resource, meta["name"], namespace=meta["namespace"])
            else:
                await self.client.delete(kind.resource, meta["name"])
        except ApiError as exc:
            if is_not_found(exc):
                return False
            raise
        log.info("deleted %s", describe(obj))
        return True


def describe(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')} {ns}{meta['name']}"
