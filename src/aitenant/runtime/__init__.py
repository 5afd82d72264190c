"""Generic controller runtime: informers, work queue, controllers, leader election, servers.

Nothing in this package knows about tenants; reconcilers plug into it through ``Controller``.
Four layers, each importing only those below it (import-linter checks it): ``control`` (work
queue, controllers, leader election, the manager), ``serving`` (health and metrics endpoints,
metrics, TLS, the server thread), ``cache`` (informers and the reads served from them) and
``client`` (transport, retries, requests, API errors, Events).
"""
