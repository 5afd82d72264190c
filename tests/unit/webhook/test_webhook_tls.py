"""The webhook survives certificate rotation: new handshakes see the new certificate."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import trustme
from aiohttp import web
from webhook_fakes import POLICY, FakeAuthorizer, FakeIndex, admission_request, review_body, tenant

from aitenant import contract
from aitenant.runtime.serving.tls import CertReloader
from aitenant.webhook.server import admission_app, serve

HOST = "127.0.0.1"


def write_pair(directory: Path, cert: trustme.LeafCert) -> None:
    """Replace tls.crt then tls.key, each atomically (a rotation seen file by file)."""
    for name, blob in (
        ("tls.crt", b"".join(pem.bytes() for pem in cert.cert_chain_pems)),
        ("tls.key", cert.private_key_pem.bytes()),
    ):
        staging = directory / f".{name}.tmp"
        staging.write_bytes(blob)
        os.replace(staging, directory / name)


def leaf_der(cert: trustme.LeafCert) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode())


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def presented_cert(port: int, ca: trustme.CA) -> bytes:
    """DER of the certificate a fresh TLS handshake gets (verified against ``ca``)."""
    reader, writer = await asyncio.open_connection(
        HOST, port, ssl=client_context(ca), server_hostname=HOST
    )
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        der = ssl_object.getpeercert(binary_form=True)
        assert der is not None
        return der
    finally:
        writer.close()
        await writer.wait_closed()
        del reader


@pytest.fixture
def cert_dir() -> Iterator[Path]:
    # Not tmp_path: pytest-operator, when installed, overrides tmp_path_factory to need tox.
    with tempfile.TemporaryDirectory(prefix="webhook-tls-") as directory:
        yield Path(directory)


@dataclass
class Served:
    directory: Path
    reloader: CertReloader
    runner: web.AppRunner
    port: int


@pytest.fixture
async def served(cert_dir: Path) -> AsyncIterator[tuple[Served, trustme.CA, trustme.LeafCert]]:
    ca = trustme.CA()
    cert = ca.issue_cert(HOST, "localhost")
    write_pair(cert_dir, cert)
    reloader = CertReloader(cert_dir, interval=0.02)
    await reloader.start()
    app = admission_app(policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex())
    runner = await serve(app, host=HOST, port=0, reloader=reloader)
    try:
        port = runner.addresses[0][1]
        yield Served(cert_dir, reloader, runner, port), ca, cert
    finally:
        await runner.cleanup()
        await reloader.stop()


async def wait_for_reloads(reloader: CertReloader, count: int) -> None:
    """Give the poller up to 5 s to load ``count`` new pairs."""
    for _ in range(500):
        if reloader.reloads >= count:
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"the certificate was reloaded {reloader.reloads} times, expected {count}")


async def test_rotated_certificate_is_served_without_restart(
    served: tuple[Served, trustme.CA, trustme.LeafCert],
) -> None:
    server, first_ca, first_cert = served
    url = f"https://{HOST}:{server.port}{contract.WEBHOOK_PATH}"
    body = review_body(admission_request("CREATE", tenant("team-a")))

    async with httpx.AsyncClient(verify=client_context(first_ca)) as old_client:
        # GIVEN the webhook serves the first certificate over HTTPS
        response = await old_client.post(url, content=body)
        assert response.status_code == 200
        assert response.json()["response"]["allowed"] is True
        assert await presented_cert(server.port, first_ca) == leaf_der(first_cert)

        # WHEN the files are replaced by a pair from an unrelated CA
        second_ca = trustme.CA()
        second_cert = second_ca.issue_cert(HOST)
        write_pair(server.directory, second_cert)
        await wait_for_reloads(server.reloader, 1)

        # THEN a new handshake presents the new certificate...
        assert await presented_cert(server.port, second_ca) == leaf_der(second_cert)
        async with httpx.AsyncClient(verify=client_context(second_ca)) as new_client:
            response = await new_client.post(url, content=body)
            assert response.status_code == 200
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(verify=client_context(first_ca)) as stale_client:
                await stale_client.post(url, content=body)

        # ...while the connection opened before the rotation keeps working (it could not
        # verify a new handshake against the first CA, so this proves it was not dropped).
        response = await old_client.post(url, content=body)
        assert response.status_code == 200
    assert server.runner.addresses[0][1] == server.port


async def test_half_written_pair_keeps_the_previous_certificate(
    served: tuple[Served, trustme.CA, trustme.LeafCert], caplog: pytest.LogCaptureFixture
) -> None:
    server, first_ca, first_cert = served
    await server.reloader.stop()  # drive the checks by hand
    caplog.set_level(logging.WARNING, logger="aitenant.runtime.serving.tls")
    second_ca = trustme.CA()
    second_cert = second_ca.issue_cert(HOST)

    # Only the certificate has been written: it does not match the old key.
    (server.directory / "tls.crt").write_bytes(second_cert.cert_chain_pems[0].bytes())
    assert server.reloader.check() is False
    assert server.reloader.reloads == 0
    assert await presented_cert(server.port, first_ca) == leaf_der(first_cert)
    assert len(caplog.records) == 1
    assert "not reloaded" in caplog.records[0].getMessage()
    assert server.reloader.check() is False  # unchanged files: no retry, no second log
    assert len(caplog.records) == 1

    # The key arrives half-written, then complete.
    key = second_cert.private_key_pem.bytes()
    (server.directory / "tls.key").write_bytes(key[: len(key) // 2])
    assert server.reloader.check() is False
    assert await presented_cert(server.port, first_ca) == leaf_der(first_cert)
    (server.directory / "tls.key").write_bytes(key)
    assert server.reloader.check() is True
    assert server.reloader.reloads == 1
    assert await presented_cert(server.port, second_ca) == leaf_der(second_cert)


async def test_missing_files_keep_serving(
    served: tuple[Served, trustme.CA, trustme.LeafCert],
) -> None:
    server, first_ca, first_cert = served
    await server.reloader.stop()
    (server.directory / "tls.key").unlink()
    assert server.reloader.check() is False
    assert await presented_cert(server.port, first_ca) == leaf_der(first_cert)


def test_constructor_needs_a_loadable_pair(cert_dir: Path) -> None:
    with pytest.raises(FileNotFoundError):
        CertReloader(cert_dir)
    (cert_dir / "tls.crt").write_text("garbage")
    (cert_dir / "tls.key").write_text("garbage")
    with pytest.raises(ssl.SSLError):
        CertReloader(cert_dir)


def test_interval_must_be_positive(cert_dir: Path) -> None:
    with pytest.raises(ValueError, match="interval"):
        CertReloader(cert_dir, interval=0)


def test_context_is_a_tls12_server_context(cert_dir: Path) -> None:
    write_pair(cert_dir, trustme.CA().issue_cert(HOST))
    context = CertReloader(cert_dir).context
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.protocol == ssl.PROTOCOL_TLS_SERVER


async def test_start_stop_leave_no_task(cert_dir: Path) -> None:
    write_pair(cert_dir, trustme.CA().issue_cert(HOST))
    reloader = CertReloader(cert_dir, interval=0.01)
    await reloader.stop()  # stop before start is harmless
    before = asyncio.all_tasks()
    async with reloader:
        await reloader.start()  # idempotent: still one poller
        pollers = [t for t in asyncio.all_tasks() - before if t.get_name() == "tls-cert-reloader"]
        assert len(pollers) == 1
        await asyncio.sleep(0.03)
    assert asyncio.all_tasks() - before == set()
    assert pollers[0].cancelled()


async def test_a_connection_past_the_limit_is_closed_at_once(cert_dir: Path) -> None:
    ca = trustme.CA()
    write_pair(cert_dir, ca.issue_cert(HOST))
    reloader = CertReloader(cert_dir)
    await reloader.start()
    runner = await serve(
        admission_app(policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex()),
        host=HOST,
        port=0,
        reloader=reloader,
        max_connections=1,
    )
    client = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    port = runner.addresses[0][1]
    try:
        _, first = await asyncio.open_connection(HOST, port, ssl=client, server_hostname=HOST)
        await asyncio.sleep(0.1)  # the first one is established
        second, writer = await asyncio.open_connection(HOST, port, ssl=client, server_hostname=HOST)
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            assert await asyncio.wait_for(second.read(), 2) == b""
        writer.transport.abort()
        first.transport.abort()
    finally:
        await runner.cleanup()
        await reloader.stop()
