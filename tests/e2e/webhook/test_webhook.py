"""The admission webhook called by the real API server over HTTPS (docs/contract.md §2,
docs/differences.md D3, D4)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import trustme
from devtools import samples
from devtools.cluster import LocalCluster
from lightkube import ApiError, AsyncClient
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.types import PatchType

from aitenant import contract
from aitenant.resources import AITenant, Config, LegacyTenant, MaasTenantConfig
from aitenant.webhook.config import render_webhook_configuration

from ..harness import AITENANT_NS, GATEWAY_NS, RunningController, WebhookTLS, eventually
from ..tenants import Names, get_tenant, wait_phase

pytestmark = pytest.mark.e2e

CONFIG_NAME = "aitenant-e2e"


def as_vwc(body: dict[str, Any]) -> ValidatingWebhookConfiguration:
    return cast(ValidatingWebhookConfiguration, ValidatingWebhookConfiguration.from_dict(body))


async def register(
    kube: AsyncClient, tls: WebhookTLS, port: int | None = None, name: str = CONFIG_NAME
) -> None:
    body = render_webhook_configuration(
        name=name,
        ca_bundle_pem=tls.ca.cert_pem.bytes(),
        url=f"https://127.0.0.1:{port or tls.port}{contract.WEBHOOK_PATH}",
    )
    await kube.apply(as_vwc(body), field_manager="aitenant-tests", force=True)


@pytest.fixture
async def admission(
    kube: AsyncClient, controller: RunningController, webhook_tls: WebhookTLS
) -> AsyncIterator[WebhookTLS]:
    """The webhook registered with the API server for the duration of one test."""
    await register(kube, webhook_tls)
    await until_webhook_answers(kube, f"probe-{id(webhook_tls)}")
    yield webhook_tls
    await kube.delete(ValidatingWebhookConfiguration, CONFIG_NAME)


async def until_webhook_answers(kube: AsyncClient, probe: str) -> None:
    """The API server picks up webhook configurations asynchronously: wait until a create
    outside the infrastructure namespace is refused by us."""

    async def active() -> bool:
        try:
            await samples.create_aitenant(kube, samples.aitenant(probe, "default"))
        except ApiError as exc:
            return "admission webhook" in (exc.status.message or "")
        await kube.delete(AITenant, probe, namespace="default")
        return False

    await eventually(active, timeout=20, interval=0.2)


async def denial(kube: AsyncClient, body: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as info:
        await samples.create_aitenant(kube, body)
    return info.value.status.message or ""


def denied(message: str) -> str:
    return f'admission webhook "vaitenant.kb.io" denied the request: {message}'


async def test_create_outside_the_infrastructure_namespace_is_denied_and_not_stored(
    cluster: LocalCluster, kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    name = unique("outside")
    body = samples.aitenant(name, "default")
    message = await denial(kube, body)
    assert message == denied(
        f"AITenant default/{name} must be created in the configured AITenant infrastructure "
        'namespace "ai-tenants"'
    )
    with pytest.raises(ApiError):
        await kube.get(AITenant, name, namespace="default")
    # kubectl shows the same words to an operator.
    manifest = (
        f"apiVersion: {contract.API_VERSION}\nkind: AITenant\n"
        f"metadata: {{name: {name}, namespace: default}}\n"
    )
    # The webhook runs on this event loop: kubectl must not block it.
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "apply",
        "-f",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate(manifest.encode())
    assert proc.returncode != 0
    stderr = err.decode()
    assert 'admission webhook "vaitenant.kb.io" denied the request' in stderr
    assert '"ai-tenants"' in stderr


async def test_shared_gateway_denied_on_create_and_on_update(
    kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    first, second, gw = unique("share-a"), unique("share-b"), unique("gw-shared")
    await samples.create_gateway(kube, samples.gateway(gw, GATEWAY_NS))
    await samples.create_aitenant(kube, samples.aitenant(first, AITENANT_NS, gateway_name=gw))
    expected = denied(
        f"gateway {GATEWAY_NS}/{gw} is already in use by AITenant {AITENANT_NS}/{first}; each "
        "AITenant requires a dedicated Gateway for isolation; please create a new Gateway for "
        "this tenant or specify a different gateway name in spec.gateway.name"
    )

    async def create_denied() -> str | None:  # once the cache has seen the first tenant
        try:
            await samples.create_aitenant(
                kube, samples.aitenant(second, AITENANT_NS, gateway_name=gw)
            )
        except ApiError as exc:
            return exc.status.message
        await kube.delete(AITenant, second, namespace=AITENANT_NS)
        return None

    assert await eventually(create_denied) == expected

    # A tenant on its own gateway may not move onto the taken one.
    await samples.create_aitenant(kube, samples.aitenant(second, AITENANT_NS))
    with pytest.raises(ApiError) as info:
        await kube.patch(
            AITenant,
            second,
            {"spec": {"gateway": {"name": gw}}},
            namespace=AITENANT_NS,
            patch_type=PatchType.MERGE,
        )
    assert info.value.status.message == expected


async def test_two_tenants_made_before_the_webhook_on_one_gateway_can_both_be_deleted(
    kube: AsyncClient,
    controller: RunningController,
    webhook_tls: WebhookTLS,
    unique: Names,
) -> None:
    """docs/differences.md D29: finalizer patches of tenants sharing a Gateway are admitted."""
    first, second, gw = unique("pre-a"), unique("pre-b"), unique("gw-pre")
    await samples.create_gateway(kube, samples.gateway(gw, GATEWAY_NS))
    for name in (first, second):  # no webhook configuration yet: nothing refuses the second
        await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS, gateway_name=gw))

    async def both_reconciled() -> bool:
        for name in (first, second):
            obj = await get_tenant(kube, name)
            if contract.AITENANT_FINALIZER not in (obj["metadata"].get("finalizers") or []):
                return False
            if not (obj.get("status") or {}).get("phase"):
                return False
        return True

    await eventually(both_reconciled, timeout=30)
    await register(kube, webhook_tls)
    try:
        await until_webhook_answers(kube, unique("probe"))
        for name in (first, second):
            await kube.delete(AITenant, name, namespace=AITENANT_NS)

        async def both_gone() -> bool:
            for name in (first, second):
                try:
                    await kube.get(AITenant, name, namespace=AITENANT_NS)
                except ApiError as exc:
                    if exc.status.code == 404:
                        continue
                    raise
                return False
            return True

        await eventually(both_gone, timeout=60, interval=0.5)
    finally:
        await kube.delete(ValidatingWebhookConfiguration, CONFIG_NAME)


async def test_implicit_gateway_collides_with_explicit_one(
    kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    implicit = unique("implicit")
    await samples.create_aitenant(kube, samples.aitenant(implicit, AITENANT_NS))
    other = unique("explicit")

    async def reconciled() -> bool:
        return bool((await get_tenant(kube, implicit)).get("status"))

    # Once the controller wrote its status, the cache the webhook reads holds it: no create of
    # the other one slips through, and no update of the first is refused while both exist.
    await eventually(reconciled)

    async def check() -> bool:
        try:
            await samples.create_aitenant(
                kube, samples.aitenant(other, AITENANT_NS, gateway_name=implicit)
            )
        except ApiError as exc:
            return f"already in use by AITenant {AITENANT_NS}/{implicit}" in (
                exc.status.message or ""
            )
        await kube.delete(AITenant, other, namespace=AITENANT_NS)
        return False

    await eventually(check)


async def test_self_update_and_controller_writes_are_allowed(
    kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    name = unique("self")
    await samples.create_gateway(kube, samples.gateway(name, GATEWAY_NS))
    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    # The finalizer patch goes through the webhook: the tenant still reaches Active.
    await wait_phase(kube, name, "Active")
    await kube.patch(
        AITenant,
        name,
        {"metadata": {"labels": {"example.com/x": "y"}}},
        namespace=AITENANT_NS,
        patch_type=PatchType.MERGE,
    )


async def test_terminating_tenant_still_holds_its_gateway(
    kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    holder, gw = unique("holder"), unique("gw-held")
    body = samples.aitenant(holder, AITENANT_NS, gateway_name=gw)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await samples.create_aitenant(kube, body)
    await kube.delete(AITenant, holder, namespace=AITENANT_NS)
    newcomer = unique("newcomer")

    async def check() -> bool:
        try:
            await samples.create_aitenant(
                kube, samples.aitenant(newcomer, AITENANT_NS, gateway_name=gw)
            )
        except ApiError as exc:
            return "already in use" in (exc.status.message or "")
        await kube.delete(AITenant, newcomer, namespace=AITENANT_NS)
        return False

    await eventually(check)
    await kube.patch(
        AITenant,
        holder,
        {"metadata": {"finalizers": None}},
        namespace=AITENANT_NS,
        patch_type=PatchType.MERGE,
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "a" * 42,
            "AITenant name must be at most 41 characters (required for per-tenant resource "
            "naming with 63-character Kubernetes limit)",
        ),
        (
            "bad.name",
            "AITenant name must be a valid DNS-1123 label (lowercase alphanumeric and hyphens, "
            "starting and ending with alphanumeric)",
        ),
    ],
)
async def test_name_rules_answer_with_the_crd_messages(
    kube: AsyncClient, admission: WebhookTLS, name: str, message: str
) -> None:
    # The CRD's CEL rule answers before any validating webhook is called.
    assert message in await denial(kube, samples.aitenant(name, AITENANT_NS))


async def test_oidc_rules_name_the_field(kube: AsyncClient, admission: WebhookTLS) -> None:
    body = samples.aitenant(
        "oidc-bad",
        AITENANT_NS,
        oidc={"issuerUrl": "https://issuer.example.com", "clientId": "c", "ttl": 10},
    )
    message = await denial(kube, body)
    # The schema's `minimum` answers before the webhook: the operator is told the field.
    assert "ttl" in message


@pytest.mark.parametrize(
    ("kind", "resource", "namespaced", "good"),
    [
        ("MaasTenantConfig", MaasTenantConfig, True, "default-tenant"),
        ("Tenant", LegacyTenant, True, "default-tenant"),
        ("Config", Config, False, "default"),
    ],
)
async def test_singleton_kinds_accept_only_their_one_name(
    kube: AsyncClient,
    admission: WebhookTLS,
    unique: Names,
    kind: str,
    resource: Any,
    namespaced: bool,
    good: str,
) -> None:
    """Only the CRDs' CEL rules judge these names (no webhook of ours is registered for them)."""
    namespace = unique("singletons")
    await samples.ensure_namespace(kube, namespace)

    def body(name: str) -> Any:
        metadata: dict[str, Any] = {"name": name}
        if namespaced:
            metadata["namespace"] = namespace
        return resource.from_dict(
            {"apiVersion": contract.API_VERSION, "kind": kind, "metadata": metadata, "spec": {}}
        )

    with pytest.raises(ApiError) as info:
        await kube.create(body("extra"))
    assert f"{kind} name must be {good}" in (info.value.status.message or "")
    # The one allowed name passes admission (a dry run; Config/default may exist already,
    # which storage, after admission, answers with 409).
    try:
        created = await kube.create(body(good), dry_run=True)
        answer = created.metadata.name if created.metadata else None
    except ApiError as exc:
        answer = exc.status.message if exc.status.code != 409 else good
    assert answer == good


async def test_custom_infrastructure_namespace_is_allowed(
    cluster: LocalCluster,
    kube: AsyncClient,
    controller: RunningController,
    webhook_tls: WebhookTLS,
    maas_api: Any,
    unique: Names,
) -> None:
    from ..harness import bind_controller_roles, e2e_settings

    custom = unique("custom-infra")
    await samples.ensure_namespace(kube, custom)
    # What the charm does when `aitenant-namespace` changes: the claims Role follows it.
    await bind_controller_roles(kube, aitenant_namespace=custom)
    await controller.stop()
    other = RunningController(
        cluster, e2e_settings(maas_api, webhook_tls, aitenant_namespace=custom)
    )
    await other.start()
    try:
        await register(kube, webhook_tls)
        name = unique("custom")

        async def allowed() -> bool:
            await samples.create_aitenant(kube, samples.aitenant(name, custom))
            return True

        await eventually(allowed, timeout=20, interval=0.2)
        message = await denial(kube, samples.aitenant(unique("wrong"), AITENANT_NS))
        assert f'infrastructure namespace "{custom}"' in message
    finally:
        await kube.delete(ValidatingWebhookConfiguration, CONFIG_NAME)
        await other.stop()
        await controller.start()


async def test_certificate_rotation_under_admission_load_loses_nothing(
    kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    # The API server trusts both CAs while the serving certificate moves from one to the other.
    new_ca = trustme.CA()
    bundle = admission.ca.cert_pem.bytes() + new_ca.cert_pem.bytes()
    body = render_webhook_configuration(
        name=CONFIG_NAME,
        ca_bundle_pem=bundle,
        url=f"https://127.0.0.1:{admission.port}{contract.WEBHOOK_PATH}",
    )
    await kube.apply(as_vwc(body), field_manager="aitenant-tests", force=True)

    async def webhook_answers() -> bool:  # the API server uses the new configuration
        probe = unique("probe")
        try:
            await samples.create_aitenant(kube, samples.aitenant(probe, "default"))
        except ApiError as exc:
            return "must be created in the configured" in (exc.status.message or "")
        await kube.delete(AITenant, probe, namespace="default")
        return False

    await eventually(webhook_answers)
    failures: list[str] = []
    answered = 0
    stop = asyncio.Event()

    async def load() -> None:
        nonlocal answered
        while not stop.is_set():
            try:
                await samples.create_aitenant(kube, samples.aitenant(unique("load"), "default"))
                failures.append("a create outside the infrastructure namespace was allowed")
            except ApiError as exc:
                if "must be created in the configured" in (exc.status.message or ""):
                    answered += 1
                else:
                    failures.append(exc.status.message or str(exc))

    workers = [asyncio.create_task(load()) for _ in range(4)]
    for i in range(6):
        await asyncio.sleep(0.7)
        admission.write_cert(new_ca if i % 2 == 0 else admission.ca)
    await asyncio.sleep(0.7)
    stop.set()
    await asyncio.gather(*workers)
    assert failures == []
    assert answered > 20


async def test_webhook_down_blocks_creates(
    kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    from devtools.cluster import free_port

    await register(kube, admission, port=free_port())  # nobody listens there

    async def blocked() -> bool:
        try:
            await samples.create_aitenant(kube, samples.aitenant(unique("down"), AITENANT_NS))
        except ApiError as exc:
            message = exc.status.message or ""
            return "failed calling webhook" in message and "vaitenant.kb.io" in message
        return False

    await eventually(blocked, timeout=20, interval=0.3)
