package metrics_test

import (
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

// DOAPIObserver must stay installable with digitalocean.BuilderObservedBy.
var _ digitalocean.CallObserver = metrics.DOAPIObserver{}

// and count the pools the provider refuses as node groups.
var _ digitalocean.RefusalObserver = metrics.DOAPIObserver{}
