"""A Juju model for the charm's tests, unit and end-to-end alike: ``kit`` runs one hook on a
fresh charm through ``ops.testing``; ``model`` holds a deployment's units, relations and
secrets across hooks, as Juju would."""
