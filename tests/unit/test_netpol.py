"""The parts of the node's NetworkPolicy engine (devtools/netpol.py) that need no node: which
``iptables-save`` lines it removes at stop, and the rights its user gets
(tests/e2e/controller/test_network_enforced.py sees it enforce on the real node)."""

from __future__ import annotations

from devtools.netpol import CHAIN_PREFIXES, USER, jumps_into, ours, rbac

CHAINS = {"KUBE-ROUTER-FORWARD", "KUBE-POD-FW-ABC", "KUBE-NWPLCY-DEFAULT"}


def test_only_other_chains_rules_jumping_into_ours_are_removed() -> None:
    hook = '-A FORWARD -m comment --comment "kube-router netpol - X" -j KUBE-ROUTER-FORWARD'
    assert jumps_into(hook, CHAINS)
    # Inside our own chains: they go with the chain (flushed, then deleted).
    assert not jumps_into("-A KUBE-ROUTER-FORWARD -d 10.244.0.5/32 -j KUBE-POD-FW-ABC", CHAINS)
    # The kubelet's and anyone else's stay.
    assert not jumps_into("-A INPUT -j KUBE-FIREWALL", CHAINS)
    assert not jumps_into("-A FORWARD -j ACCEPT", CHAINS)
    assert not jumps_into(":KUBE-ROUTER-FORWARD - [0:0]", CHAINS)


def test_prefixes_pick_kube_routers_chains_only() -> None:
    assert ours("KUBE-POD-FW-ABC", CHAIN_PREFIXES)
    assert not ours("KUBE-FIREWALL", CHAIN_PREFIXES)
    assert not ours("KUBE-KUBELET-CANARY", CHAIN_PREFIXES)


def test_its_user_only_reads() -> None:
    role, binding = rbac(USER)
    rules = role["rules"]
    assert isinstance(rules, list)
    assert {verb for rule in rules for verb in rule["verbs"]} == {"get", "list", "watch"}
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER.name}
    ]
