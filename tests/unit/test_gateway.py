"""devtools/gateway.py's pure parts: Traefik's static configuration and the raw HTTP reader."""

from __future__ import annotations

from pathlib import Path

from devtools import gateway


def test_entry_points_listen_on_loopback_and_refuse_every_encoded_character(
    tmp_path: Path,
) -> None:
    config = gateway.static_config({"a": 8001, "b": 8002}, tmp_path / "a.log", tmp_path / "t.log")
    assert {n: e["address"] for n, e in config["entryPoints"].items()} == {
        "a": "127.0.0.1:8001",
        "b": "127.0.0.1:8002",
    }
    for entry in config["entryPoints"].values():
        refused = entry["http"]["encodedCharacters"]
        assert set(refused) == set(gateway.ENCODED_CHARACTERS)
        assert not any(refused.values())
        assert entry["http"]["sanitizePath"] is True
    # Nothing calls home, and only the Gateway API provider runs.
    assert config["global"] == {"checkNewVersion": False, "sendAnonymousUsage": False}
    assert list(config["providers"]) == ["kubernetesGateway"]
    assert set(config) == {"global", "entryPoints", "providers", "accessLog", "log"}


def test_a_response_is_read_as_sent_chunked_or_not() -> None:
    plain = gateway.parse_response(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
    assert (plain.status, plain.body, plain.tenant) == (404, b"not found", None)
    chunked = gateway.parse_response(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Standin-Tenant: a\r\n\r\n"
        b'4\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n'
    )
    assert (chunked.status, chunked.body, chunked.tenant) == (200, b'{"a": 1}', "a")
