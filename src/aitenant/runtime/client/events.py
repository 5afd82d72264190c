"""Kubernetes Events (core/v1), the first thing an operator sees in ``kubectl describe``."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, client: AsyncClient, *, component: str) -> None:
        self.client = client
        self.component = component

    async def record(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Best effort: an Event that cannot be written is logged, never fails a reconcile."""
        meta = obj["metadata"]
        now = dt.datetime.now(dt.UTC)
        event = Event(
            metadata=ObjectMeta(
                name=f"{meta['name']}.{uuid.uuid4().hex[:16]}", namespace=meta.get("namespace")
            ),
            involvedObject=ObjectReference(
                apiVersion=obj.get("apiVersion"),
                kind=obj.get("kind"),
                name=meta["name"],
                namespace=meta.get("namespace"),
                uid=meta.get("uid"),
                resourceVersion=meta.get("resourceVersion"),
            ),
            type=type_,
            reason=reason,
            message=message[:1024],
            source=EventSource(component=self.component),
            firstTimestamp=now,
            lastTimestamp=now,
            count=1,
        )
        try:
            await self.client.create(event)
        except ApiError as exc:
            log.warning("could not record event %s on %s: %s", reason, meta["name"], exc)
