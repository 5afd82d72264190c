"""The default-tenant bootstrap: Config/default and the default AITenant (docs/contract.md §4);
``setup.py`` says what wakes it."""

from aitenant.controllers.default_tenant.setup import setup

__all__ = ["setup"]
