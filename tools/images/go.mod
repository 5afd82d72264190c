module aitenant-k8s/tools/images

go 1.26.0
