module aitenant-k8s/tools/crds

go 1.26.0

require (
	github.com/cert-manager/cert-manager v1.19.1
	github.com/kuadrant/authorino v0.22.0
	github.com/kuadrant/kuadrant-operator v1.4.2
	istio.io/api v1.28.0
	sigs.k8s.io/gateway-api v1.5.1
)
