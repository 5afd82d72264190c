"""The claim ConfigMaps' owner index files a claim under every name its owner rule looks at."""

from __future__ import annotations

from aitenant import contract
from aitenant.controllers.aitenant.gateway_claim import claim_owner_names


def test_controller_reference_and_annotation_both_file_the_claim() -> None:
    claim = {
        "metadata": {
            "name": "claim",
            "ownerReferences": [
                {"kind": "AITenant", "name": "red", "controller": True, "uid": "1"},
                {"kind": "AITenant", "name": "not-controller", "uid": "2"},
                {"kind": "Other", "name": "other", "controller": True, "uid": "3"},
            ],
            "annotations": {contract.ANNOTATION_AITENANT_NAME: "blue"},
        }
    }
    assert claim_owner_names(claim) == ["blue", "red"]


def test_a_claim_without_owner_is_filed_nowhere() -> None:
    assert claim_owner_names({"metadata": {"name": "claim"}}) == []
