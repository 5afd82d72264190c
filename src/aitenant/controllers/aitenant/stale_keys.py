"""Keys an earlier tenant of the same name left behind are revoked before a tenant is first
Active (docs/contract.md §5.2).

maas-api keeps API keys by tenant name in the one database every tenant's maas-api shares, so a
tenant recreated under a deleted one's name would accept whatever keys outlived that one (a
forced deletion, a revocation that failed). The first time a tenant's platform is Ready, before
it is Active, the controller sends its maas-api the same revocation a deletion sends; the
outcome is the ``StaleAPIKeysRevoked`` condition, in the status that only the controller writes
(nothing the requester writes can skip it). Until then the tenant is Pending; a failure is
reported and tried again after the revocation's own backoff.

A tenant already Active when it first meets this step has served keys of its own since, which
must not be revoked: it is only marked (``ProvisionedEarlier``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aitenant import contract
from aitenant.controllers import conditions
from aitenant.controllers.aitenant.revocation import RevocationError, RevocationKey, Revocations
from aitenant.controllers.status import StatusWriter
from aitenant.errors import StepFailed
from aitenant.resources import AITenantView
from aitenant.settings import Settings

log = logging.getLogger(__name__)

Reason = contract.Reason
# The fallback wake-up while the revocation runs; its end wakes the tenant at once.
REQUEUE_STALE_REVOCATION = 15.0


def stale_key(tenant: AITenantView, url: str) -> RevocationKey:
    """Its own revocation: a deletion's, started meanwhile, never reads this one's outcome."""
    return (tenant.namespace, tenant.name, f"{tenant.uid}/provisioning", url)


@dataclass(frozen=True, kw_only=True)
class StaleKeys:
    revocations: Revocations
    settings: Settings

    async def revoked(self, tenant: AITenantView, status: StatusWriter) -> bool:
        """True once the stale keys are revoked (now or in an earlier pass); False while the
        revocation runs (the tenant is Pending, and woken when it ends). A failure raises
        ``StaleAPIKeysRevocationFailed``."""
        cond = conditions.find_condition(status.status, contract.CONDITION_STALE_API_KEYS_REVOKED)
        if cond is not None and cond.get("status") == "True":
            return True
        if tenant.status.get("phase") == contract.PHASE_ACTIVE:
            self._record(
                tenant, status, Reason.PROVISIONED_EARLIER, contract.Message.PROVISIONED_EARLIER
            )
            return True
        url = self.settings.maas_api_url(tenant.name)
        outcome = await self.revocations.outcome(stale_key(tenant, url), provisioning=True)
        if outcome is None:
            status.set_phase(
                contract.PHASE_PENDING,
                Reason.REVOKING_STALE_API_KEYS,
                contract.Message.STALE_API_KEYS_PENDING,
            )
            return False
        if isinstance(outcome, RevocationError):
            raise StepFailed(
                Reason.STALE_API_KEYS_REVOCATION_FAILED,
                str(outcome),
                phase=contract.PHASE_PENDING,
                requeue_after=REQUEUE_STALE_REVOCATION,
            )
        log.info(
            "aitenant %s/%s: revoked %d API keys left under its name",
            tenant.namespace,
            tenant.name,
            outcome,
        )
        message = contract.Message.STALE_API_KEYS_REVOKED.format(count=outcome)
        self._record(tenant, status, Reason.REVOKED, message)
        return True

    @staticmethod
    def _record(tenant: AITenantView, status: StatusWriter, reason: str, message: str) -> None:
        conditions.set_condition(
            status.status,
            type_=contract.CONDITION_STALE_API_KEYS_REVOKED,
            state=True,
            reason=reason,
            message=message,
            generation=tenant.generation,
        )
