"""aitenant: the AITenant controller for multi-tenant Models-as-a-Service on Kubernetes."""

__version__ = "0.1.0"
