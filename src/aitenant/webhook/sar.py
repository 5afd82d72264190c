"""The webhook's questions to the API server: SubjectAccessReviews (``access.GatewayUse``) and,
once at start, who the webhook itself is (a SelfSubjectReview).

Both run on the webhook's own loop with a client of its own (``app/servers.py``). A review
waits for the answer while a user waits for the API server, and the API server gives the whole
webhook call ``timeoutSeconds`` (10 s, ``manifests/webhook.yaml.j2``): each question is bounded
by ``SAR_TIMEOUT``, well inside it, so a slow API server gives a refusal that says why rather
than a call the API server abandons.

An unanswered question refuses the write (fail closed, docs/differences.md D34): allowing it
would let any requester attach a tenant to any Gateway whenever the API server is slow, which
is what the question is there to prevent; the webhook's ``failurePolicy: Fail`` already
refuses every AITenant write while the webhook cannot be reached, so a write refused here is
no new kind of outage, and the requester can retry.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final, cast

from lightkube import AsyncClient
from lightkube.resources.authentication_v1 import SelfSubjectReview
from lightkube.resources.authorization_v1 import SubjectAccessReview

from aitenant.runtime.client.api_errors import api_message
from aitenant.webhook.access import Answer, GatewayUse, subject_access_review

log = logging.getLogger(__name__)

SAR_TIMEOUT: Final = 3.0


class ApiAuthorizer:
    """``access.GatewayAuthorizer`` through the API server's SubjectAccessReview API."""

    def __init__(self, client: AsyncClient, *, timeout: float = SAR_TIMEOUT) -> None:
        self.client = client
        self.timeout = timeout

    async def may_use(self, question: GatewayUse) -> Answer:
        body = cast(
            SubjectAccessReview, SubjectAccessReview.from_dict(subject_access_review(question))
        )
        try:
            async with asyncio.timeout(self.timeout):
                reply = await self.client.create(body)
        except TimeoutError:
            return Answer(False, f"the API server did not answer within {self.timeout:g} s")
        except Exception as exc:  # any failure refuses: never allow on an error
            log.warning("SubjectAccessReview for %s failed: %s", question, api_message(exc))
            return Answer(False, f"the SubjectAccessReview failed: {api_message(exc)}")
        status = reply.status
        return Answer(bool(status is not None and status.allowed))


async def own_username(client: AsyncClient, *, timeout: float = SAR_TIMEOUT) -> str:
    """The username the API server knows this process by, or "" when it cannot say: the
    default tenant's name is then reserved for its Gateway against this process too
    (docs/differences.md D36)."""
    try:
        async with asyncio.timeout(timeout):
            reply = await client.create(SelfSubjectReview())
    except Exception as exc:
        log.warning("cannot learn the controller's own username: %s", api_message(exc))
        return ""
    info = reply.status.userInfo if reply.status is not None else None
    return (info.username or "") if info is not None else ""
