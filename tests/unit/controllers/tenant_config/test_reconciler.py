"""The MaasTenantConfig reconciler's pure decisions: readiness, serving certificate, warnings
(what a config asks for: test_spec.py)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import pytest
import trustme
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from aitenant import certificates
from aitenant.controllers.tenant_config import reconciler as tenant_config
from aitenant.controllers.tenant_config.readiness import (
    FirstRollouts,
    deployment_available,
    last_words,
    pod_problem,
    rolled_out_with,
)
from aitenant.controllers.tenant_config.reconciler import TenantConfigReconciler
from aitenant.errors import StepFailed
from aitenant.platform import kinds
from aitenant.platform.apply import Applier
from aitenant.platform.cache import PlatformCache
from aitenant.platform.discovery import ApiDiscovery
from aitenant.platform.prune import TrackedObjects
from aitenant.platform.render import names_for
from aitenant.resources import AITenantView
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.control.controller import Key, Result
from aitenant.settings import Settings


def deployment(generation: int, observed: int, available: str | None) -> dict[str, Any]:
    conds = [] if available is None else [{"type": "Available", "status": available}]
    return {
        "metadata": {"generation": generation},
        "status": {"observedGeneration": observed, "conditions": conds},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (deployment(2, 2, "True"), True),
        (deployment(3, 2, "True"), False),  # a spec change not yet rolled out
        (deployment(2, 2, "False"), False),
        (deployment(1, 0, None), False),
        (None, False),
    ],
)
def test_deployment_available(obj: dict[str, Any] | None, expected: bool) -> None:
    assert deployment_available(obj) is expected


def maas_api_deployment(
    fingerprint: str, *, generation: int = 2, observed: int = 2, updated: int = 2, replicas: int = 2
) -> dict[str, Any]:
    annotations = {"maas.opendatahub.io/serving-cert-sha256": fingerprint}
    return {
        "metadata": {"generation": generation},
        "spec": {"template": {"metadata": {"annotations": annotations}}},
        "status": {
            "observedGeneration": observed,
            "updatedReplicas": updated,
            "replicas": replicas,
        },
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (maas_api_deployment("new"), True),
        (None, True),  # nothing serves at all
        (maas_api_deployment("old"), False),  # the new certificate not applied yet
        (maas_api_deployment("new", generation=3), False),  # not yet observed
        (maas_api_deployment("new", updated=1, replicas=3), False),  # old pods still serve
        # Opted out: we roll nothing of it, so there is nothing to wait for.
        (
            maas_api_deployment("old")
            | {"metadata": {"annotations": {"opendatahub.io/managed": "false"}}},
            True,
        ),
    ],
)
def test_rolled_out_with(obj: dict[str, Any] | None, expected: bool) -> None:
    assert rolled_out_with(obj, "new") is expected


def settings_with_ca(folder: Path) -> Settings:
    """Settings naming a fresh maas-api CA written into ``folder``."""
    authority = trustme.CA()
    cert_file, key_file = folder / "ca.crt", folder / "ca.key"
    authority.cert_pem.write_to_path(str(cert_file))
    authority.private_key_pem.write_to_path(str(key_file))
    return Settings(
        maas_api_ca_file=cert_file, maas_api_ca_key_file=key_file, infra_namespace="infra"
    )


def make_reconciler(settings: Settings) -> TenantConfigReconciler:
    """A reconciler for its pure steps: no request is ever made."""
    client = cast(AsyncClient, object())

    async def no_fetch(path: str) -> Any:
        raise AssertionError(f"unexpected discovery request {path}")

    async def no_cleanup(key: Key, config: dict[str, Any]) -> Result:
        raise AssertionError(f"unexpected cleanup of {key}")

    cache = PlatformCache(client, infra_namespace="infra", gateway_namespace="gateways")
    applier = Applier(client)
    return TenantConfigReconciler(
        client=client,
        settings=settings,
        get_config=lambda _ns, _n: None,
        get_tenant=lambda _ns, _n: None,
        remember=lambda _obj: None,
        reads=CachedReads(client),
        discovery=ApiDiscovery(no_fetch),
        cache=cache,
        applier=applier,
        tracked=TrackedObjects(applier, cache, infra_namespace="infra"),
        cleanup=no_cleanup,
    )


def test_serving_certificate_is_issued_once_and_kept(tmp_path: Path) -> None:
    reconciler = make_reconciler(settings_with_ca(tmp_path))
    first = reconciler.serving_cert(None, "maas-api-red")
    # The cache has not seen the Secret yet: the same certificate, not a second one.
    assert reconciler.serving_cert(None, "maas-api-red") == first
    secret: dict[str, Any] = {
        "metadata": {"name": "maas-api-red-serving-cert"},
        "data": first.secret_data(),
    }
    assert reconciler.serving_cert(secret, "maas-api-red") == first
    # An opted-out Secret is rendered as it is, whatever it holds.
    secret["metadata"]["annotations"] = {"opendatahub.io/managed": "false"}
    secret["data"] = {}
    assert reconciler.serving_cert(secret, "maas-api-red") == certificates.ServingCert("", "", "")


def test_user_metrics_privacy_warning_once_per_generation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reconciler = make_reconciler(Settings())
    key = Key("ai-tenant-red", "default-tenant")
    with caplog.at_level(logging.WARNING, logger="aitenant.controllers.tenant_config.reconciler"):
        for generation in (1, 1, 2):
            reconciler.warn_user_metrics(key, generation)
    warnings = [r for r in caplog.records if "captureUser" in r.getMessage()]
    assert len(warnings) == 2
    assert all(r.levelno == logging.WARNING for r in warnings)
    assert "personal data" in warnings[0].getMessage()


def test_a_first_rollout_holds_the_waiting_status_for_its_window_only() -> None:
    now = [100.0]
    rollouts = FirstRollouts(2.0, clock=lambda: now[0])
    red, blue = Key("ai-tenant-red", "default-tenant"), Key("ai-tenant-blue", "default-tenant")
    # Nothing written yet: no window, the pass says what it found.
    assert rollouts.seconds_left(red, wrote_platform=False) is None
    assert rollouts.seconds_left(red, wrote_platform=True) == 2.0
    now[0] = 101.5
    # A pass woken by the rollout's own events, writing nothing, still waits quietly.
    assert rollouts.seconds_left(red, wrote_platform=False) == 0.5
    assert rollouts.seconds_left(blue, wrote_platform=False) is None
    now[0] = 102.0
    assert rollouts.seconds_left(red, wrote_platform=False) is None  # over: report it
    assert rollouts.seconds_left(red, wrote_platform=False) is None
    assert rollouts.seconds_left(blue, wrote_platform=True) == 2.0
    rollouts.end(blue)  # Available, or the config is gone
    assert rollouts.seconds_left(blue, wrote_platform=False) is None


@pytest.mark.parametrize("served", [True, False])
async def test_backend_tls_follows_what_the_api_server_serves(
    tmp_path: Path, served: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    reconciler = make_reconciler(settings_with_ca(tmp_path))
    # An older Gateway API serves HTTPRoutes but no BackendTLSPolicy at v1.
    resources = ["httproutes", *(["backendtlspolicies"] if served else [])]

    async def fetch(path: str) -> Any:
        assert path == "/apis/gateway.networking.k8s.io/v1"
        return {"resources": [{"name": r} for r in resources]}

    async def nothing_live(kind: Any, namespace: str | None, name: str) -> None:
        return None

    reconciler.discovery = ApiDiscovery(fetch)
    monkeypatch.setattr(reconciler.cache, "read", nothing_live)
    names = names_for("red", "red", "maas-default-gateway")
    charm_ca = (tmp_path / "ca.crt").read_text()
    serving = reconciler.serving_cert(None, "maas-api-red")
    assert await reconciler.backend_ca(serving, names) == (charm_ca if served else None)
    # An opted-out serving Secret's own CA, when it names one, is the one that signed it.
    other = certificates.ServingCert("cert", "key", "other CA")
    assert await reconciler.backend_ca(other, names) == ("other CA" if served else None)


async def test_backend_tls_trusts_the_old_ca_until_the_new_certificate_rolled_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reconciler = make_reconciler(settings_with_ca(tmp_path))

    async def fetch(path: str) -> Any:
        return {"resources": [{"name": "backendtlspolicies"}]}

    old_ca = trustme.CA().cert_pem.bytes().decode()
    live: dict[str, dict[str, Any]] = {"ConfigMap": {"data": {"ca.crt": old_ca}}}

    async def read(kind: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert namespace == "infra"
        assert (
            name
            == {"ConfigMap": "maas-api-red-backend-ca", "Deployment": "maas-api-red"}[kind.kind]
        )
        return live.get(kind.kind)

    reconciler.discovery = ApiDiscovery(fetch)
    monkeypatch.setattr(reconciler.cache, "read", read)
    names = names_for("red", "red", "maas-default-gateway")
    new_ca = (tmp_path / "ca.crt").read_text()
    # The charm's CA changed: a new certificate, while the pods serve one of the old CA.
    serving = reconciler.serving_cert(None, "maas-api-red")
    live["Deployment"] = maas_api_deployment("the old certificate")
    both = await reconciler.backend_ca(serving, names)
    assert both == certificates.gateway_trust_bundle(new_ca, old_ca, rolled_out=False) != new_ca
    # Applied and rolling out: still both.
    live["ConfigMap"] = {"data": {"ca.crt": both}}
    live["Deployment"] = maas_api_deployment(serving.pem_sha256, observed=1)
    assert await reconciler.backend_ca(serving, names) == both
    # Rolled out: the new CA alone.
    live["Deployment"] = maas_api_deployment(serving.pem_sha256)
    assert await reconciler.backend_ca(serving, names) == new_ca


async def test_a_transient_discovery_404_never_prunes_the_backend_tls_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34 item 6, checked: BackendTLSPolicy is rendered only where discovery lists it, so a
    404 could drop it from the render and have the prune delete it. It cannot: it shares
    its group/version with HTTPRoute, which the pass requires, so a 404 for that version stops
    the pass as DependencyMissing before anything is rendered, applied or pruned."""
    assert kinds.BACKEND_TLS_POLICY.api_version == kinds.HTTP_ROUTE.api_version
    reconciler = make_reconciler(settings_with_ca(tmp_path))

    async def not_found(path: str) -> Any:
        return None  # what http_fetch answers for a 404

    async def owner(config: Any) -> AITenantView:
        return AITenantView({"metadata": {"name": "red", "namespace": "ai-tenants"}, "status": {}})

    async def gateway(owner: AITenantView) -> tuple[str, str]:
        return "gateways", "red"

    steps: list[str] = []

    async def pruned(*args: Any) -> None:
        steps.append("prune")

    reconciler.discovery = ApiDiscovery(not_found)
    monkeypatch.setattr(reconciler, "owner_of", owner)
    monkeypatch.setattr(tenant_config, "check_identity", lambda config, owner: "red")
    monkeypatch.setattr(reconciler, "platform_context", gateway)
    monkeypatch.setattr(reconciler, "prune", pruned)
    monkeypatch.setattr(reconciler, "render", lambda ctx: steps.append("render") or [])
    config = {"metadata": {"name": "default-tenant", "namespace": "ai-tenant-red"}}
    with pytest.raises(StepFailed) as failure:
        await reconciler._reconcile_live(  # pyright: ignore[reportPrivateUsage]
            Key("ai-tenant-red", "default-tenant"), config, cast(Any, None)
        )
    assert failure.value.reason == "DependencyMissing"
    assert "HTTPRoute" in failure.value.message
    assert steps == []


def pod(status: dict[str, Any]) -> Pod:
    return cast(Pod, Pod.from_dict({"metadata": {"name": "maas-api-x-1"}, "status": status}))


def container(state: dict[str, Any], last: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": "maas-api",
        "ready": False,
        "restartCount": 4,
        "image": "i",
        "imageID": "",
        "state": state,
        "lastState": last or {},
    }


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (None, ""),
        ("\n\n", ""),
        ("2026-12-04T17:40:01.123Z\tERROR\tno database", "ERROR no database"),
        (
            '{"level":"error","ts":1733333,"msg":"exiting","error":"no gateway"}',
            "exiting no gateway",
        ),
        ("x" * 300, "x" * 199 + "…"),
    ],
)
def test_last_words_of_a_crashed_container(message: str | None, expected: str) -> None:
    assert last_words(message) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        # A crash loop: the back-off message and the restart count change every restart, so
        # they are left out (no status write per restart).
        (
            {
                "containerStatuses": [
                    container(
                        {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                        {"terminated": {"exitCode": 1}},
                    )
                ]
            },
            "container maas-api CrashLoopBackOff, last exited with code 1",
        ),
        # What it logged last (FallbackToLogsOnError), the same at every restart.
        (
            {
                "containerStatuses": [
                    container(
                        {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                        {
                            "terminated": {
                                "exitCode": 1,
                                "message": "2026/12/04 17:40:00 starting\n"
                                "2026/12/04 17:40:01 gateway service not found\n",
                            }
                        },
                    )
                ]
            },
            "container maas-api CrashLoopBackOff, last exited with code 1: "
            "gateway service not found",
        ),
        (
            {
                "containerStatuses": [
                    container(
                        {
                            "waiting": {
                                "reason": "ErrImageNeverPull",
                                "message": "image not present",
                            }
                        }
                    )
                ]
            },
            "container maas-api ErrImageNeverPull (image not present)",
        ),
        (
            {"containerStatuses": [container({"running": {}})]},
            "container maas-api running, not ready (readiness probe)",
        ),
        (
            {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/1 nodes are available",
                    }
                ]
            },
            "not scheduled (Unschedulable: 0/1 nodes are available)",
        ),
        ({"containerStatuses": [{**container({"running": {}}), "ready": True}]}, None),
        ({}, None),
    ],
)
def test_pod_problem_names_what_holds_maas_api_back(
    status: dict[str, Any], expected: str | None
) -> None:
    assert pod_problem(pod(status)) == expected
