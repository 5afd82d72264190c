"""The status ladder: one test per rung, in the ladder's order of priority."""

from __future__ import annotations

import json
from unittest.mock import MagicMock

import ops
import pytest
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.rbac_authorization_v1 import Role
from tests.juju.kit import APP, DEFAULT_MAAS_API, CharmKit, api_error

import charm
from aitenant_charm.cluster_manifests import AITENANT
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from aitenant_charm.workload import CONTAINER, SERVICE


def test_missing_trust_blocks_with_the_exact_command(kit: CharmKit):
    # GIVEN the API answers 403 to the charm's list call (no `juju trust`)
    kit.kube.list.side_effect = api_error(403, "forbidden")
    # WHEN the charm reconciles
    kit.make_ready()
    # THEN it is blocked with the command that fixes it, and applied nothing
    assert kit.status() == ops.BlockedStatus(f"run `juju trust {APP} --scope=cluster`")
    kit.kube.apply.assert_not_called()


def test_trust_is_checked_once_per_dispatch(kit: CharmKit):
    # GIVEN a trusted cluster
    # WHEN one event reconciles (its hook ends with collect-status)
    kit.reconcile()
    # THEN the API was probed once (a CRD list), not again by collect-status
    crd_lists = [c for c in kit.kube.list.call_args_list if c.args[0] is CustomResourceDefinition]
    assert len(crd_lists) == 1


def test_unreachable_api_waits(kit: CharmKit):
    # GIVEN the API server answers 503
    kit.kube.list.side_effect = api_error(503, "etcd unavailable")
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN the unit waits and says why
    status = kit.status()
    assert isinstance(status, ops.WaitingStatus)
    assert "etcd unavailable" in status.message


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("deletion-timeout", "ten minutes", "invalid duration"),
        ("deletion-timeout", "-5m", "negative"),
        ("log-level", "loud", "'loud' is not one of debug, info, warning, error"),
        ("aitenant-namespace", "Not_A_Namespace", "not a valid namespace name"),
        ("aitenant-namespace", "  ", "must be non-empty"),
        ("gateway-name", "bad/name", "not a valid Gateway name for an AITenant"),
        # The AITenant CRD takes a DNS label: dotted or longer names blocked the default tenant.
        ("gateway-name", "gw.example", "not a valid Gateway name for an AITenant"),
        ("gateway-name", "g" * 64, "at most 63 characters"),
        ("authorino-namespaces", "kuadrant-system,Bad_NS", "'Bad_NS' is not a valid namespace"),
        ("authorino-namespaces", " , ", "must name at least one namespace"),
        ("gateway-pod-selector", "istio.io/gateway-name", "is not key=value"),
        ("gateway-pod-selector", "a=b,a=c", '"a" is given twice'),
        ("gateway-pod-selector", "x={tenant}", "is not a label value"),
    ],
)
def test_invalid_config_blocks_naming_the_option(
    ready: CharmKit, option: str, value: str, reason: str
):
    # GIVEN a healthy deployment
    # WHEN an option gets an invalid value
    ready.update_config({option: value})
    # THEN the unit is blocked, naming the option and the reason
    status = ready.status()
    assert isinstance(status, ops.BlockedStatus)
    assert status.message.startswith(f"invalid config {option}: ")
    assert reason in status.message


def test_invalid_config_keeps_the_running_service(ready: CharmKit):
    # GIVEN a planned controller
    before = ready.service().command
    # WHEN config becomes invalid
    ready.configure(deletion_timeout="soon")
    # THEN the service is left as it was (no silent fallback, no half-built command)
    assert ready.service().command == before


def test_cluster_apply_failure_waits(kit: CharmKit):
    # GIVEN the API server throttles applies
    kit.kube.apply.side_effect = api_error(429, "too many requests")
    # WHEN the charm reconciles
    kit.make_ready()
    # THEN the unit waits for the next event and says what failed
    status = kit.status()
    assert isinstance(status, ops.WaitingStatus)
    assert "429" in status.message


def test_unreachable_container_waits(kit: CharmKit):
    # GIVEN relations in place but Pebble not answering
    kit.set_container(can_connect=False)
    kit.make_ready()
    # WHEN the status is computed
    # THEN the unit waits for the container
    assert kit.status() == ops.WaitingStatus(f"waiting for the {CONTAINER} container")


def test_no_gateway_from_config_or_relation_blocks(kit: CharmKit):
    # GIVEN maas-api but neither gateway options nor the gateway relation
    kit.integrate_maas_api()
    kit.reconcile()
    # WHEN the status is computed
    # THEN it says which options or which relation would fix it
    assert kit.status() == ops.BlockedStatus(
        "gateway unknown: set `gateway-namespace` and `gateway-name` or integrate `gateway`"
    )


def test_gateway_name_only_blocks_on_the_namespace(kit: CharmKit):
    # GIVEN only gateway-name in config and no gateway relation
    kit.integrate_maas_api()
    kit.configure(gateway_name="maas-gateway")
    # WHEN the status is computed
    # THEN only the missing namespace is named
    assert kit.status() == ops.BlockedStatus(
        "gateway unknown: set `gateway-namespace` or integrate `gateway`"
    )


def test_gateway_from_config_alone_is_enough(kit: CharmKit):
    # GIVEN both gateway options in config and no gateway relation
    kit.integrate_maas_api()
    kit.configure(gateway_namespace="istio-gw", gateway_name="maas-gateway")
    # WHEN the status is computed
    # THEN the unit is active
    assert kit.status() == ops.ActiveStatus("0 tenants")


def test_missing_maas_api_relation_blocks(kit: CharmKit):
    # GIVEN the gateway but no maas-api relation
    kit.integrate_gateway()
    kit.reconcile()
    # WHEN the status is computed
    # THEN it asks for the relation
    assert kit.status() == ops.BlockedStatus("missing relation: integrate `maas-api`")


def test_maas_api_relation_without_data_waits(kit: CharmKit):
    # GIVEN a maas-api relation whose provider has not published yet
    kit.integrate_gateway()
    kit.integrate_maas_api(None)
    kit.reconcile()
    # WHEN the status is computed
    # THEN the unit waits for the data
    assert kit.status() == ops.WaitingStatus("waiting for `maas-api` relation data")


def test_invalid_maas_api_data_blocks(kit: CharmKit):
    # GIVEN a provider that published a bad port
    kit.integrate_gateway()
    relation_id = kit.integrate_maas_api()
    kit.update_relation_data(relation_id, app_data={"service_port": json.dumps(0)})
    # WHEN the status is computed
    # THEN it says which field is wrong
    status = kit.status()
    assert isinstance(status, ops.BlockedStatus)
    assert "service_port" in status.message


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("infra_namespace", "kube-system", 'infra_namespace "kube-system" is a Kubernetes system'),
        ("infra_namespace", "ai-tenants", "is the AITenant namespace"),
        ("infra_namespace", "ai-tenant-red", "is a tenant namespace"),
        ("infra_namespace", "models-as-a-service", "is the default tenant's namespace"),
        ("db_secret", "maas-db-other", 'db_secret "maas-db-other": maas-api reads'),
    ],
)
def test_unsafe_maas_api_data_blocks_and_plans_nothing(
    kit: CharmKit, field: str, value: str, reason: str
):
    # GIVEN a provider that names a namespace the controller must get no rights in, or a
    # database Secret maas-api never reads
    kit.integrate_gateway()
    kit.integrate_maas_api(DEFAULT_MAAS_API.model_copy(update={field: value}))
    kit.reconcile()
    # WHEN the status is computed
    status = kit.status()
    # THEN the unit is blocked naming the field, and no controller or Role is planned from it
    assert isinstance(status, ops.BlockedStatus)
    assert status.message.startswith("refused `maas-api` relation data: ")
    assert reason in status.message
    assert kit.plan().services == {}
    platform_roles = [r for r in kit.applied(Role) if r.metadata.name.endswith("-platform")]
    assert all(r.metadata.namespace != value for r in platform_roles if field == "infra_namespace")


def test_infra_namespace_option_overrides_the_relation(kit: CharmKit):
    # GIVEN a provider naming a system namespace, and the operator's own infra-namespace
    kit.integrate_gateway()
    relation_id = kit.integrate_maas_api()
    data = {"infra_namespace": json.dumps("kube-system")}
    kit.update_relation_data(relation_id, app_data=data)
    kit.configure(infra_namespace="maas-infra")
    # WHEN the status is computed
    # THEN the operator's choice is used, and the unit is active
    assert kit.status() == ops.ActiveStatus("0 tenants")
    assert kit.flags()["infra-namespace"] == "maas-infra"


def test_certificate_not_yet_issued_waits(kit: CharmKit):
    # GIVEN a certificates relation whose provider has not answered the request
    kit.relate(charm.CERTIFICATES_RELATION, "self-signed-certificates")
    kit.make_ready()
    # WHEN the status is computed
    # THEN the unit waits for the certificate, and nothing is planned yet
    assert kit.status() == ops.WaitingStatus(
        "waiting for the webhook certificate from `certificates`"
    )
    assert SERVICE not in kit.plan().services


def test_non_leader_waits_for_the_internal_ca(kit: CharmKit):
    # GIVEN a non-leader unit and a leader that has not created the CA yet
    kit.set_leader(False)
    # WHEN the unit reconciles
    kit.make_ready()
    # THEN it waits for the leader and does not create the CA itself
    assert kit.status() == ops.WaitingStatus("waiting for the leader to create the internal CA")
    assert not kit.has_secret(INTERNAL_CA_LABEL)


def test_failing_readyz_waits(ready: CharmKit):
    # GIVEN a planned controller whose ready check fails
    ready.set_check("ready", ops.pebble.CheckStatus.DOWN)
    # WHEN the next hook computes the status
    ready.emit("update_status")
    # THEN the unit waits for the controller
    assert ready.status() == ops.WaitingStatus("controller not ready: /readyz failing")


def test_leader_is_active(ready: CharmKit):
    # GIVEN everything in place
    # WHEN the status is computed
    # THEN the leader is active and counts the tenants
    assert ready.status() == ops.ActiveStatus("0 tenants")


def test_leader_status_counts_tenants_with_one_single_item_list(ready: CharmKit, kube: MagicMock):
    # GIVEN 1,500 AITenants
    ready.private.count.return_value = 1500
    kube.list.reset_mock()
    ready.private.count.reset_mock()
    # WHEN the next hook computes the status
    ready.emit("update_status")
    status = ready.status()
    # THEN the leader reports them
    assert status == ops.ActiveStatus("1500 tenants")
    # AND it counted the AITenants with the single-item list (count_objects, whose request
    # test_charm_lightkube.py checks on the wire), never paging through them
    (call,) = ready.private.count.call_args_list
    assert call.args == (kube, AITENANT)
    assert not [c for c in kube.list.call_args_list if c.args and c.args[0] is AITENANT]


def test_status_counts_one_tenant_in_the_singular(ready: CharmKit):
    # GIVEN a single AITenant
    ready.private.count.return_value = 1
    # WHEN the next hook computes the status
    ready.emit("update_status")
    # THEN it says one tenant
    assert ready.status() == ops.ActiveStatus("1 tenant")


def test_non_leader_is_active_standby(ready: CharmKit):
    # GIVEN a ready deployment whose unit loses leadership
    ready.set_leader(False)
    ready.reconcile()
    # WHEN the status is computed
    # THEN it is active and says the controller elects its own leader
    assert ready.status() == ops.ActiveStatus("standby (leader election is the controller's)")


def test_ladder_order_trust_before_config(kit: CharmKit):
    # GIVEN both missing trust and an invalid option
    kit.kube.list.side_effect = api_error(403)
    kit.configure(log_level="loud")
    # WHEN the status is computed
    # THEN trust wins: it is the higher rung
    assert kit.status() == ops.BlockedStatus(f"run `juju trust {APP} --scope=cluster`")


def test_ladder_order_gateway_before_maas_api(kit: CharmKit):
    # GIVEN neither gateway nor maas-api
    kit.reconcile()
    # WHEN the status is computed
    # THEN the gateway is reported first
    status = kit.status()
    assert isinstance(status, ops.BlockedStatus)
    assert status.message.startswith("gateway unknown")
    assert DEFAULT_MAAS_API.image not in status.message


def test_gateway_relation_removed_blocks_again(ready: CharmKit):
    # GIVEN an active deployment whose gateway comes from the relation
    [relation] = ready.state.get_relations(charm.GATEWAY_RELATION)
    # WHEN the gateway relation is removed
    ready.remove_relation(relation.id)
    # THEN the unit is blocked on the gateway again
    status = ready.status()
    assert isinstance(status, ops.BlockedStatus)
    assert status.message.startswith("gateway unknown")
