//go:build tools

// Package upstream pins the upstream Kubernetes components that Muster's
// real-cluster tests run (tests/real_cluster): kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok. The blank imports keep
// them in go.mod and go.sum; tests/support/build-upstream.sh builds them.
// etcd is pinned in its own module, cmd/etcd: etcd's 3.6 server needs its
// own 3.6 client libraries, and Kubernetes 1.37 requires the 3.7 ones.
package upstream

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
