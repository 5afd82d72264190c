"""The test harness: a local control plane, a fault proxy, chaos scenarios, a fake maas-api,
sample objects and the demo. Used by tests/, benchmarks/ and `tox -e demo`; it lives outside
`src/aitenant`, so neither the wheel nor the rock ships it."""
