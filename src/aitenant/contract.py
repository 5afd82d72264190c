"""Names that are part of the observable contract with other MaaS components and operators.

Every name here is the contract's (docs/contract.md) unless a comment says otherwise. The charm
imports this module too, so it must stay dependency-free.
"""

from typing import Final

GROUP: Final = "maas.opendatahub.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

# Names
DEFAULT_AITENANT_NAMESPACE: Final = "ai-tenants"
DEFAULT_TENANT_NAME: Final = "models-as-a-service"
DEFAULT_SUBSCRIPTION_NAMESPACE: Final = "models-as-a-service"
# The default tenant's Gateway (--gateway-name's default): the only one that may carry
# DEFAULT_TENANT_NAME (docs/differences.md D36).
DEFAULT_GATEWAY_NAME: Final = "maas-default-gateway"
TENANT_NAMESPACE_PREFIX: Final = "ai-tenant-"
TENANT_CONFIG_NAME: Final = "default-tenant"
LEGACY_TENANT_NAME: Final = "default-tenant"
CONFIG_NAME: Final = "default"
CLAIM_PREFIX: Final = "gateway-claim-"
ROLE_PREFIX: Final = "aitenant-"
TENANT_ADMIN_SUFFIX: Final = "-tenant-admin"
OBJECT_ADMIN_SUFFIX: Final = "-object-admin"
MAX_AITENANT_NAME: Final = 41
CONTROLLER_NAME: Final = "aitenant-controller"
EVENT_SOURCE: Final = "maas-aitenant-controller"
LEASE_NAME: Final = "aitenant-controller"

# Finalizers: shared with the other MaaS controllers on purpose (docs/differences.md D23).
AITENANT_FINALIZER: Final = "maas.opendatahub.io/aitenant-cleanup"
TENANT_CONFIG_FINALIZER: Final = "maas.opendatahub.io/tenant-cleanup"
# Left on legacy Tenants by old controller versions; removed when the Tenant is migrated.
LEGACY_TENANT_FINALIZERS: Final = (TENANT_CONFIG_FINALIZER, "maas.opendatahub.io/tenant-finalizer")

# Labels
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY_AITENANT: Final = "maas.opendatahub.io/managed-by-aitenant"
LABEL_GATEWAY_TENANT: Final = "ai-gateway.opendatahub.io/tenant"
LABEL_TENANT_NAME: Final = "maas.opendatahub.io/tenant-name"
LABEL_TENANT_NAMESPACE: Final = "maas.opendatahub.io/tenant-namespace"
LABEL_GATEWAY_ACCESS: Final = "maas.opendatahub.io/gateway-access"
LABEL_GENERATED_NAMESPACE: Final = "opendatahub.io/generated-namespace"
LABEL_GATEWAY_CLAIM: Final = "maas.opendatahub.io/gateway-claim"

MANAGED_BY_VALUE: Final = "maas-controller"
PART_OF_VALUE: Final = "modelsasservice"

# Annotations
ANNOTATION_AITENANT_NAME: Final = "maas.opendatahub.io/aitenant-name"
ANNOTATION_AITENANT_NAMESPACE: Final = "maas.opendatahub.io/aitenant-namespace"
ANNOTATION_CREATED_BY_AITENANT: Final = "maas.opendatahub.io/created-by-aitenant"
ANNOTATION_GATEWAY_SELECTOR_LABELS: Final = "maas.opendatahub.io/gateway-selector-labels"
ANNOTATION_API_KEYS_REVOKED: Final = "maas.opendatahub.io/api-keys-revoked"
ANNOTATION_DEFAULT_BOOTSTRAPPED: Final = "maas.opendatahub.io/default-aitenant-bootstrapped"
ANNOTATION_MAAS_API_REPLICAS: Final = "maas.opendatahub.io/maas-api-replicas"
# What that annotation and --maas-api-replicas may ask for.
MAAS_API_REPLICAS_MIN: Final = 1
MAAS_API_REPLICAS_MAX: Final = 100
# The platform administrator's ceiling on that annotation (--maas-api-max-replicas, the charm's
# `maas-api-max-replicas`): every tenant's maas-api shares one database and the infra
# namespace's resources (docs/differences.md D35).
DEFAULT_MAAS_API_MAX_REPLICAS: Final = 3
# The Secret maas-api reads its DB_CONNECTION_URL from, in its own namespace: a fixed name in
# maas-api itself, so --maas-api-db-secret can name no other (docs/platform.md §1).
MAAS_API_DB_SECRET: Final = "maas-db-config"
ANNOTATION_OPENDATAHUB_MANAGED: Final = "opendatahub.io/managed"
# On a migrated legacy Tenant (docs/contract.md §6.3), with these values.
ANNOTATION_DEPRECATED_BY: Final = "maas.opendatahub.io/deprecated-by"
ANNOTATION_MIGRATED_TO: Final = "maas.opendatahub.io/migrated-to"
DEPRECATED_BY_VALUE: Final = "MaasTenantConfig"
MIGRATED_TO_VALUE: Final = TENANT_CONFIG_NAME

# Opt-out annotation value on objects the controller must leave alone.
UNMANAGED_VALUE: Final = "false"

# Conditions
CONDITION_READY: Final = "Ready"
# maxLength of a condition's message in each of our CRDs (metav1.Condition's).
CONDITION_MESSAGE_MAX: Final = 32768
CONDITION_DEGRADED: Final = "Degraded"
CONDITION_API_KEYS_REVOKED: Final = "APIKeysRevoked"
# Keys an earlier tenant of the same name left in maas-api's database, revoked before the
# tenant is first Active (docs/contract.md §5.2).
CONDITION_STALE_API_KEYS_REVOKED: Final = "StaleAPIKeysRevoked"

# Phases
PHASE_PENDING: Final = "Pending"
PHASE_ACTIVE: Final = "Active"
PHASE_FAILED: Final = "Failed"
PHASE_TERMINATING: Final = "Terminating"


class Reason:
    """Condition reasons (Ready unless noted); also the reasons of Events
    (docs/differences.md D8)."""

    INVALID_PLACEMENT: Final = "InvalidPlacement"
    LEGACY_TENANT_MIGRATION_FAILED: Final = "LegacyTenantMigrationFailed"
    GATEWAY_CHECK_FAILED: Final = "GatewayCheckFailed"
    GATEWAY_CLAIM_FAILED: Final = "GatewayClaimFailed"
    TENANT_NAMESPACE_PENDING: Final = "TenantNamespacePending"
    TENANT_NAMESPACE_FAILED: Final = "TenantNamespaceFailed"
    TENANT_CONFIG_RECONCILE_FAILED: Final = "TenantConfigReconcileFailed"
    RBAC_RECONCILE_FAILED: Final = "RBACReconcileFailed"
    TENANT_CONFIG_NOT_READY: Final = "TenantConfigNotReady"
    RECONCILED: Final = "Reconciled"
    DELETION_IN_PROGRESS: Final = "DeletionInProgress"
    DELETION_BLOCKED: Final = "DeletionBlocked"
    CLEANUP_FORCED: Final = "CleanupForced"
    INFRA_NAMESPACE_LABEL_FAILED: Final = "InfraNamespaceLabelFailed"  # Degraded
    REVOKED: Final = "Revoked"  # APIKeysRevoked (docs/differences.md D2)
    CLEANUP_FORCED_EVENT: Final = "AITenantCleanupForced"  # Warning Event only
    REVOKING_STALE_API_KEYS: Final = "RevokingStaleAPIKeys"
    STALE_API_KEYS_REVOCATION_FAILED: Final = "StaleAPIKeysRevocationFailed"
    PROVISIONED_EARLIER: Final = "ProvisionedEarlier"  # StaleAPIKeysRevoked
    API_KEYS_NOT_REVOKED_EVENT: Final = "APIKeysNotRevoked"  # Warning Event only


class Message:
    """Fixed condition messages."""

    NAMESPACE_PENDING: Final = "waiting for tenant namespace to become available"
    NAMESPACE_NOT_ACCEPTING: Final = "waiting for tenant namespace to accept tenant resources"
    CONFIG_NOT_READY: Final = "waiting for MaasTenantConfig to report Ready"
    RECONCILED: Final = "AITenant bootstrap resources are reconciled"
    DELETION_IN_PROGRESS: Final = "AITenant deletion cleanup is in progress"
    API_KEYS_REVOKED: Final = "Tenant API keys were revoked (revokedCount={count})"
    STALE_API_KEYS_REVOKED: Final = (
        "API keys left under this tenant's name were revoked before it was first Active "
        "(revokedCount={count})"
    )
    STALE_API_KEYS_PENDING: Final = (
        "waiting for the revocation of API keys left under this tenant's name"
    )
    PROVISIONED_EARLIER: Final = (
        "Active before stale keys were revoked at provisioning: its keys are its own"
    )
    API_KEYS_NOT_REVOKED_EVENT: Final = (
        "Forced cleanup of AITenant {namespace}/{name} could not revoke its API keys, which "
        "stay valid until revoked (its next tenant of this name revokes them first): {error}"
    )
    CLEANUP_FORCED: Final = (
        "Deletion timeout ({timeout}) reached; cleanup finalizer removed without successful "
        "cleanup — API keys may still exist"
    )
    CLEANUP_FORCED_EVENT: Final = (
        "Deletion timeout ({timeout}) reached for AITenant {namespace}/{name}; cleanup finalizer "
        "removed without successful cleanup — API keys may still exist"
    )


# Juju's model admission webhook marks what an application's service account creates (labels
# `app.juju.is/created-by`, `model.juju.is/*`, `app.kubernetes.io/managed-by: juju` unless set)
# and `juju remove-application` deletes what carries all of those. It skips any object
# carrying LABEL_JUJU_DISABLE_WEBHOOK (whatever its value), so every object that must outlive
# the application carries it from creation (docs/design.md §7.1).
LABEL_JUJU_DISABLE_WEBHOOK: Final = "model.juju.is/disable-webhook"
KEPT_BY_JUJU_LABELS: Final = {LABEL_JUJU_DISABLE_WEBHOOK: "true"}
# The labels Juju's webhook adds (besides app.kubernetes.io/managed-by: juju).
JUJU_CREATED_LABELS: Final = ("app.juju.is/created-by", "model.juju.is/name", "model.juju.is/id")
JUJU_MANAGED_BY_VALUE: Final = "juju"

# Labels the controller stamps on the AITenant infrastructure namespace it creates.
MANAGED_NAMESPACE_LABELS: Final = {
    LABEL_GENERATED_NAMESPACE: "true",
    LABEL_MANAGED_BY: MANAGED_BY_VALUE,
    LABEL_PART_OF: MANAGED_BY_VALUE,
    **KEPT_BY_JUJU_LABELS,
}

# Webhook
WEBHOOK_NAME: Final = "vaitenant.kb.io"
WEBHOOK_PATH: Final = "/validate-maas-opendatahub-io-v1alpha1-aitenant"


# Ports (README.md, "Configuration reference")
DEFAULT_WEBHOOK_PORT: Final = 9443
DEFAULT_METRICS_PORT: Final = 8080
DEFAULT_HEALTH_PORT: Final = 8081
# Namespaces whose Authorino pods may call a tenant's maas-api (Kuadrant's and RHCL's).
DEFAULT_AUTHORINO_NAMESPACES: Final = (
    "kuadrant-system",
    "openshift-operators",
    "rh-connectivity-link",
)
# Which pods of the gateway namespace may reach a tenant's maas-api (docs/differences.md D37):
# Gateway API implementations that run a Gateway's own proxy pods (Istio, OpenShift's Gateway)
# label them with the Gateway's name. ``{gateway}`` stands for the tenant's Gateway.
GATEWAY_PLACEHOLDER: Final = "{gateway}"
LABEL_GATEWAY_NAME: Final = "gateway.networking.k8s.io/gateway-name"
DEFAULT_GATEWAY_POD_LABELS: Final = ((LABEL_GATEWAY_NAME, GATEWAY_PLACEHOLDER),)
DEFAULT_GATEWAY_POD_SELECTOR: Final = f"{LABEL_GATEWAY_NAME}={GATEWAY_PLACEHOLDER}"


# Tenant platform: the per-tenant maas-api objects rendered from the MaasTenantConfig
# (docs/differences.md D5, D6 and D9; docs/platform.md). Their labels differ from the AITenant
# children above: they are the platform's own, and the tracking labels are the prune selector.
PLATFORM_PART_OF_VALUE: Final = "models-as-a-service"
PLATFORM_MANAGED_BY_VALUE: Final = CONTROLLER_NAME
# The shared ClusterRole of every tenant's maas-api (manifests/rbac/maas-api-clusterrole.yaml):
# the only roleRef of the ClusterRoleBindings the controller may write (docs/platform.md §2).
MAAS_API_CLUSTER_ROLE: Final = "maas-api"
PLATFORM_FIELD_MANAGER: Final = CONTROLLER_NAME
LABEL_APP_NAME: Final = "app.kubernetes.io/name"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_TENANT_INSTANCE: Final = "maas.opendatahub.io/tenant-instance"
# Pod-template annotation: SHA-256 of the serving certificate's PEM, so a renewal rolls maas-api.
ANNOTATION_SERVING_CERT_SHA256: Final = "maas.opendatahub.io/serving-cert-sha256"


class ConfigReason:
    """Reasons of the MaasTenantConfig Ready condition (the tenant-platform reconciler)."""

    RECONCILED: Final = "Reconciled"
    INVALID_TENANT_CONFIG: Final = "InvalidTenantConfig"
    INVALID_GATEWAY: Final = "InvalidGateway"
    GATEWAY_NOT_READY: Final = "GatewayNotReady"
    MISSING_INPUT: Final = "MissingInput"
    DEPENDENCY_MISSING: Final = "DependencyMissing"
    RENDER_FAILED: Final = "RenderFailed"
    APPLY_FAILED: Final = "ApplyFailed"
    MAAS_API_NOT_AVAILABLE: Final = "MaaSAPINotAvailable"


class ConfigMessage:
    RECONCILED: Final = "MaaS platform manifests applied and maas-api deployment is available"
