package main

import (
	_ "github.com/digitalocean/godo"
	_ "golang.org/x/oauth2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/klog/v2"
	_ "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	_ "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app/testing"
	_ "k8s.io/apiserver/pkg/storage/etcd3/testing"
)
func main() {}
