"""The CRDs declare the same spec.oidc.ttl bounds as the rules the webhook and the legacy
migration apply (``spec_rules``): one fact, checked where it has to be written twice."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from aitenant import manifests, spec_rules


def _ttl_schema(filename: str, oidc_field: str) -> dict[str, Any]:
    crd = yaml.safe_load((manifests.CRDS / filename).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"][oidc_field]["properties"]["ttl"]


@pytest.mark.parametrize(
    ("filename", "oidc_field"), [("aitenants.yaml", "oidc"), ("tenants.yaml", "externalOIDC")]
)
def test_crd_ttl_bounds_are_the_rules(filename: str, oidc_field: str) -> None:
    ttl = _ttl_schema(filename, oidc_field)
    assert ttl["minimum"] == spec_rules.OIDC_TTL_MIN
    assert ttl["default"] == spec_rules.OIDC_TTL_DEFAULT
    assert f"Defaults to {spec_rules.OIDC_TTL_DEFAULT}; at least {spec_rules.OIDC_TTL_MIN}." in (
        " ".join(ttl["description"].split())
    )
