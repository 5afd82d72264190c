"""AdmissionReview in, AdmissionReview out: the pure envelope handling of ``review``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from webhook_fakes import POLICY, FakeAuthorizer, FakeIndex, admission_request, review_body, tenant

from aitenant import contract
from aitenant.webhook.review import DEFAULT_MAX_BYTES, review
from aitenant.webhook.validators import MSG_NOT_SYNCED


def run(
    body: bytes,
    index: FakeIndex | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    authorizer: FakeAuthorizer | None = None,
) -> tuple[int, dict[str, Any]]:
    return asyncio.run(
        review(
            body,
            policy=POLICY,
            index=index or FakeIndex(),
            authorizer=authorizer or FakeAuthorizer(),
            max_bytes=max_bytes,
        )
    )


def denial(status: int, document: dict[str, Any]) -> tuple[int, str, str]:
    assert status == 200
    assert document["apiVersion"] == "admission.k8s.io/v1"
    assert document["kind"] == "AdmissionReview"
    response = document["response"]
    assert response["allowed"] is False
    return response["status"]["code"], response["status"]["reason"], response["status"]["message"]


def test_allowed_create_reply_shape() -> None:
    status, document = run(review_body(admission_request("CREATE", tenant("team-a"))))
    assert status == 200
    assert document == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "req-1", "allowed": True},
    }
    json.dumps(document)  # serialisable as is


def test_denied_create_reply_is_403_forbidden_with_message() -> None:
    body = review_body(admission_request("CREATE", tenant("team-a", namespace="default")))
    status, document = run(body)
    assert document["response"]["uid"] == "req-1"
    assert denial(status, document) == (
        403,
        "Forbidden",
        "AITenant default/team-a must be created in the configured AITenant infrastructure "
        'namespace "ai-tenants"',
    )


def test_update_uses_old_and_new_objects() -> None:
    index = FakeIndex([tenant("team-a", gateway="gw-a"), tenant("team-b", gateway="gw-b")])
    request = admission_request(
        "UPDATE", tenant("team-a", gateway="gw-b"), tenant("team-a", gateway="gw-a")
    )
    code, reason, message = denial(*run(review_body(request), index))
    assert (code, reason) == (403, "Forbidden")
    assert message.startswith("gateway openshift-ingress/gw-b is already in use")


def test_update_of_unchanged_tenant_is_allowed() -> None:
    me = tenant("team-a")
    status, document = run(review_body(admission_request("UPDATE", me, me)), FakeIndex([me]))
    assert status == 200
    assert document["response"]["allowed"] is True


def test_not_synced_is_503_service_unavailable() -> None:
    body = review_body(admission_request("CREATE", tenant()))
    assert denial(*run(body, FakeIndex(synced=False))) == (
        503,
        "ServiceUnavailable",
        MSG_NOT_SYNCED,
    )


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_delete_and_connect_are_allowed_without_objects(operation: str) -> None:
    request = admission_request(operation, None, tenant())
    request.pop("oldObject")
    status, document = run(review_body(request))
    assert status == 200
    assert document["response"] == {"uid": "req-1", "allowed": True}


def test_namespace_is_taken_from_the_request_when_the_object_lacks_it() -> None:
    obj = tenant("team-a")
    del obj["metadata"]["namespace"]
    request = admission_request("CREATE", obj)
    request["namespace"] = "ai-tenants"
    _, document = run(review_body(request))
    assert document["response"]["allowed"] is True
    request["namespace"] = "default"
    assert denial(*run(review_body(request)))[2].startswith("AITenant default/team-a must be")


# --- malformed input: never raises ------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b"\xff\xfe\x00", b'{"a": NaN'])
def test_not_json_is_http_400(body: bytes) -> None:
    status, document = run(body)
    assert (status, document) == (400, {"error": "request body is not valid JSON"})


@pytest.mark.parametrize(("body", "got"), [(b"[]", "array"), (b'"x"', "string"), (b"1", "number")])
def test_json_that_is_not_an_object_is_http_400(body: bytes, got: str) -> None:
    status, document = run(body)
    assert status == 400
    assert document == {"error": f"request body must be an AdmissionReview object, got {got}"}


def test_deeply_nested_json_does_not_raise() -> None:
    status, _ = run(b"[" * 100_000 + b"]" * 100_000)
    assert status == 400


def test_wrong_envelope_kind_without_uid_is_http_400() -> None:
    status, document = run(json.dumps({"kind": "Pod", "apiVersion": "v1"}).encode())
    assert (status, document) == (400, {"error": 'expected kind AdmissionReview, got "Pod"'})


def test_wrong_envelope_kind_with_uid_is_a_bad_request_denial() -> None:
    body = review_body(admission_request("CREATE", tenant()), kind="TokenReview")
    assert denial(*run(body)) == (
        400,
        "BadRequest",
        'expected kind AdmissionReview, got "TokenReview"',
    )


def test_v1beta1_reviews_are_refused() -> None:
    body = review_body(admission_request("CREATE", tenant()), apiVersion="admission.k8s.io/v1beta1")
    code, reason, message = denial(*run(body))
    assert (code, reason) == (400, "BadRequest")
    assert message == (
        'unsupported AdmissionReview version "admission.k8s.io/v1beta1"; '
        "only admission.k8s.io/v1 is served"
    )


def test_review_without_request_is_http_400() -> None:
    status, document = run(review_body(None))
    assert (status, document) == (400, {"error": "AdmissionReview has no request"})


@pytest.mark.parametrize("uid", [None, "", 42])
def test_review_without_usable_uid_is_http_400(uid: Any) -> None:
    request = admission_request("CREATE", tenant())
    if uid is None:
        del request["uid"]
    else:
        request["uid"] = uid
    status, document = run(review_body(request))
    assert (status, document) == (400, {"error": "AdmissionReview request.uid is missing"})


def test_review_of_another_kind_is_a_bad_request_denial() -> None:
    request = admission_request("CREATE", {"apiVersion": "v1", "kind": "Pod"})
    request["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    request["resource"] = {"group": "", "version": "v1", "resource": "pods"}
    code, reason, message = denial(*run(review_body(request)))
    assert (code, reason) == (400, "BadRequest")
    assert message == (
        f"this webhook only validates {contract.API_VERSION} AITenant (aitenants), "
        "got kind Pod of resource /v1/pods"
    )


def test_review_of_the_status_subresource_is_a_bad_request_denial() -> None:
    request = admission_request("UPDATE", tenant(), tenant())
    request["subResource"] = "status"
    code, _, message = denial(*run(review_body(request)))
    assert code == 400
    assert message.endswith("of resource maas.opendatahub.io/v1alpha1/aitenants/status")


def test_review_without_kind_or_resource_is_a_bad_request_denial() -> None:
    request = admission_request("CREATE", tenant())
    del request["resource"]
    assert denial(*run(review_body(request))) == (
        400,
        "BadRequest",
        "AdmissionReview request.kind and request.resource are required",
    )


def test_create_without_object_is_a_bad_request_denial() -> None:
    request = admission_request("CREATE", None, None)
    assert denial(*run(review_body(request))) == (
        400,
        "BadRequest",
        "AdmissionReview request.object is missing",
    )


def test_update_without_old_object_is_a_bad_request_denial() -> None:
    request = admission_request("UPDATE", tenant())
    assert denial(*run(review_body(request))) == (
        400,
        "BadRequest",
        "AdmissionReview request.oldObject is missing",
    )


def test_unknown_operation_is_a_bad_request_denial() -> None:
    request = admission_request("PATCH", tenant())
    assert denial(*run(review_body(request))) == (
        400,
        "BadRequest",
        'unsupported admission operation "PATCH"',
    )


def test_object_of_the_wrong_kind_inside_an_aitenant_review_is_denied() -> None:
    request = admission_request("CREATE", {"apiVersion": "v1", "kind": "Pod"})
    code, _, message = denial(*run(review_body(request)))
    assert (code, message) == (403, "expected AITenant object, got v1, Kind=Pod")


def test_oversized_body_is_413() -> None:
    body = review_body(admission_request("CREATE", tenant()))
    status, document = run(body, max_bytes=len(body) - 1)
    assert status == 413
    assert document == {"error": f"AdmissionReview body exceeds {len(body) - 1} bytes"}
    assert run(body, max_bytes=len(body))[0] == 200


def test_a_failing_index_never_escapes_review() -> None:
    class Exploding(FakeIndex):
        def has_synced(self) -> bool:
            raise RuntimeError("cache exploded")

    body = review_body(admission_request("CREATE", tenant()))
    code, reason, message = denial(*run(body, Exploding()))
    assert (code, reason) == (500, "InternalError")
    assert message == (
        "internal error while validating the AITenant: RuntimeError('cache exploded')"
    )
