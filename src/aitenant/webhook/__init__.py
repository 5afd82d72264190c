"""The validating admission webhook for AITenant (``vaitenant.kb.io``).

``validators`` holds the decisions as pure functions; ``review`` the AdmissionReview handling
around them, which asks ``access``'s question (may the user ``use`` the Gateway) through
``sar``; ``server`` is the aiohttp HTTPS front end that only moves bytes to and from it;
``config`` renders the ValidatingWebhookConfiguration that points the API server at it.
"""
