"""Tools to run and measure the controller on a local cluster, kept apart from the product and
from the tests: the control plane and its node (``cluster``, ``node``, ``images``,
``postgres``, ``crds``), sample objects and a fake maas-api, the demo (``tox -e demo``), the
benchmarks' library (``bench``, ``chaos``, ``faults``), the audit-log reader and the peer
harness. tests/ and benchmarks/ use them; they live outside ``src/``, so neither the wheel nor
the rock ships them."""
