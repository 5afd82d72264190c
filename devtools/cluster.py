"""A local Kubernetes control plane: etcd + kube-apiserver + kube-controller-manager on loopback.

Binaries (Kubernetes 1.37.2 by default, ``AITENANT_KUBE_VERSION`` for another; or the folder
``KUBEBUILDER_ASSETS`` names) come from ``scripts/build-control-plane.sh``, which builds them
from Go modules once and caches them outside the checkout. The API server authenticates static
tokens (an admin in ``system:masters`` plus any extra users a test asks for) and authorises
with RBAC. The
controller-manager runs only the namespace and garbage-collector controllers, which gives real
namespace termination and ownerReference garbage collection (a node adds more:
devtools/node.py; a cluster for Juju more again: devtools/juju_cluster.py).

``LocalCluster.start()`` starts the three processes on free ports; ``stop()`` stops exactly
those processes and removes the working directory.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-control-plane.sh"
ADMIN_TOKEN = "aitenant-local-admin"
# Room for a Service per tenant in the 1,000-tenant soak. A node (devtools/node.py)
# routes this range to a bridge of its own before anything can send to it.
SERVICE_CIDR = "10.96.0.0/16"
DEFAULT_CONTROLLERS = "namespace,garbagecollector"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cluster_role_with_binding(
    name: str, rules: list[dict[str, Any]], subject: dict[str, str]
) -> list[dict[str, Any]]:
    """A ClusterRole of ``rules`` and a ClusterRoleBinding of it to ``subject``, both ``name``."""
    rbac = "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": name},
            "subjects": [subject],
        },
    ]


def built_by(script: Path) -> Path:
    """What a build script of ``scripts/`` built: the path its last output line names (a
    cached build answers at once, a first one builds)."""
    out = subprocess.run(
        ["bash", str(script)], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


@functools.cache
def kube_bin_dir() -> Path:
    """Directory with kube-apiserver, kube-controller-manager, kubectl and etcd (the build
    script's answer: a cached build returns at once, a first one builds)."""
    return built_by(BUILD_SCRIPT)


@dataclass
class User:
    name: str
    token: str
    groups: tuple[str, ...] = ()


def terminate_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group of ``proc`` (started with ``start_new_session``)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)


def wait_or_kill_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait ``timeout`` seconds for ``proc`` to end, then SIGKILL its group."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@dataclass
class LocalCluster:
    """A control plane of our own; use as a context manager or call start()/stop()."""

    extra_users: list[User] = field(default_factory=list)
    audit: bool = False
    # Resolve a Service-referenced webhook through the Service's endpoints (as with a
    # cluster network) instead of its cluster IP, which nothing routes on this machine.
    aggregator_routing: bool = False
    # kube-controller-manager's --controllers (a node adds those that make and run pods).
    controllers: str = DEFAULT_CONTROLLERS
    # Where pods reach the API server (a node's address; ``devtools/node.py`` forwards it to
    # loopback): the ``kubernetes`` Service's endpoint, service-account tokens mounted in
    # pods and ``kube-root-ca.crt`` published. None: no pod talks to the API server.
    pods_reach_at: str | None = None
    # The kubeconfig verifies the server with the API server's CA (certificate-authority-data)
    # instead of skipping verification; written once the API server has made its certificate.
    verify_server: bool = False
    workdir: Path | None = None
    api_port: int = 0
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _own_workdir: bool = False

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "kubeconfig"

    @property
    def audit_log(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "audit.log"

    @property
    def ca_file(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "certs" / "apiserver.crt"

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 90.0) -> None:
        bin_dir = kube_bin_dir()
        etcd = str(bin_dir / "etcd")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="aitenant-cluster-"))
            self._own_workdir = True
        work = self.workdir
        (work / "certs").mkdir(parents=True, exist_ok=True)
        logs = work / "logs"
        logs.mkdir(exist_ok=True)
        try:
            self._start(bin_dir, etcd, work, logs, timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, bin_dir: Path, etcd: str, work: Path, logs: Path, timeout: float) -> None:
        sa_key = work / "sa.key"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(sa_key), "2048"],
            check=True,
            capture_output=True,
        )
        tokens = [User("admin", ADMIN_TOKEN, ("system:masters",)), *self.extra_users]
        (work / "tokens.csv").write_text(
            "".join(
                f'{u.token},{u.name},{u.name},"{",".join(u.groups)}"\n'
                if u.groups
                else f"{u.token},{u.name},{u.name}\n"
                for u in tokens
            )
        )
        client_port, peer_port = free_port(), free_port()
        self._spawn(
            [
                etcd,
                "--data-dir",
                str(work / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{client_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{client_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
                "--log-level",
                "error",
            ],
            logs / "etcd.log",
        )
        self.api_port = free_port()
        api_args = [
            str(bin_dir / "kube-apiserver"),
            "--etcd-servers",
            f"http://127.0.0.1:{client_port}",
            "--bind-address",
            "127.0.0.1",
            "--advertise-address",
            "127.0.0.1",
            # Loopback may not be advertised through the `kubernetes` Service's endpoints,
            # which nothing here uses.
            "--secure-port",
            str(self.api_port),
            "--cert-dir",
            str(work / "certs"),
            "--token-auth-file",
            str(work / "tokens.csv"),
            "--authorization-mode",
            "RBAC",
            "--service-account-issuer",
            "https://kubernetes.default.svc",
            "--service-account-key-file",
            str(sa_key),
            "--service-account-signing-key-file",
            str(sa_key),
            "--api-audiences",
            "https://kubernetes.default.svc",
            "--service-cluster-ip-range",
            SERVICE_CIDR,
            "--allow-privileged",
            # Reach a kubelet (logs, exec) at its node's address, never by resolving its
            # name through this machine's resolver.
            "--kubelet-preferred-address-types",
            "InternalIP",
            "-v",
            "0",
        ]
        if self.pods_reach_at is None:
            api_args += ["--endpoint-reconciler-type", "none"]
            api_args += ["--disable-admission-plugins", "ServiceAccount"]
        else:
            api_args += ["--advertise-address", self.pods_reach_at]
        if self.aggregator_routing:
            api_args.append("--enable-aggregator-routing=true")
        if self.audit:
            policy = work / "audit-policy.yaml"
            policy.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "audit.k8s.io/v1",
                        "kind": "Policy",
                        "omitStages": ["RequestReceived"],
                        # A namespace create names its object only in the body (objectRef
                        # has no name on CREATE), so keep those bodies; the rest: metadata.
                        "rules": [
                            {
                                "level": "Request",
                                "verbs": ["create"],
                                "resources": [{"group": "", "resources": ["namespaces"]}],
                            },
                            {"level": "Metadata"},
                        ],
                    }
                )
            )
            api_args += [
                "--audit-policy-file",
                str(policy),
                "--audit-log-path",
                str(self.audit_log),
                "--audit-log-format",
                "json",
            ]
        self._spawn(api_args, logs / "kube-apiserver.log")
        self._wait_ready(timeout)
        self._write_kubeconfig()
        self._spawn(
            self._controller_manager_args(bin_dir, sa_key), logs / "kube-controller-manager.log"
        )

    def _controller_manager_args(self, bin_dir: Path, sa_key: Path) -> list[str]:
        controllers = self.controllers.split(",")
        if self.pods_reach_at is not None:
            controllers.append("root-ca-cert-publisher")
        args = [
            str(bin_dir / "kube-controller-manager"),
            "--kubeconfig",
            str(self.kubeconfig),
            "--controllers",
            ",".join(controllers),
            "--leader-elect=false",
            "--secure-port",
            "0",
            "--concurrent-gc-syncs",
            "5",
            "-v",
            "0",
        ]
        if self.pods_reach_at is not None or "serviceaccount-token" in controllers:
            # The CA published to pods (kube-root-ca.crt) and put in token Secrets (ca.crt).
            args += ["--root-ca-file", str(self.ca_file)]
        if "serviceaccount-token" in controllers:
            # Fills kubernetes.io/service-account-token Secrets with a token signed by the key
            # the API server verifies with.
            args += ["--service-account-private-key-file", str(sa_key)]
        return args

    def _spawn(self, args: list[str], log_path: Path) -> None:
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._procs.append(proc)

    def _write_kubeconfig(self, path: Path | None = None, token: str = ADMIN_TOKEN) -> Path:
        target = path or self.kubeconfig
        trust: dict[str, object] = (
            {"certificate-authority-data": base64.b64encode(self.ca_file.read_bytes()).decode()}
            if self.verify_server
            else {"insecure-skip-tls-verify": True}
        )
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": self.server, **trust}}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
            "current-context": "local",
        }
        target.write_text(yaml.safe_dump(config))
        target.chmod(0o600)
        return target

    def kubeconfig_for(self, user: User) -> Path:
        """A kubeconfig that authenticates as one of ``extra_users``."""
        assert self.workdir is not None
        # KUBECONFIG is a list separated by ':', which ServiceAccount user names contain.
        file = f"kubeconfig-{user.name.replace(':', '-')}"
        return self._write_kubeconfig(self.workdir / file, user.token)

    def pid(self, binary: str) -> int:
        """The process id of the running control-plane process ``binary`` (``etcd``,
        ``kube-apiserver``, ``kube-controller-manager``), e.g. to read its CPU time."""
        for proc in self._procs:
            args = proc.args if isinstance(proc.args, list) else [proc.args]
            if Path(str(args[0])).name == binary and proc.poll() is None:
                return proc.pid
        raise LookupError(f"no running {binary}")

    def _wait_ready(self, timeout: float) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    name = Path(str(proc.args[0] if isinstance(proc.args, list) else proc.args))
                    raise RuntimeError(
                        f"{name.name} exited with {proc.returncode}; see {self.workdir}/logs"
                    )
            req = urllib.request.Request(
                f"{self.server}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
            )
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise TimeoutError(f"kube-apiserver not ready after {timeout}s: {last}")

    def stop(self) -> None:
        for proc in reversed(self._procs):
            terminate_group(proc)
        for proc in reversed(self._procs):
            wait_or_kill_group(proc, timeout=10)
        self._procs.clear()
        if (
            self._own_workdir
            and self.workdir is not None
            and not os.environ.get("AITENANT_KEEP_CLUSTER")
        ):
            shutil.rmtree(self.workdir, ignore_errors=True)
