"""What every replica serves: the health and metrics endpoints (``http``), the Prometheus
metrics they render (``metrics``), a TLS context that follows its certificate files (``tls``)
and a server on an event loop of its own in a thread (``server_thread``, for the webhook).
It reads the cache layer (the informers' sizes, for ``metrics``) and nothing above it.
"""
