"""Generic controller runtime: informers, work queue, controllers, leader election, servers.

Nothing in this package knows about tenants; reconcilers plug into it through ``Controller``.
"""
