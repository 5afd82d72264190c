"""The client layer: how requests reach the API server and what their answers mean.

aiohttp under lightkube's httpx2 interface (``transport``), reads retried inside it
(``retry``), the requests lightkube has no method for (``requests``, through
``lightkube_private``, the one module that reaches into lightkube's private API), and Events
(``events``). Nothing here imports the rest of the runtime.
"""
