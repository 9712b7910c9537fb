//! kube-scheduler's in-tree plugins Muster ships, one file each.
