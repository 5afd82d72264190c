"""Packed informer copies: exact round trips, and objects of one kind packed small."""

from __future__ import annotations

import copy
import threading
from typing import Any

from aitenant.runtime.cache.packing import Packer, encode


def deployment(tenant: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "maas-api", "maas.opendatahub.io/tenant-name": tenant}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"maas-api-{tenant}", "namespace": "infra", "labels": labels},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "maas-api",
                            "image": "quay.io/opendatahub/maas-api:latest",
                            "args": [f"--tenant={tenant}", "--port=8443", "--secure=true"],
                            "env": [
                                {"name": "TENANT", "value": tenant},
                                {"name": "ÄÖ", "value": "ü"},
                            ],
                        }
                    ]
                },
            },
        },
        "status": {"conditions": [{"type": "Available", "status": "True"}]},
    }


def test_every_object_comes_back_exactly_and_afresh() -> None:
    packer = Packer()
    objects = [deployment(f"t{i}") for i in range(5)] + [{"metadata": {"name": "odd"}}]
    packed = [packer.pack(copy.deepcopy(obj)) for obj in objects]
    for obj, blob in zip(objects, packed, strict=True):
        first, second = packer.unpack(blob), packer.unpack(blob)
        assert first == obj
        first["metadata"]["name"] = "changed"
        assert second == obj, "each unpack is a copy of its own"


def test_objects_of_a_kind_pack_into_a_fraction_of_their_json() -> None:
    packer = Packer()
    packer.pack(deployment("first"))  # becomes the dictionary
    obj = deployment("second")
    assert len(packer.pack(obj)) * 4 < len(encode(obj))


def test_unpacking_from_another_thread_while_packing_goes_on() -> None:
    packer = Packer()
    blob = packer.pack(deployment("a"))
    seen: list[dict[str, Any]] = []

    def read() -> None:
        seen.extend(packer.unpack(blob) for _ in range(200))

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(200):
        packer.pack(deployment(f"b{i}"))
    reader.join()
    assert seen == [deployment("a")] * 200
