"""The control layer: what runs reconcilers. A work queue (``queue``) drained by a
controller's workers (``controller``), leader election with a Lease (``leader``), and the
manager that runs informers, servers and, once this replica leads, the controllers
(``manager``). It sits on top of the serving, cache and client layers.
"""
