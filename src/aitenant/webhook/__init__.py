"""The validating admission webhook for AITenant (``vaitenant.kb.io``).

``validators`` holds the decisions and the AdmissionReview handling as pure functions; ``server``
is the aiohttp HTTPS front end that only moves bytes to and from them; ``config`` renders the
ValidatingWebhookConfiguration that points the API server at it.
"""
