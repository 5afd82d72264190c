"""Wiring: settings → client → informers, controllers, servers → one Manager.

The only package that knows every part; everything else takes its collaborators as arguments.
``build_app`` (``wiring``) calls one builder per concern, in this order:

- ``caches.build_caches``            the informers and read caches, and their start order
- ``controllers.build_controllers``  both reconcilers with their collaborators, their
                                     controllers, the default-tenant bootstrap
- ``reconcilers.watches``            ``requeue_*``/``wake_bootstrap``: which events queue what
- ``manager.build_manager``          leader election and the Manager
- ``servers.build_servers``          health, metrics and the admission webhook

``client.connect`` makes the API client; ``process.main`` is the command line.
"""

from aitenant.app.client import connect, make_client
from aitenant.app.process import main, run
from aitenant.app.wiring import App, build_app

__all__ = ["App", "build_app", "connect", "main", "make_client", "run"]
