// Command etcd is etcd's server, built from the go.etcd.io/etcd/server/v3 module (the proxy
// does not serve the module that holds etcd's own main package).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
