"""What a MaasTenantConfig asks for, read and checked: pure functions of the config.

Each raises ``StepFailed(InvalidTenantConfig)`` with the contract's message when the config says
something the platform cannot be rendered from (``reconciler.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from aitenant import contract
from aitenant.controllers import ownership
from aitenant.controllers.messages import quoted
from aitenant.errors import StepFailed
from aitenant.platform.render import DEFAULT_MAX_EXPIRATION_DAYS, Telemetry
from aitenant.resources import AITenantView, Obj, annotations_of, labels_of

Reason = contract.ConfigReason


# The labels of a config that say whose it is (of those its owner stamps, ``tenant_labels``).
IDENTITY_LABELS = (
    contract.LABEL_MANAGED_BY_AITENANT,
    contract.LABEL_TENANT_NAME,
    contract.LABEL_TENANT_NAMESPACE,
)


def owner_labels(owner: AITenantView, tenant_namespace: str) -> dict[str, str]:
    """The identity labels as ``owner`` stamps them on its config."""
    stamped = ownership.tenant_labels(owner.name, tenant_namespace)
    return {key: stamped[key] for key in IDENTITY_LABELS}


def check_identity(config: Obj, owner: AITenantView) -> str:
    """The tenant a config serves, ``owner``'s name, once every label and annotation that says
    whose it is agrees; else StepFailed naming the first that does not (docs/contract.md
    §3.7). ``owner`` comes from the config's namespace, which only a platform administrator
    chooses; the labels and annotations are the tenant admin's to write, so they are checked,
    never believed, and nothing is rendered, applied or pruned from a config that disagrees.
    """
    meta = config["metadata"]
    namespace = meta["namespace"]
    expected = (
        ("label", labels_of(config), owner_labels(owner, namespace)),
        (
            "annotation",
            annotations_of(config),
            ownership.tenant_annotations(owner.name, owner.namespace),
        ),
    )
    for what, have, want in expected:
        for key, value in want.items():
            if have.get(key) != value:
                found = f"is {quoted(have[key])}" if key in have else "is missing"
                raise StepFailed(
                    Reason.INVALID_TENANT_CONFIG,
                    f'{what} {key} {found}; expected "{value}": MaasTenantConfig '
                    f"{namespace}/{meta['name']} belongs to AITenant {owner.namespace}/"
                    f"{owner.name}, whose tenant namespace this is; nothing is rendered from it "
                    "until the AITenant's next pass puts the value back",
                )
    return owner.name


@dataclass(frozen=True)
class Replicas:
    """The replica count to render, and why the annotation was refused (None: it was not)."""

    count: int
    refusal: str | None = None


def replicas_for(config: Obj, default: int, ceiling: int) -> Replicas:
    """The annotation's replica count when it is a whole number from ``MAAS_API_REPLICAS_MIN``
    to the platform's ``ceiling`` (``--maas-api-max-replicas``); else ``default`` and why (one
    tenant admin must not take the database's connections and the infra namespace's CPU from
    every tenant, docs/differences.md D35). The default, never the count already running: a
    lowered ceiling holds at once."""
    raw = annotations_of(config).get(contract.ANNOTATION_MAAS_API_REPLICAS)
    if raw is None:
        return Replicas(default)
    annotation = contract.ANNOTATION_MAAS_API_REPLICAS
    low = contract.MAAS_API_REPLICAS_MIN
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    running = f"maas-api runs the default {default} (--maas-api-replicas)"
    if value < low:
        return Replicas(
            default,
            f"annotation {annotation}={quoted(raw)} is not a whole number from {low} to "
            f"{ceiling}; " + running,
        )
    if value > ceiling:
        return Replicas(
            default,
            f"annotation {annotation}={quoted(raw)} exceeds the platform's limit {ceiling} "
            "(--maas-api-max-replicas / charm option maas-api-max-replicas); " + running,
        )
    return Replicas(value)


def refuse_replicas(replicas: Replicas) -> None:
    """StepFailed for a refused annotation, raised once the default count is applied."""
    if replicas.refusal is not None:
        raise StepFailed(Reason.INVALID_TENANT_CONFIG, replicas.refusal)


def max_expiration_days(config: Obj) -> int:
    """``spec.apiKeys.maxExpirationDays``, or its default (``DEFAULT_MAX_EXPIRATION_DAYS``)."""
    api_keys = (config.get("spec") or {}).get("apiKeys") or {}
    return int(api_keys.get("maxExpirationDays") or DEFAULT_MAX_EXPIRATION_DAYS)


TELEMETRY_SWITCHES = (
    ("captureOrganization", "organization"),
    ("captureUser", "user"),
    ("captureGroup", "group"),
    ("captureModelUsage", "model_usage"),
)


def telemetry_of(config: Obj) -> Telemetry | None:
    """``spec.telemetry``: no block, no metrics; a block is enabled unless ``enabled: false``;
    each dimension keeps its default (``Telemetry``) unless set."""
    block = (config.get("spec") or {}).get("telemetry")
    if block is None:
        return None
    if not isinstance(block, dict):
        raise StepFailed(Reason.INVALID_TENANT_CONFIG, "spec.telemetry must be an object")
    enabled = _flag(block, "enabled", "spec.telemetry.enabled", True)
    if not enabled:
        return None
    metrics = block.get("metrics")
    if metrics is None:
        metrics = {}
    if not isinstance(metrics, dict):
        raise StepFailed(Reason.INVALID_TENANT_CONFIG, "spec.telemetry.metrics must be an object")
    defaults = Telemetry()
    return Telemetry(
        **{
            attr: _flag(metrics, field, f"spec.telemetry.metrics.{field}", getattr(defaults, attr))
            for field, attr in TELEMETRY_SWITCHES
        }
    )


def _flag(block: Obj, field: str, path: str, default: bool) -> bool:
    value = block.get(field)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG, f"{path} must be true or false, not {value!r}"
        )
    return value
