"""The per-tenant maas-api platform (docs/differences.md D5, D6, D9): render, apply, prune.

``render`` turns a ``PlatformContext`` into the objects of one tenant, from the Jinja2
templates in ``aitenant/templates``; it is pure (the serving certificate it renders comes from
``aitenant.certificates``). ``apply`` writes the rendered set with server-side
apply and leaves opted-out objects alone; ``prune`` finds a tenant's objects and deletes those
no longer rendered; ``kinds`` declares the kinds and where they live; ``cache`` holds their
informers. ``discovery`` answers which API versions the cluster serves. The reconciler that
decides *when* to do all this lives in ``aitenant.controllers.tenant_config.reconciler``.
"""
