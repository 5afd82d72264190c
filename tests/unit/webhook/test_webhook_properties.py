"""Property-based: whatever bytes arrive, ``review`` answers with a valid response and never
raises."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from webhook_fakes import POLICY, FakeAuthorizer, FakeIndex

from aitenant.webhook.review import review

MAX = 64 * 1024

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", max_size=50)


@st.composite
def admission_reviews(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly well-shaped reviews with random holes and random values in the object."""
    obj: dict[str, Any] = {
        "apiVersion": draw(st.sampled_from(["maas.opendatahub.io/v1alpha1", "v1", ""])),
        "kind": draw(st.sampled_from(["AITenant", "Pod", ""])),
        "metadata": {"name": draw(names), "namespace": draw(names)},
        "spec": draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "gateway": st.fixed_dictionaries({}, optional={"name": names | json_values}),
                    "oidc": st.fixed_dictionaries(
                        {},
                        optional={
                            "issuerUrl": st.text() | json_values,
                            "clientId": st.text() | json_values,
                            "ttl": st.integers() | json_values,
                        },
                    ),
                    "rbac": json_values,
                },
            )
            | json_values
        ),
    }
    request: dict[str, Any] = {
        "uid": draw(st.text(max_size=10) | json_values),
        "operation": draw(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "?"])),
        "kind": {"group": "maas.opendatahub.io", "version": "v1alpha1", "kind": "AITenant"},
        "resource": {
            "group": "maas.opendatahub.io",
            "version": "v1alpha1",
            "resource": draw(st.sampled_from(["aitenants", "pods"])),
        },
        "namespace": draw(names),
        "object": draw(st.just(obj) | json_values),
        "oldObject": draw(st.just(obj) | json_values | st.none()),
    }
    for key in draw(st.sets(st.sampled_from(sorted(request)))):
        del request[key]
    return {
        "apiVersion": draw(st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])),
        "kind": draw(st.sampled_from(["AdmissionReview", "Other"])),
        "request": request,
    }


def check_answer(status: int, document: dict[str, Any]) -> None:
    assert status in (200, 400, 413)
    json.dumps(document)  # serialisable
    if status == 200:
        response = document["response"]
        assert isinstance(response["allowed"], bool)
        assert isinstance(response["uid"], str)
        if not response["allowed"]:
            assert response["status"]["code"] in (400, 403, 500, 503)
            assert response["status"]["message"]
    else:
        assert isinstance(document.get("error") or document.get("response"), (str, dict))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_get_a_valid_answer(body: bytes) -> None:
    check_answer(
        *asyncio.run(
            review(
                body, policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), max_bytes=MAX
            )
        )
    )


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_random_json_gets_a_valid_answer(value: Any) -> None:
    body = json.dumps(value).encode()
    check_answer(
        *asyncio.run(
            review(
                body, policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), max_bytes=MAX
            )
        )
    )


@settings(max_examples=500, deadline=None)
@given(admission_reviews(), st.booleans())
def test_random_admission_reviews_get_a_valid_answer(doc: dict[str, Any], synced: bool) -> None:
    body = json.dumps(doc).encode()
    check_answer(
        *asyncio.run(
            review(
                body,
                policy=POLICY,
                authorizer=FakeAuthorizer(),
                index=FakeIndex(synced=synced),
                max_bytes=MAX,
            )
        )
    )
