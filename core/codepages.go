package core

import (
	"errors"
	"time"

	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/internal/codepages"
)

// codePagesInterval is how often the binary's code pages are released
// again after the first time: a scale-up or a drain maps code the idle
// loop does not run, and it stays mapped until released.
const codePagesInterval = time.Hour

// codePages releases the binary's code and read-only data once the first
// iteration is over, and then every codePagesInterval: start-up runs code
// the loop never runs again (package initializers, flag parsing, the
// caches' first lists), and keeping it mapped kept about 10 MiB more
// resident at 1,000 nodes. What the loop runs is mapped back from the page
// cache as it runs. See internal/codepages.
type codePages struct {
	// last is when the pages were last released; unsupported: this
	// executable's cannot be (never tried again).
	last        time.Time
	unsupported bool
	// release replaces codepages.Release in tests.
	release func() (int64, error)
}

// afterIteration releases the pages when it is time to.
func (c *codePages) afterIteration(now time.Time) {
	if c.unsupported || !c.last.IsZero() && now.Sub(c.last) < codePagesInterval {
		return
	}
	first := c.last.IsZero()
	c.last = now
	release := codepages.Release
	if c.release != nil {
		release = c.release
	}
	n, err := release()
	switch {
	case errors.Is(err, codepages.ErrUnsupported):
		c.unsupported = true
		klog.V(2).InfoS("The binary's code pages stay mapped", "reason", err.Error())
	case err != nil:
		klog.ErrorS(err, "Releasing the binary's code pages failed")
	case first:
		klog.V(2).InfoS("Start-up done: released the binary's code and read-only data pages; the loop maps back what it runs",
			"MiB", n>>20)
	default:
		klog.V(4).InfoS("Released the binary's code and read-only data pages", "MiB", n>>20)
	}
}
