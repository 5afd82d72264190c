"""The names of the charm's objects can never be Juju's.

With `--trust` Juju creates a ClusterRole and a ClusterRoleBinding named `<model>-<app>`; a
binding of ours of that name cannot be applied (roleRef is immutable) and removing it would
remove the application's trust (README.md, "Controller RBAC"). And every object the charm
writes carries the label Juju's model webhook skips (README.md, "Removing the charm").
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from lightkube.core.resource import Resource

from aitenant import contract
from aitenant_charm import cluster_manifests
from aitenant_charm.cluster_manifests import (
    CLUSTER_NAME_LIMIT,
    RoleNamespaces,
    cluster_scoped_name,
    namespaced_rbac_prefix,
)

# Juju's names: an application starts with a letter, and a hyphen is followed by a part that
# holds a letter; a model is a Kubernetes namespace (a DNS label).
APP_NAME = r"[a-z][a-z0-9]*(?:-[a-z0-9]*[a-z][a-z0-9]*)*"
MODEL_NAME = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
# Every `<model>-<app>` Juju can give its trust ClusterRole and ClusterRoleBinding.
JUJU_TRUST_NAME = re.compile(rf"{MODEL_NAME}-{APP_NAME}")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

apps = st.from_regex(rf"\A{APP_NAME}\Z").filter(lambda name: len(name) <= 63)
models = st.from_regex(rf"\A{MODEL_NAME}\Z")
ROLE_SUFFIXES = ("-leader-election", "-platform", "-claims", "-gateway")


def names_written(app: str, model: str) -> list[str]:
    """Every name of a cluster-scoped object, and every Role and RoleBinding, that the charm
    writes for one deployment (the NetworkPolicy, `<app>-webhook`, is in the model)."""
    name = cluster_scoped_name(app, model)
    objects: list[Resource] = [
        cluster_manifests.construct_cluster_role_binding(
            name=name, service_account=app, namespace=model
        ),
        *cluster_manifests.construct_binding_policy(
            name=name, service_account=app, namespace=model, own_binding=name
        ),
        *cluster_manifests.construct_namespaced_rbac(
            prefix=namespaced_rbac_prefix(app, model),
            controller_namespace=model,
            namespaces=RoleNamespaces(infra="infra", aitenant="tenants", gateway="gateways"),
            service_account=app,
        ),
    ]
    return [*cluster_manifests.names(objects), name]


@given(app=apps, model=models)
def test_no_name_the_charm_writes_is_one_juju_gives(app: str, model: str) -> None:
    for name in names_written(app, model):
        assert not JUJU_TRUST_NAME.fullmatch(name), name
        assert name != f"{model}-{app}"


def test_names_that_would_meet_juju_s_with_a_plain_prefix() -> None:
    # `aitenant-<model>-<app>` would be Juju's name for model `aitenant` (or `aitenant-m`).
    for app, model in (("aitenant-k8s", "m"), ("a", "m-x"), ("k8s", "aitenant")):
        name = cluster_scoped_name(app, model)
        assert name == f"aitenant.{model}.{app}"
        assert not JUJU_TRUST_NAME.fullmatch(name)
    assert JUJU_TRUST_NAME.fullmatch("aitenant-m-aitenant-k8s")  # the regex does match Juju's


@given(first=st.tuples(apps, models), second=st.tuples(apps, models))
def test_two_deployments_never_share_a_name(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    if first != second:
        assert cluster_scoped_name(*first) != cluster_scoped_name(*second)


def test_hyphens_do_not_make_two_deployments_one() -> None:
    # `<model>-<app>` named both of these `m-a-b`.
    assert cluster_scoped_name("b", "m-a") != cluster_scoped_name("a-b", "m")


@given(app=st.text("abc-", min_size=200, max_size=240).map(lambda s: "a" + s + "z"), model=models)
def test_a_long_name_is_cut_and_hashed_deterministically(app: str, model: str) -> None:
    name = cluster_scoped_name(app, model)
    assert len(name) <= CLUSTER_NAME_LIMIT
    assert DNS_SUBDOMAIN.fullmatch(name), name
    assert len(name + max(ROLE_SUFFIXES, key=len)) <= 253
    assert name == cluster_scoped_name(app, model)
    assert not JUJU_TRUST_NAME.fullmatch(name)
    # Two long names that differ only past the cut differ in their hash.
    assert cluster_scoped_name(app + "x", model) != name


@given(app=apps, model=models)
def test_a_name_of_juju_s_lengths_is_kept_whole(app: str, model: str) -> None:
    name = cluster_scoped_name(app, model)
    assert name == f"aitenant.{model}.{app}"
    assert DNS_SUBDOMAIN.fullmatch(name)


def constructed(app: str = "aitenant-k8s", model: str = "maas") -> list[Any]:
    """Every object the charm constructs or loads to write to the cluster."""
    name = cluster_scoped_name(app, model)
    return [
        *cluster_manifests.load_crds(),
        *cluster_manifests.load_cluster_roles(),
        cluster_manifests.construct_cluster_role_binding(
            name=name, service_account=app, namespace=model
        ),
        *cluster_manifests.construct_binding_policy(
            name=name, service_account=app, namespace=model, own_binding=name
        ),
        cluster_manifests.construct_webhook_configuration(
            name=name, ca_bundle_pem=b"ca", service_name=app, service_namespace=model, port=9443
        ),
        cluster_manifests.construct_webhook_network_policy(
            app=app,
            namespace=model,
            webhook_port=9443,
            open_ports=(8080,),
            api_server_addresses=("10.0.0.1",),
        ),
        *cluster_manifests.construct_namespaced_rbac(
            prefix=namespaced_rbac_prefix(app, model),
            controller_namespace=model,
            namespaces=RoleNamespaces(infra="infra", aitenant="tenants", gateway="gateways"),
            service_account=app,
        ),
    ]


def test_every_object_the_charm_constructs_is_kept_by_juju() -> None:
    objects = constructed()
    kinds = {type(obj).__name__ for obj in objects}
    assert kinds == {
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
    }
    unlabelled = [
        f"{type(obj).__name__} {obj.metadata.name}"
        for obj in objects
        if not (obj.metadata.labels or {}).items() >= contract.KEPT_BY_JUJU_LABELS.items()
    ]
    assert unlabelled == []
