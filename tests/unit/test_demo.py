"""The demo never fails silently: a controller that exits is noticed at once and explained.

It runs the tenant's maas-api on a node of its own where ``AITENANT_NODE=1`` and writes no
status; these tests never start a node (fakes stand in for the cluster and the node)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from devtools import demo, images
from devtools.cluster import DEFAULT_CONTROLLERS
from devtools.node import NODE_CONTROLLERS


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
    async def failing(kubeconfig: Path, workdir: Path, once: bool, *rest: object) -> int:
        raise demo.DemoFailed("The controller exited with code 1")

    monkeypatch.setattr(demo, "demo", failing)
    assert demo.run_demo(tmp_path, tmp_path, once=True) == 1
    assert "demo: The controller exited with code 1" in capsys.readouterr().err


def test_the_controller_runs_the_images_the_node_holds(tmp_path: Path) -> None:
    args = command(tmp_path)
    assert not [a for a in args if a.startswith(("--maas-api-image", "--maas-api-cleanup-image"))]
    on_node = demo.controller_command(
        kubeconfig(tmp_path), tmp_path / "ca.crt", tmp_path / "ca.key", demo.node_images()
    )
    assert flag(on_node, "maas-api-image") == images.MAAS_API_IMAGE
    assert flag(on_node, "maas-api-cleanup-image") == images.CLEANUP_IMAGE
    # Both are in what the node builds and imports into containerd.
    assert {images.MAAS_API_IMAGE, images.CLEANUP_IMAGE} <= {
        images.PAUSE_IMAGE,
        images.MAAS_API_IMAGE,
        images.MAAS_API_CRASHLOOP_IMAGE,
        images.CLEANUP_IMAGE,
    }


@pytest.mark.parametrize(
    ("env", "use_kubeconfig", "wanted"),
    [
        ({"AITENANT_NODE": "1"}, False, True),
        ({"AITENANT_NODE": "1"}, True, False),
        ({"AITENANT_NODE": "0"}, False, False),
        ({}, False, False),
    ],
)
def test_a_node_runs_only_on_the_local_control_plane_when_asked(
    env: dict[str, str], use_kubeconfig: bool, wanted: bool
) -> None:
    assert demo.node_wanted(env, use_kubeconfig) is wanted


def test_the_hints_show_the_pods_with_the_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo, "kubectl", lambda: "/opt/kube/kubectl")
    config = tmp_path / "kubeconfig"
    text = demo.hints(config, tmp_path / "controller.log", tmp_path / "logs")
    assert f"kubectl --kubeconfig {config} get pods -n aitenant-system" in text
    assert f"export KUBECONFIG={config} PATH=/opt/kube:$PATH" in text
    assert (
        f"Node logs (kubelet, containerd, kube-proxy, kube-scheduler): {tmp_path / 'logs'}" in text
    )
    assert "Node logs" not in demo.hints(config, tmp_path / "controller.log", None)


def test_a_runs_logs_outlive_its_control_plane_until_the_next_run(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    for run, line in ((1, "first"), (2, "second")):
        workdir = tmp_path / f"cluster-{run}"
        (workdir / "logs").mkdir(parents=True)
        (workdir / "controller.log").write_text(f"{line} controller\n")
        (workdir / "logs" / "kubelet.log").write_text(f"{line} kubelet\n")
        if run == 1:
            (workdir / "logs" / "only-in-the-first.log").write_text("x")
        demo.keep_logs(workdir, kept)
        shutil.rmtree(workdir)  # as the control plane's stop does
    assert (kept / "controller.log").read_text() == "second controller\n"
    assert (kept / "logs" / "kubelet.log").read_text() == "second kubelet\n"
    assert not (kept / "logs" / "only-in-the-first.log").exists()


READY = {"type": "Ready", "status": "True", "reason": "Ready", "message": "Tenant is active"}
PENDING = {"type": "Ready", "status": "False", "reason": "Pending", "message": "maas-api"}


def test_the_outcome_says_why_the_tenant_is_or_is_not_ready() -> None:
    on_node = demo.outcome(READY, 12.345, demo.Runs.NODE)
    assert on_node == "AITenant red-team is Ready because its maas-api pod is Ready (12.35s " + (
        "after it was created)."
    )
    assert "because" not in demo.outcome(READY, 1, demo.Runs.CLUSTER)
    without = demo.outcome(PENDING, 1, demo.Runs.NOTHING)
    assert "reports Ready=False (Pending: maas-api)" in without
    assert "no node runs on this control plane (AITENANT_NODE=0)" in without
    assert "no Ready condition yet" in demo.outcome(None, 1, demo.Runs.CLUSTER)


@dataclass
class Calls:
    events: list[str] = field(default_factory=list)
    run_demo_args: list[tuple[Any, ...]] = field(default_factory=list)


def fake_cluster_and_node(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, calls: Calls, node_error: Exception | None
) -> None:
    class FakeCluster:
        def __init__(self, controllers: str, pods_reach_at: str | None) -> None:
            assert pods_reach_at is None  # the stand-in never talks to the API server
            calls.events.append(f"cluster start ({controllers})")
            self.workdir = tmp_path
            self.server = "https://127.0.0.1:1"
            self.kubeconfig = tmp_path / "kubeconfig"

        def __enter__(self) -> FakeCluster:
            return self

        def __exit__(self, *exc: object) -> None:
            calls.events.append("cluster stop")

    class FakeNode:
        def __init__(self, cluster: FakeCluster) -> None:
            self.logs = tmp_path / "logs"

        def start(self) -> None:
            calls.events.append("node start")
            if node_error is not None:
                raise node_error

        def stop(self) -> None:
            # Neither Ctrl-C nor tox's SIGTERM may interrupt the node's teardown.
            assert demo.signal.getsignal(demo.signal.SIGINT) is demo.signal.SIG_IGN
            assert demo.signal.getsignal(demo.signal.SIGTERM) is demo.signal.SIG_IGN
            calls.events.append("node stop")

    monkeypatch.setattr(demo, "LocalCluster", FakeCluster)
    monkeypatch.setattr(demo, "Node", FakeNode)
    monkeypatch.setattr(demo, "kept_logs_dir", lambda: tmp_path / "kept")


def test_the_node_starts_after_the_control_plane_and_stops_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls()
    fake_cluster_and_node(monkeypatch, tmp_path, calls, None)

    def run(*args: Any) -> int:
        calls.events.append("demo")
        calls.run_demo_args.append(args)
        raise KeyboardInterrupt  # Ctrl-C before the demo's own handler is in place

    monkeypatch.setattr(demo, "run_demo", run)
    # Whatever this process had (a shell may start it with SIGINT ignored) is put back.
    before = {sig: demo.signal.getsignal(sig) for sig in (demo.signal.SIGINT, demo.signal.SIGTERM)}
    with pytest.raises(KeyboardInterrupt):
        demo.on_local_cluster(once=True, with_node=True)
    assert calls.events == [
        f"cluster start ({NODE_CONTROLLERS})",
        "node start",
        "demo",
        "node stop",
        "cluster stop",
    ]
    (args,) = calls.run_demo_args
    assert args[3:] == (demo.Runs.NODE, demo.node_images(), tmp_path / "logs")
    after = {sig: demo.signal.getsignal(sig) for sig in before}
    assert after == before, "put back"


def test_a_node_that_does_not_start_is_explained_and_the_demo_does_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = Calls()
    fake_cluster_and_node(
        monkeypatch, tmp_path, calls, RuntimeError("another node of this suite runs")
    )
    monkeypatch.setattr(demo, "run_demo", lambda *args: calls.events.append("demo") or 0)
    assert demo.on_local_cluster(once=True, with_node=True) == 1
    assert calls.events == [
        f"cluster start ({NODE_CONTROLLERS})",
        "node start",
        "node stop",
        "cluster stop",
    ]
    err = capsys.readouterr().err
    assert "demo: the node did not start: another node of this suite runs" in err
    assert "AITENANT_NODE=0" in err


def test_without_a_node_the_demo_runs_with_the_controllers_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls()
    fake_cluster_and_node(monkeypatch, tmp_path, calls, None)

    def run(*args: Any) -> int:
        calls.run_demo_args.append(args)
        return 0

    monkeypatch.setattr(demo, "run_demo", run)
    assert demo.on_local_cluster(once=True, with_node=False) == 0
    assert calls.events == [f"cluster start ({DEFAULT_CONTROLLERS})", "cluster stop"]
    (args,) = calls.run_demo_args
    assert args[3:] == (demo.Runs.NOTHING,)
