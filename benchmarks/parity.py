"""Parity, object by object: our controller and a peer, each on a fresh control plane of its own.

Usage: ``python -m benchmarks.parity --peer-command '<shell command>' [--peer-crds DIR]``
(the environment the command gets: ``devtools/peer.py``, ``benchmarks/README.md``).

Each controller meets the same inputs, in order: the default tenant (``Config/default`` from the
``maas-controller`` Deployment), a plain tenant ``red``, a tenant ``blue`` with OIDC whose config
then asks for telemetry and an apiKeys limit, a misplaced AITenant (namespace ``default``), a
tenant ``green`` on ``red``'s Gateway, then ``red`` deleted (with
``maas.opendatahub.io/api-keys-revoked=true``, since no revocation Job or maas-api runs). Every
object the controller wrote is named by the API server's audit log; what is left of each is read
back and normalised (no uid, resourceVersion, timestamps, managedFields, ownerReference uids),
and the two sets are diffed: names, labels, annotations, finalizers, spec (``data`` keys for
ConfigMaps and Secrets, ``rules``/``subjects`` for RBAC), status conditions (type, status,
reason, message), and Events (reason, type, message, object). Prints the diff as a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from devtools import audit, peer, samples
from devtools.maas_api import FakeMaasApi
from devtools.node import cluster_with_node
from lightkube import AsyncClient, KubeConfig
from lightkube.types import PatchType

from aitenant.resources import AITenant, MaasTenantConfig

SETTLE_S = 60.0
Obj = dict[str, Any]


def normalise(obj: Obj) -> dict[str, str]:
    """The compared facets of ``obj``, each as a stable string."""
    meta = obj.get("metadata") or {}
    facets = {
        "labels": meta.get("labels") or {},
        "annotations": {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k != "kubectl.kubernetes.io/last-applied-configuration"
        },
        "finalizers": sorted(meta.get("finalizers") or []),
        "owners": sorted(f"{o['kind']}/{o['name']}" for o in meta.get("ownerReferences") or []),
    }
    if "spec" in obj:
        facets["spec"] = obj["spec"]
    for body in ("data", "stringData"):
        if body in obj:
            facets[body] = sorted(obj[body])
    for body in ("rules", "subjects", "roleRef"):
        if body in obj:
            facets[body] = obj[body]
    conditions = (obj.get("status") or {}).get("conditions")
    if isinstance(conditions, list):
        facets["conditions"] = sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conditions
        )
    if "phase" in (obj.get("status") or {}):
        facets["phase"] = obj["status"]["phase"]
    return {k: json.dumps(v, sort_keys=True) for k, v in facets.items()}


async def run_inputs(client: AsyncClient) -> None:
    """The fixed input set (module docstring); returns when the deletion is done or stuck."""
    for gw in ("maas-default-gateway", "red", "blue"):
        await samples.create_gateway(client, samples.gateway(gw, peer.GATEWAY_NS))
    await samples.create_aitenant(client, samples.aitenant("red"))
    oidc = {"issuerUrl": "https://issuer.example.com", "clientId": "blue-client", "ttl": 300}
    await samples.create_aitenant(client, samples.aitenant("blue", oidc=oidc))
    await samples.ensure_namespace(client, "default")
    await samples.create_aitenant(client, samples.aitenant("stray", "default"))
    await samples.create_aitenant(client, samples.aitenant("green", gateway_name="red"))
    await wait_until(client, lambda t: t.get("red") == "Active" and t.get("blue") == "Active")
    spec = {"telemetry": {"enabled": True}, "apiKeys": {"maxExpirationDays": 30}}
    await client.patch(
        MaasTenantConfig,
        "default-tenant",
        {"spec": spec},
        namespace="ai-tenant-blue",
        patch_type=PatchType.MERGE,
    )
    await asyncio.sleep(5)
    annotation = {"maas.opendatahub.io/api-keys-revoked": "true"}
    await client.patch(
        AITenant,
        "red",
        {"metadata": {"annotations": annotation}},
        namespace=peer.AITENANT_NS,
        patch_type=PatchType.MERGE,
    )
    await client.delete(AITenant, "red", namespace=peer.AITENANT_NS)
    await wait_until(client, lambda t: "red" not in t)
    await asyncio.sleep(5)


async def phases(client: AsyncClient) -> dict[str, str]:
    found = {}
    async for t in client.list(AITenant, namespace=peer.AITENANT_NS):
        found[t["metadata"]["name"]] = (t.get("status") or {}).get("phase", "")
    return found


async def wait_until(client: AsyncClient, done: Any, timeout: float = SETTLE_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done(await phases(client)):
            return
        await asyncio.sleep(0.5)
    print(f"  (not reached in {timeout:.0f} s: {await phases(client)})")


async def collect(name: str, command: str, peer_crds: Path | None) -> dict[str, Any]:
    """Run one controller through the inputs on a fresh control plane; its objects and Events."""
    with cluster_with_node(extra_users=[peer.CONTROLLER_USER], audit=True) as cluster:
        assert cluster.workdir is not None
        client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="parity")
        await peer.prepare(client, cluster.workdir, peer_crds)
        maas_api = FakeMaasApi(cluster.workdir / "maas-api")
        await maas_api.start()
        controller = peer.ControllerUnderTest(
            name,
            command.format(ca_file=maas_api.ca_file, ca_key_file=maas_api.ca_key_file),
            cluster.kubeconfig_for(peer.CONTROLLER_USER),
            cluster.workdir,
        )
        await peer.port_free(peer.PEER_WEBHOOK_PORT, 600)  # another peer run on this machine
        started = time.monotonic()
        controller.start()
        try:
            await controller.wait_ready()
            await run_inputs(client)
            print(f"{name}: inputs done in {time.monotonic() - started:.1f} s")
            written = {
                "/".join(part for part in (r.resource, r.namespace, r.name) if part): r
                for r in audit.requests(cluster.audit_log)
                if r.user == peer.CONTROLLER_USER.name
            }
            objects: dict[str, dict[str, str] | None] = {}
            for key, request in sorted(written.items()):
                obj = audit.get_raw(cluster.server, request.path)
                objects[key] = None if obj is None else normalise(obj)
            listed = audit.get_raw(cluster.server, "/api/v1/events") or {}
            events = sorted(
                {
                    f"{e['type']} {e['reason']} {e['involvedObject']['kind']}/"
                    f"{e['involvedObject'].get('name')}: {e.get('message', '')}"
                    for e in listed.get("items", [])
                    if e.get("source", {}).get("component") != "kube-controller-manager"
                    or e.get("reportingComponent")
                }
            )
            return {"objects": objects, "events": events}
        finally:
            controller.stop()
            await maas_api.stop()
            await client.close()


def diff_rows(ours: dict[str, Any], theirs: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    a, b = ours["objects"], theirs["objects"]
    for key in sorted(set(a) | set(b)):
        if key not in b:
            yield key, "only ours", "gone" if a[key] is None else "present"
        elif key not in a:
            yield key, "only peer", "gone" if b[key] is None else "present"
        elif (a[key] is None) != (b[key] is None):
            yield key, "lifecycle", f"ours {'gone' if a[key] is None else 'present'}"
        elif a[key] is not None and b[key] is not None:
            for facet in sorted(set(a[key]) | set(b[key])):
                va, vb = a[key].get(facet, "-"), b[key].get(facet, "-")
                if va != vb:
                    yield key, facet, f"ours {va[:90]} | peer {vb[:90]}"
    ea, eb = set(ours["events"]), set(theirs["events"])
    for event in sorted(ea - eb):
        yield "Event", "only ours", event[:180]
    for event in sorted(eb - ea):
        yield "Event", "only peer", event[:180]


async def main(peer_command: str, peer_crds: Path | None, out: Path | None) -> None:
    ours_cmd = peer.our_command(Path("{ca_file}"), Path("{ca_key_file}"))
    ours = await collect("ours", ours_cmd, None)
    theirs = await collect("peer", peer_command.replace("{", "{{").replace("}", "}}"), peer_crds)
    if out is not None:
        await asyncio.to_thread(out.write_text, json.dumps({"ours": ours, "peer": theirs}))
    rows = list(diff_rows(ours, theirs))
    same = sum(1 for k in ours["objects"] if k in theirs["objects"])
    print(
        f"\nobjects written: ours {len(ours['objects'])}, peer {len(theirs['objects'])}, "
        f"by both {same}; differences: {len(rows)}\n"
    )
    print("| object | facet | difference |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")


def cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--peer-command", default=os.environ.get(peer.PEER_COMMAND_ENV))
    parser.add_argument("--peer-crds", type=Path, default=os.environ.get(peer.PEER_CRDS_ENV))
    parser.add_argument("--json", type=Path, help="also write both collections here")
    args = parser.parse_args()
    if not args.peer_command:
        parser.error(peer.HOW_TO_RUN)
    asyncio.run(main(args.peer_command, args.peer_crds, args.json))


if __name__ == "__main__":
    cli()
