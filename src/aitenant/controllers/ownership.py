"""Who owns what: the metadata an AITenant stamps on its children and the ownership rules.

Ownership across namespaces is recorded in annotations (no ownerReferences; docs/contract.md §3.2):
an object is *owned by* tenant A when both owner annotations name A; it is *managed by another
AITenant* when it carries either owner annotation but is not owned by A.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aitenant import contract


def tenant_labels(name: str, tenant_namespace: str) -> dict[str, str]:
    return {
        contract.LABEL_MANAGED_BY: contract.MANAGED_BY_VALUE,
        contract.LABEL_PART_OF: contract.PART_OF_VALUE,
        contract.LABEL_MANAGED_BY_AITENANT: "true",
        contract.LABEL_GATEWAY_TENANT: name,
        contract.LABEL_TENANT_NAME: name,
        contract.LABEL_TENANT_NAMESPACE: tenant_namespace,
        contract.LABEL_GATEWAY_ACCESS: "true",
    }


def tenant_annotations(name: str, namespace: str) -> dict[str, str]:
    return {
        contract.ANNOTATION_AITENANT_NAME: name,
        contract.ANNOTATION_AITENANT_NAMESPACE: namespace,
    }


def created_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` for an object the controller creates: plus the label Juju's model webhook
    skips, since under Juju the controller writes as the application's service account and
    `juju remove-application` deletes what that webhook marked (contract.KEPT_BY_JUJU_LABELS;
    docs/design.md §7.1).
    Only at creation: never asserted on adopted objects, nor dropped when released, so a
    release never becomes a write Juju's webhook marks."""
    return {**labels, **contract.KEPT_BY_JUJU_LABELS}


# Stamped only on a tenant namespace the controller created itself.
CREATED_NAMESPACE_LABELS = {contract.LABEL_GENERATED_NAMESPACE: "true"}
CREATED_NAMESPACE_ANNOTATIONS = {contract.ANNOTATION_CREATED_BY_AITENANT: "true"}


def owned_by(annotations: Mapping[str, str] | None, name: str, namespace: str) -> bool:
    ann = annotations or {}
    return (
        ann.get(contract.ANNOTATION_AITENANT_NAME) == name
        and ann.get(contract.ANNOTATION_AITENANT_NAMESPACE) == namespace
    )


def has_owner_annotations(annotations: Mapping[str, str] | None) -> bool:
    ann = annotations or {}
    return bool(
        ann.get(contract.ANNOTATION_AITENANT_NAME)
        or ann.get(contract.ANNOTATION_AITENANT_NAMESPACE)
    )


def managed_by_other(annotations: Mapping[str, str] | None, name: str, namespace: str) -> bool:
    return has_owner_annotations(annotations) and not owned_by(annotations, name, namespace)


def managed_by_rival(
    annotations: Mapping[str, str] | None, name: str, namespace: str, rivals: list[str]
) -> bool:
    """Managed by another AITenant that could own the same tenant namespace (``rivals``, from
    ``naming.tenants_for_namespace``). Owner annotations naming anyone else on a tenant's
    config are a tenant admin's edit: put back, never obeyed (docs/contract.md §3.7)."""
    ann = annotations or {}
    return (
        managed_by_other(ann, name, namespace)
        and ann.get(contract.ANNOTATION_AITENANT_NAMESPACE) == namespace
        and ann.get(contract.ANNOTATION_AITENANT_NAME) in rivals
    )


def missing_metadata(
    current: Mapping[str, str] | None, desired: Mapping[str, str]
) -> dict[str, str]:
    """The desired entries whose current value differs (what a merge patch must set)."""
    have = current or {}
    return {k: v for k, v in desired.items() if have.get(k) != v}


def metadata_patch(
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    want_labels: Mapping[str, str],
    want_annotations: Mapping[str, str],
) -> dict[str, Any] | None:
    """A merge patch asserting the wanted labels/annotations, or None when nothing differs."""
    meta: dict[str, Any] = {}
    if add := missing_metadata(labels, want_labels):
        meta["labels"] = add
    if add := missing_metadata(annotations, want_annotations):
        meta["annotations"] = add
    return {"metadata": meta} if meta else None


def release_patch(
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    ours_labels: Mapping[str, str],
    ours_annotations: Mapping[str, str],
) -> dict[str, Any] | None:
    """A merge patch removing each key only while it still holds the value we set."""
    meta: dict[str, Any] = {}
    for field, current, ours in (
        ("labels", labels or {}, ours_labels),
        ("annotations", annotations or {}, ours_annotations),
    ):
        drop = {k: None for k, v in ours.items() if current.get(k) == v}
        if drop:
            meta[field] = drop
    return {"metadata": meta} if meta else None
