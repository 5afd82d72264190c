"""The MaasTenantConfig controller: the tenant's maas-api platform and its cleanup
(docs/contract.md §3.6, §5.4); ``setup.py`` says what it waits for and what wakes it."""

from aitenant.controllers.tenant_config.setup import setup

__all__ = ["setup"]
