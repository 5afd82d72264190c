"""What a MaasTenantConfig asks for, read and checked: pure functions of the config.

Each raises ``StepFailed(InvalidTenantConfig)`` with upstream's message when the config says
something the platform cannot be rendered from (steps 2 and 4 of ``tenant_config.py``).
"""

from __future__ import annotations

from aitenant import contract
from aitenant.errors import StepFailed
from aitenant.platform.render import DEFAULT_MAX_EXPIRATION_DAYS, Telemetry
from aitenant.resources import Obj, annotations_of, labels_of

Reason = contract.ConfigReason


def tenant_identity(config: Obj) -> str:
    """The tenant a config belongs to (its ``tenant-name`` label), or StepFailed."""
    meta = config["metadata"]
    ref = f"tenant {meta['namespace']}/{meta['name']}"
    labels = labels_of(config)
    name = labels.get(contract.LABEL_TENANT_NAME, "")
    if not name:
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG,
            f"{ref} has {contract.LABEL_MANAGED_BY_AITENANT}=true but "
            f"{contract.LABEL_TENANT_NAME} is missing or empty",
        )
    if name == contract.DEFAULT_TENANT_NAME and (
        meta["name"] != contract.TENANT_CONFIG_NAME
        or labels.get(contract.LABEL_TENANT_NAMESPACE) != meta["namespace"]
    ):
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG,
            f"{ref} claims the default tenant {contract.DEFAULT_TENANT_NAME}, which only "
            f"{contract.TENANT_CONFIG_NAME} labelled with its own namespace may do",
        )
    return name


def replicas_for(config: Obj, default: int) -> int:
    raw = annotations_of(config).get(contract.ANNOTATION_MAAS_API_REPLICAS)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG,
            f'annotation {contract.ANNOTATION_MAAS_API_REPLICAS}="{raw}" is not a '
            "non-negative integer",
        )
    return value


def max_expiration_days(config: Obj) -> int:
    """``spec.apiKeys.maxExpirationDays``, or upstream's default."""
    api_keys = (config.get("spec") or {}).get("apiKeys") or {}
    return int(api_keys.get("maxExpirationDays") or DEFAULT_MAX_EXPIRATION_DAYS)


TELEMETRY_SWITCHES = (
    ("captureOrganization", "organization"),
    ("captureUser", "user"),
    ("captureGroup", "group"),
    ("captureModelUsage", "model_usage"),
)


def telemetry_of(config: Obj) -> Telemetry | None:
    """``spec.telemetry`` as upstream reads it: no block, no metrics; a block is enabled unless
    ``enabled: false``; each dimension keeps upstream's default unless set."""
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
