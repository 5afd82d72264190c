"""A CA and a serving certificate made once per session, and a context builder."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
import trustme

from aitenant import certificates
from aitenant.platform.render import PlatformContext

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
INFRA = "aitenant-system"
GATEWAY_NS = "gateways"


@pytest.fixture(scope="session")
def ca() -> certificates.CertificateAuthority:
    authority = trustme.CA()
    return certificates.CertificateAuthority(
        authority.cert_pem.bytes().decode(), authority.private_key_pem.bytes().decode()
    )


@pytest.fixture(scope="session")
def serving(ca: certificates.CertificateAuthority) -> certificates.ServingCert:
    return certificates.issue(ca, certificates.dns_names("maas-api-red-team", INFRA), now=NOW)


MakeContext = Callable[..., PlatformContext]


@pytest.fixture
def make_ctx(serving: certificates.ServingCert) -> MakeContext:
    """A context for tenant red-team on its own Gateway; keyword arguments override."""
    base = PlatformContext(
        tenant="red-team",
        tenant_namespace="ai-tenant-red-team",
        aitenant_namespace="ai-tenants",
        infra_namespace=INFRA,
        gateway_namespace=GATEWAY_NS,
        gateway_name="red-team",
        default_gateway_name="maas-default-gateway",
        controller_namespace="aitenant-controller",
        image="quay.io/opendatahub/maas-api:v1",
        cleanup_image="docker.io/curlimages/curl:8.11.1",
        replicas=1,
        serving_cert=serving,
    )

    def make(**overrides: Any) -> PlatformContext:
        return dataclasses.replace(base, **overrides)

    return make


def default_tenant(make: MakeContext, **overrides: Any) -> PlatformContext:
    return make(
        tenant="models-as-a-service",
        tenant_namespace="models-as-a-service",
        gateway_name="maas-default-gateway",
        **overrides,
    )
