// Build-tag scheme for provider router files. Each provider has one router
// file whose constraint reads
//
//	<its tag> || !(<tag of every provider>)
//
// that is: compiled in when its tag is given, or when no provider tag is
// given at all. A plain `go build` links every provider; `-tags digitalocean`
// (or a list of provider tags) links exactly the named ones. Adding a
// provider means adding its tag to the negated list of every router file.
// DigitalOcean is the only provider today, so the list holds only its own tag
// and the constraint always holds: DigitalOcean is always compiled in, and is
// the default provider.

//go:build digitalocean || !digitalocean

package builder

import (
	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean"
	"github.com/doks-autoscaler/cluster-autoscaler/metrics"
)

func init() {
	// Every DigitalOcean request is counted, timed and its rate-limit headers
	// exported (cluster_autoscaler_digitalocean_api_*).
	RegisterCloudProvider(digitalocean.ProviderName, digitalocean.BuilderObservedBy(metrics.DOAPIObserver{}))
}
