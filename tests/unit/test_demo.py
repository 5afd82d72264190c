"""The demo never fails silently: a controller that exits is noticed at once and explained."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from tests.harness import demo


def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return path


def command(tmp_path: Path) -> list[str]:
    return demo.controller_command(kubeconfig(tmp_path), tmp_path / "ca.crt", tmp_path / "ca.key")


def flag(command: list[str], name: str) -> str:
    return next(arg.split("=", 1)[1] for arg in command if arg.startswith(f"--{name}="))


def test_the_controller_listens_on_loopback_on_free_ports(tmp_path: Path) -> None:
    args = command(tmp_path)
    assert flag(args, "bind-address") == "127.0.0.1"
    assert flag(args, "webhook-port") == "0"
    ports = {int(flag(args, "metrics-port")), int(flag(args, "health-port"))}
    assert len(ports) == 2
    assert not ports & {8080, 8081, 9443}
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: the controller will get it


async def test_a_controller_that_exits_is_noticed_at_once_with_its_log(tmp_path: Path) -> None:
    log_path = tmp_path / "controller.log"
    controller = await demo.start_controller([*command(tmp_path), "--log-level=bogus"], log_path)
    forever = asyncio.Event().wait()
    with pytest.raises(demo.DemoFailed) as info:
        # The tenant would be waited for 60 s; the exit is noticed as it happens.
        await asyncio.wait_for(demo.while_running(controller, forever, log_path, "Ready"), 30)
    message = str(info.value)
    assert "The controller exited with code 2 while the demo was waiting for: Ready" in message
    assert "--log-level" in message, "the controller's own explanation, from its log"
    assert "What to do:" in message
    assert str(log_path) in message


async def test_a_step_that_times_out_shows_the_log_instead_of_a_traceback(tmp_path: Path) -> None:
    log_path = tmp_path / "controller.log"
    log_path.write_text("earlier line\nstill starting\n")  # the controller appends to it
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    controller = await demo.start_controller(sleeper, log_path)

    async def slow() -> None:
        raise TimeoutError("AITenant red-team not Ready after 60s")

    try:
        with pytest.raises(demo.DemoFailed) as info:
            await demo.while_running(controller, slow(), log_path, "Ready")
    finally:
        await demo.stop_controller(controller)
    message = str(info.value)
    assert message.startswith("Ready failed: AITenant red-team not Ready after 60s")
    assert "  earlier line\n  still starting" in message
    assert controller.returncode is not None, "stopped"


def test_run_demo_prints_the_failure_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(kubeconfig: Path, workdir: Path, once: bool) -> int:
        raise demo.DemoFailed("The controller exited with code 1")

    monkeypatch.setattr(demo, "demo", failing)
    assert demo.run_demo(tmp_path, tmp_path, once=True) == 1
    assert "demo: The controller exited with code 1" in capsys.readouterr().err
