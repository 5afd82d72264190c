"""From charm config and relation data to the controller's command line. Pure functions.

Precedence, for every value that both a config option and a relation can supply: a non-empty
config option wins, then the relation, then the controller's own default (flag left out).
"""

from __future__ import annotations

from dataclasses import dataclass

from aitenant import contract
from aitenant_charm.cluster_manifests import JUJU_APP_LABEL
from aitenant_charm.config import CharmConfig
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData

DEFAULT_MAAS_API_PORT = 8443


@dataclass(frozen=True)
class Gateway:
    """Where tenant Gateways live, and the default tenant's Gateway."""

    namespace: str
    name: str


@dataclass(frozen=True)
class GatewayFacts:
    """What the ``gateway`` relation said (namespace and Gateway name), if anything."""

    namespace: str = ""
    name: str = ""


def resolve_gateway(
    config: CharmConfig, related: GatewayFacts | None
) -> tuple[Gateway | None, list[str]]:
    """The gateway to pass to the controller, or None and the config options still missing."""
    related = related or GatewayFacts()
    namespace = config.gateway_namespace or related.namespace
    name = config.gateway_name or related.name
    missing = [
        option
        for option, value in (("gateway-namespace", namespace), ("gateway-name", name))
        if not value
    ]
    if missing:
        return None, missing
    return Gateway(namespace=namespace, name=name), []


@dataclass(frozen=True)
class WorkloadPaths:
    """Files the charm writes into the workload container."""

    webhook_cert_dir: str
    maas_api_ca_file: str
    maas_api_ca_key_file: str


@dataclass(frozen=True)
class Ports:
    """Ports the controller listens on (see ``aitenant.contract``)."""

    webhook: int
    health: int
    metrics: int


@dataclass(frozen=True)
class ControllerInputs:
    """Everything the command line is built from; a complete set means the service can run."""

    config: CharmConfig
    app: str  # the Juju application: its pods are the controller's pods
    gateway: Gateway
    maas_api: MaasApiAppData
    paths: WorkloadPaths
    ports: Ports


def _bool(value: bool) -> str:
    return "true" if value else "false"


def maas_api_url_template(port: int) -> str | None:
    """URL template for maas-api's key-revocation endpoint, or None for the controller default."""
    if port == DEFAULT_MAAS_API_PORT:
        return None
    return f"https://{{service}}.{{namespace}}.svc:{port}/internal/v1/tenants/{{tenant}}/api-keys"


def infra_namespace_of(config: CharmConfig, maas_api: MaasApiAppData | None) -> str:
    """The infra namespace to pass to the controller; "" leaves the controller's default (its
    own namespace)."""
    return config.infra_namespace or (maas_api.infra_namespace if maas_api else "")


def maas_api_refusal(config: CharmConfig, maas_api: MaasApiAppData) -> str | None:
    """Why the `maas-api` relation's data may not be used, or None. The charm writes a Role
    granting the controller Secrets and Deployments in the infra namespace the relation names,
    so that namespace may not be a system namespace or one the tenants' objects live in; and
    maas-api reads only one database Secret (docs/platform.md §1)."""
    if maas_api.db_secret != contract.MAAS_API_DB_SECRET:
        return (
            f'db_secret "{maas_api.db_secret}": maas-api reads its database URL only from '
            f"Secret {contract.MAAS_API_DB_SECRET}"
        )
    namespace = maas_api.infra_namespace
    if config.infra_namespace:
        return None  # the operator's own choice wins over the relation's
    refused = {
        config.aitenant_namespace: "the AITenant namespace (`aitenant-namespace`)",
        config.maas_subscription_namespace: "the default tenant's namespace",
    }
    why = refused.get(namespace)
    if namespace.startswith("kube-"):
        why = "a Kubernetes system namespace"
    elif namespace.startswith(contract.TENANT_NAMESPACE_PREFIX):
        why = "a tenant namespace"
    if why is None:
        return None
    return (
        f'infra_namespace "{namespace}" is {why}: the controller would get rights to Secrets '
        "and Deployments there; set `infra-namespace` or fix the maas-api charm"
    )


def controller_args(inputs: ControllerInputs) -> list[str]:
    """``aitenant-controller`` and its flags, each as ``--flag=value``."""
    config = inputs.config
    infra_namespace = infra_namespace_of(config, inputs.maas_api)
    args = [
        "aitenant-controller",
        f"--aitenant-namespace={config.aitenant_namespace}",
        f"--gateway-namespace={inputs.gateway.namespace}",
        f"--gateway-name={inputs.gateway.name}",
        f"--maas-subscription-namespace={config.maas_subscription_namespace}",
        f"--enable-tenant-namespace-discovery={_bool(config.enable_tenant_namespace_discovery)}",
        f"--deletion-timeout={config.deletion_timeout}",
        f"--manage-default-tenant={_bool(config.manage_default_tenant)}",
        f"--authorino-namespaces={config.authorino_namespaces}",
        # Only this application's pods may reach maas-api from the model's namespace, where
        # other charms run too (docs/differences.md D37).
        f"--controller-pod-selector={JUJU_APP_LABEL}={inputs.app}",
        f"--gateway-pod-selector={config.gateway_pod_selector}",
        f"--log-level={config.log_level}",
        f"--maas-api-max-replicas={config.maas_api_max_replicas}",
        f"--maas-api-image={inputs.maas_api.image}",
        f"--maas-api-db-secret={inputs.maas_api.db_secret}",
        f"--maas-api-ca-file={inputs.paths.maas_api_ca_file}",
        f"--maas-api-ca-key-file={inputs.paths.maas_api_ca_key_file}",
        f"--webhook-port={inputs.ports.webhook}",
        f"--webhook-cert-dir={inputs.paths.webhook_cert_dir}",
        f"--health-port={inputs.ports.health}",
        f"--metrics-port={inputs.ports.metrics}",
        # Every unit runs a replica; they elect one reconciler through a Lease.
        "--leader-elect=true",
    ]
    if infra_namespace:
        args.append(f"--infra-namespace={infra_namespace}")
    template = maas_api_url_template(inputs.maas_api.service_port)
    if template:
        args.append(f"--maas-api-url-template={template}")
    return args
