"""Gateway selector labels on the infra namespace, with the ownership ledger
(docs/contract.md §3.4-9).

A Gateway listener that admits routes only from namespaces matching a label selector would
not admit the tenant's maas-api route from the infra namespace; so the infra namespace gets the
selector's ``matchLabels``. The ledger annotation records which Gateways wanted each label, so
one tenant's cleanup never strips a label another Gateway still needs. Pure planning here;
the reconciler does the I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aitenant import contract

LEDGER = contract.ANNOTATION_GATEWAY_SELECTOR_LABELS


class LabelConflict(Exception):
    """The infra namespace cannot carry the labels a Gateway wants."""


def desired_labels(gateway: Mapping[str, Any]) -> dict[str, str]:
    meta = gateway.get("metadata", {})
    gw = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    wanted: dict[str, str] = {}
    for listener in (gateway.get("spec") or {}).get("listeners") or []:
        namespaces = ((listener.get("allowedRoutes") or {}).get("namespaces")) or {}
        selector = namespaces.get("selector")
        if namespaces.get("from") != "Selector" or selector is None:
            continue
        for key, value in (selector.get("matchLabels") or {}).items():
            if key in wanted and wanted[key] != value:
                raise LabelConflict(
                    f"gateway {gw} has conflicting namespace selector values for label "
                    f'"{key}": listener "{listener.get("name", "")}" wants "{value}" but '
                    f'another listener wants "{wanted[key]}"'
                )
            wanted[key] = value
    return wanted


def parse_ledger(annotations: Mapping[str, str] | None, namespace: str) -> dict[str, list[str]]:
    raw = (annotations or {}).get(LEDGER)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return {str(k): [str(x) for x in v] for k, v in data.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise LabelConflict(
            f"unmarshal {LEDGER} annotation on infra namespace {namespace}: {exc}"
        ) from None


def _ledger_value(ledger: dict[str, list[str]]) -> str | None:
    return json.dumps(ledger, sort_keys=True, separators=(",", ":")) if ledger else None


def plan_ensure(
    *,
    namespace: str,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    gateway_name: str,
    wanted: Mapping[str, str],
) -> dict[str, Any] | None:
    """The merge patch that gives the infra namespace ``wanted`` for this gateway, or None."""
    current = dict(labels or {})
    ledger = parse_ledger(annotations, namespace)
    new_ledger = {k: list(v) for k, v in ledger.items()}
    label_patch: dict[str, str | None] = {}
    for key, value in wanted.items():
        owners = ledger.get(key, [])
        existing = current.get(key)
        if existing is not None and existing != value:
            if not owners:
                raise LabelConflict(
                    f'label "{key}" on infra namespace {namespace} already has value "{existing}" '
                    f'set outside the controller; gateway "{gateway_name}" wants "{value}" — '
                    "resolve manually"
                )
            if owners != [gateway_name]:
                other = next((o for o in owners if o != gateway_name), owners[0])
                raise LabelConflict(
                    f'conflicting gateway label "{key}" on infra namespace {namespace}: owned by '
                    f'gateway "{other}" (value "{existing}") but gateway "{gateway_name}" wants '
                    f'"{value}"'
                )
        if existing != value:
            label_patch[key] = value
        if gateway_name not in new_ledger.setdefault(key, []):
            new_ledger[key].append(gateway_name)
    for key, owners in ledger.items():
        if key in wanted or gateway_name not in owners:
            continue
        remaining = [o for o in owners if o != gateway_name]
        if remaining:
            new_ledger[key] = remaining
        else:
            new_ledger.pop(key, None)
            if key in current:
                label_patch[key] = None
    return _patch(ledger, new_ledger, label_patch)


def plan_release(
    *,
    namespace: str,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    gateway_name: str,
) -> dict[str, Any] | None:
    """The merge patch that removes this gateway from the ledger (and labels only it owned)."""
    current = dict(labels or {})
    ledger = parse_ledger(annotations, namespace)
    new_ledger: dict[str, list[str]] = {}
    label_patch: dict[str, str | None] = {}
    for key, owners in ledger.items():
        remaining = [o for o in owners if o != gateway_name]
        if remaining:
            new_ledger[key] = remaining
        elif key in current:
            label_patch[key] = None
    return _patch(ledger, new_ledger, label_patch)


def _patch(
    old: dict[str, list[str]], new: dict[str, list[str]], label_patch: dict[str, str | None]
) -> dict[str, Any] | None:
    if not label_patch and old == new:
        return None
    meta: dict[str, Any] = {"annotations": {LEDGER: _ledger_value(new)}}
    if label_patch:
        meta["labels"] = label_patch
    return {"metadata": meta}
