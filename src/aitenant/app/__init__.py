"""Wiring: settings → client → informers, controllers, servers → one Manager.

The only package that knows every part; everything else takes its collaborators as arguments.
``build_app`` (``wiring``) calls one builder per concern, in this order:

- ``aitenant.controllers.caches.build_caches``  the informers and read caches, their start order
- ``controllers.build_controllers``  each controller's ``setup`` (``aitenant/controllers/<name>/
                                     setup.py``: what it waits for, what wakes it)
- ``manager.build_manager``          leader election and the Manager
- ``servers.build_servers``          health, metrics and the admission webhook

``client.connect`` makes the API client; ``process.main`` is the command line;
``aitenant_namespace`` ensures ``--aitenant-namespace`` at start and keeps it (leader only).
"""

from aitenant.app.client import connect, make_client
from aitenant.app.process import main, run
from aitenant.app.wiring import App, build_app

__all__ = ["App", "build_app", "connect", "main", "make_client", "run"]
