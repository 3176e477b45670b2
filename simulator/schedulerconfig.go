package simulator

import (
	"fmt"
	"os"
	"slices"

	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// LoadSchedulerProfile reads the KubeSchedulerConfiguration file of
// --scheduler-config-file as upstream does (decoded and defaulted by the
// scheduler's own scheme, validated by its validation) and returns its one
// profile: the simulation must filter as the cluster's scheduler does
// (plugins it disables, plugin arguments such as NodeAffinity's
// addedAffinity or PodTopologySpread's default constraints). Upstream
// accepts exactly one profile, and so does this.
func LoadSchedulerProfile(path string) (*schedconfig.KubeSchedulerProfile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the scheduler configuration: %w", err)
	}
	obj, gvk, err := schedscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the scheduler configuration %s: %w", path, err)
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("%s holds a %s, not a KubeSchedulerConfiguration", path, gvk)
	}
	// Validation reads the version (decoding leaves it empty), as
	// kube-scheduler's own loader sets it.
	cfg.TypeMeta.APIVersion = gvk.GroupVersion().String()
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, fmt.Errorf("invalid scheduler configuration %s: %w", path, err)
	}
	if len(cfg.Profiles) != 1 {
		return nil, fmt.Errorf("scheduler configuration %s: expected exactly one profile, found %d (the simulation runs one, as upstream's)", path, len(cfg.Profiles))
	}
	return &cfg.Profiles[0], nil
}

// filterPlugins returns the plugins of candidates (in their order) that run
// at Filter in profile, as the scheduler framework expands it: MultiPoint
// plugins unless disabled at Filter (by name or "*"), plus those enabled
// at Filter itself.
func filterPlugins(profile *schedconfig.KubeSchedulerProfile, candidates []string) []string {
	if profile == nil || profile.Plugins == nil {
		return candidates
	}
	p := profile.Plugins
	disabled := func(name string) bool {
		for _, d := range p.Filter.Disabled {
			if d.Name == name || d.Name == "*" {
				return true
			}
		}
		return false
	}
	on := map[string]bool{}
	for _, e := range p.MultiPoint.Enabled {
		if !disabled(e.Name) {
			on[e.Name] = true
		}
	}
	for _, e := range p.Filter.Enabled {
		on[e.Name] = true
	}
	return slices.DeleteFunc(slices.Clone(candidates), func(name string) bool { return !on[name] })
}
