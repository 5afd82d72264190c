"""The charm's modules, one per concern; ``src/charm.py`` wires Juju's events to them.

Pure builders (no I/O):

- ``config``: the `juju config` options, parsed and validated (pydantic);
- ``flags``: from config and relation data to the controller's command line;
- ``cluster_manifests``: the cluster objects the charm applies (CRDs, RBAC, webhook
  configuration);
- ``pki``: the charm's X.509 code: PEM bundles and fingerprints, the internal CA and the
  certificates it issues.

Steps with I/O, each given its collaborators (the lightkube client, the ops model, the
workload container):

- ``api_server_reads``: reads only: trust, the API server's version, another deployment on
  the cluster (read once per dispatch), the tenant count;
- ``api_server_writes``: apply the CRDs, ClusterRoles and the controller's bindings and Roles;
- ``internal_ca``: the internal CA and the fallback webhook certificate (Juju secrets);
- ``webhook_trust``: the caBundle and the CA overlap across units (``aitenant-peers``);
- ``workload``: the container's names, ports and files;
- ``pebble_layer``: the layer and checks, replan, stop, the /readyz probe;
- ``removal``: the prepare-removal action and the remove hook;
- ``cos``: the COS relation databags and Loki log targets;
- ``status``: the rungs of the status ladder (the first, ``cluster_hold``, is also the
  reconcile's guard);
- ``lightkube_private``: the charm's only reach into lightkube's private API;
- ``databag``: write a relation databag only where it differs.

The charm runs in the charm container, not the controller's: from ``aitenant`` it imports only
what the import-linter contract "the charm imports from aitenant only ..." allows.
"""
