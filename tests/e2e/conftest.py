"""Fixtures for end-to-end tests: one real control plane and node for the whole run, one
controller.

The control plane (etcd + kube-apiserver + kube-controller-manager) is ours, started on
loopback, with one node (devtools/node.py): every maas-api Deployment a test makes runs
its pods under a real kubelet, and the deployment controller reports its availability. The
controller runs in this test process on the same event loop, so tests can look at its metrics
and queue. Tests use unique names, so they can share the cluster.

What the fixtures set up, for tests that set up more of it: tests/e2e/harness.py; helpers
about AITenants: tests/e2e/tenants.py.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import cast

import pytest
import trustme
from devtools.cluster import LocalCluster, free_port
from devtools.maas_api import FakeMaasApi
from devtools.node import cluster_with_node
from lightkube import ApiError, AsyncClient

from aitenant import contract
from aitenant.resources import AITenant

from .harness import (
    AITENANT_NS,
    CONTROLLER_USER,
    TENANT_ADMIN_USER,
    RunningController,
    WebhookTLS,
    e2e_settings,
    eventually,
    prepared_client,
)

log = logging.getLogger(__name__)


# Modules with a control plane and node of their own, stopped at the end of the module.
OWN_CLUSTER_MODULES = frozenset({"test_peer.py", "test_juju_cluster.py"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``OWN_CLUSTER_MODULES`` first: their nodes stop before the session's starts (one node
    per machine: devtools/node.py)."""
    items.sort(key=lambda item: item.path.name not in OWN_CLUSTER_MODULES)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "provokes_errors(why): the test makes the controller log an error on purpose"
    )


class ControllerErrors(logging.Handler):
    """The controller's log records at ERROR (a reconcile that failed for a reason other than
    a conflict or the server's trouble, a traceback) while one test runs."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def no_silent_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test fails when the controller (in this process) logs an error it did not provoke
    on purpose; a test that does provoke one says which with
    ``@pytest.mark.provokes_errors("why")``. A retry the controller recovers from is not a pass
    of the test when it hides a bug (a TypeError healed by the next pass is still a bug)."""
    handler = ControllerErrors()
    logger = logging.getLogger("aitenant")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    if handler.records and request.node.get_closest_marker("provokes_errors") is None:
        lines = "\n".join(
            f"{r.name}: {r.getMessage()}" + (f" ({r.exc_info[1]!r})" if r.exc_info else "")
            for r in handler.records
        )
        pytest.fail(f"the controller logged errors this test did not provoke:\n{lines}")


# How long the end of a test waits for the deletion of the AITenants it made.
CLEANUP_TIMEOUT = 60.0


@pytest.fixture(autouse=True)
async def tenants_deleted_after(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """The AITenants a test made are deleted when it ends, through the session controller,
    and waited for: the node places pods by their CPU requests (50m each for maas-api,
    docs/platform.md §1), so on a 2-core machine it holds some 38 tenants at once, not a
    run's worth. Tenants of module fixtures, made before, stay."""
    if "kube" not in request.fixturenames:
        yield
        return
    kube = cast(AsyncClient, request.getfixturevalue("kube"))

    async def tenant_names() -> set[str]:
        return {
            t.metadata.name
            async for t in kube.list(AITenant, namespace=AITENANT_NS)
            if t.metadata and t.metadata.name
        }

    async def listed() -> tuple[set[str]]:  # retried while the API server warms up its CRDs
        return (await tenant_names(),)

    (before,) = await eventually(listed)
    # The default tenant is Config/default's, bootstrapped once per its lifecycle: never ours.
    before.add(contract.DEFAULT_TENANT_NAME)
    yield
    made = await tenant_names() - before
    for name in made:
        with contextlib.suppress(ApiError):
            await kube.delete(AITenant, name, namespace=AITENANT_NS)

    async def gone() -> bool:
        return not (await tenant_names() & made)

    try:
        await eventually(gone, timeout=CLEANUP_TIMEOUT, interval=0.2)
    except AssertionError:
        log.warning(
            "%s: its AITenants were not all deleted in %.0f s", request.node.name, CLEANUP_TIMEOUT
        )


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """The control plane with the controllers that make pods, and its node (root, Debian's
    containerd, runc, CNI plugins and nftables: ``scripts/dev test`` installs them)."""
    began = time.monotonic()
    with cluster_with_node(extra_users=[CONTROLLER_USER, TENANT_ADMIN_USER], audit=True) as local:
        log.warning("control plane and node ready in %.1f s", time.monotonic() - began)
        yield local


@pytest.fixture(scope="session")
async def kube(cluster: LocalCluster) -> AsyncIterator[AsyncClient]:
    client = await prepared_client(cluster)
    yield client
    await client.close()


@pytest.fixture(scope="session")
def webhook_tls(cluster: LocalCluster) -> WebhookTLS:
    assert cluster.workdir is not None
    cert_dir = cluster.workdir / "webhook-certs"
    cert_dir.mkdir()
    tls = WebhookTLS(trustme.CA(), cert_dir, free_port())
    tls.write_cert()
    return tls


@pytest.fixture(scope="session")
async def maas_api(cluster: LocalCluster) -> AsyncIterator[FakeMaasApi]:
    assert cluster.workdir is not None
    api = FakeMaasApi(cluster.workdir / "maas-api")
    await api.start()
    yield api
    await api.stop()


@pytest.fixture(scope="session")
async def controller(
    cluster: LocalCluster,
    kube: AsyncClient,
    maas_api: FakeMaasApi,
    webhook_tls: WebhookTLS,
) -> AsyncIterator[RunningController]:
    running = RunningController(cluster, e2e_settings(maas_api, webhook_tls))
    await running.start()
    yield running
    await running.stop()


_names = itertools.count(1)


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Unique, DNS-safe names per test so tests can share one cluster."""

    def make(prefix: str) -> str:
        return f"{prefix}-{next(_names)}"

    return make
