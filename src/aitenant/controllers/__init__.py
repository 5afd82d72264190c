"""The controllers, one package each: ``aitenant`` (AITenant), ``tenant_config``
(MaasTenantConfig) and ``default_tenant`` (the default-tenant bootstrap). Each package's
``setup.py`` says what it waits for and what wakes it; ``app`` calls the setups.

Beside them, what more than one uses: the shared caches (``caches``), conditions and the status
writer, finalizers, ownership metadata, shared predicates, and the legacy Tenant's migration
rules (``legacy_tenant``). Kinds and namespaces: docs/glossary.md.
"""
