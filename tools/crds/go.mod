module aitenant-k8s/tools/crds

go 1.26.0

require (
	github.com/kuadrant/kuadrant-operator v1.4.2
	sigs.k8s.io/gateway-api v1.5.1
)
