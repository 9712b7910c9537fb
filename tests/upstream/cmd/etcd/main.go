// Command etcd is the etcd server, built from the pinned
// go.etcd.io/etcd/server/v3 module: etcd's own main is in its root module,
// which only calls etcdmain.Main, as this does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
