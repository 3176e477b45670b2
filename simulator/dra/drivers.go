package dra

import (
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// otherDriver stands for every driver not named in metricDrivers, as
// upstream reports it.
const otherDriver = "custom.driver"

// metricDrivers are the drivers the dra_drivers metric label names: the
// four upstream names, plus AMD's GPU driver, which DOKS runs as an add-on
// (upstream counts it as custom.driver). Any other driver is otherDriver,
// so the label's values stay few.
var metricDrivers = []string{
	"compute-domain.nvidia.com",
	"dra.net",
	"gpu.amd.com",
	"gpu.nvidia.com",
	"tpu.google.com",
}

// DriversLabel returns the dra_drivers label of a node with these slices:
// the sorted, distinct names of their drivers joined by commas, or "" for a
// node without slices.
func DriversLabel(nodeSlices []*resourceapi.ResourceSlice) string {
	names := make([]string, 0, len(nodeSlices))
	for _, s := range nodeSlices {
		name := s.Spec.Driver
		if !slices.Contains(metricDrivers, name) {
			name = otherDriver
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}
