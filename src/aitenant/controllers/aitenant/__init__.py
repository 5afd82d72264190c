"""The AITenant controller: the create path, deletion and their steps (docs/contract.md §3.4,
§5); ``setup.py`` says what it waits for and what wakes it."""

from aitenant.controllers.aitenant.setup import setup

__all__ = ["setup"]
