"""Every CRD the e2e suite, the demo and the benchmarks install.

* ours (``aitenant.manifests``, what the charm applies);
* the real CRDs of the kinds other projects own that we read or write: Gateway API and
  Kuadrant, read at test time from the Go modules locked in ``tools/crds/`` (the module cache
  keeps them outside the checkout; nothing of theirs is copied into the repository);
* typed stand-ins for the MaaS kinds no module serves (``tests/crds/``, see its README).
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any, Final

import yaml

from aitenant import manifests

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
CRD_MODULES: Final = REPO_ROOT / "tools" / "crds"
STAND_INS: Final = REPO_ROOT / "tests" / "crds"

# Module path -> (folder of its CRDs, the file names to install; None: every CRD there).
THIRD_PARTY: Final[dict[str, tuple[str, tuple[str, ...] | None]]] = {
    "sigs.k8s.io/gateway-api": ("config/crd/standard", None),
    "github.com/kuadrant/kuadrant-operator": (
        "config/crd/bases",
        (
            "kuadrant.io_authpolicies.yaml",
            "kuadrant.io_ratelimitpolicies.yaml",
            "kuadrant.io_tokenratelimitpolicies.yaml",
            "extensions.kuadrant.io_telemetrypolicies.yaml",
        ),
    ),
}

Doc = dict[str, Any]


@cache
def module_dir(module: str) -> Path:
    """Where the module cache holds ``module`` at the version tools/crds/go.mod locks
    (downloaded and checked against tools/crds/go.sum on first use)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", module],
        cwd=CRD_MODULES,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    info = json.loads(out)
    if "Error" in info:
        raise RuntimeError(f"go mod download {module}: {info['Error']}")
    return Path(info["Dir"])


def _crds_in(path: Path) -> list[Doc]:
    docs = yaml.safe_load_all(path.read_text("utf-8"))
    return [d for d in docs if d and d.get("kind") == "CustomResourceDefinition"]


@cache
def third_party_documents() -> tuple[Doc, ...]:
    """The real CRDs of Gateway API and Kuadrant that we read or write."""
    found: list[Doc] = []
    for module, (folder, names) in THIRD_PARTY.items():
        root = module_dir(module) / folder
        paths = sorted(root.glob("*.yaml")) if names is None else [root / n for n in names]
        for path in paths:
            found.extend(_crds_in(path))
    return tuple(found)


def stand_in_documents() -> list[Doc]:
    return manifests.crd_documents(STAND_INS)


def all_documents() -> list[Doc]:
    """Ours, then the third-party ones, then the MaaS stand-ins."""
    return [
        *manifests.crd_documents(),
        *third_party_documents(),
        *stand_in_documents(),
    ]


def third_party_and_stand_ins() -> list[Doc]:
    """Everything but ours (for a test that installs ours through the charm)."""
    return [*third_party_documents(), *stand_in_documents()]
