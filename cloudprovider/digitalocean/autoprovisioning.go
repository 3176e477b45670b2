package digitalocean

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider"
	"github.com/doks-autoscaler/cluster-autoscaler/utils/gpu"
)

// TagAutoprovisioned marks a node pool this autoscaler created. Only pools
// carrying it are ever deleted by the autoscaler; with auto_scale off it
// makes the pool a node group in either node_pool_selection mode, bounded
// by its min/max tags.
const TagAutoprovisioned = "k8s-cluster-autoscaler-autoprovisioned"

// Defaults of the cloud config's autoprovisioning section.
const (
	defaultMaxNodesPerPool = 10
	maxMaxNodesPerPool     = 1000
	defaultNamePrefix      = "ca-"
	maxNamePrefix          = 20
	// poolNameMax: a pool's name is a DNS label, as DOKS requires (it is
	// the value of the doks.digitalocean.com/node-pool label).
	poolNameMax = validation.DNS1123LabelMaxLength
)

// autoprovisioningFile is the cloud config's "autoprovisioning" section.
type autoprovisioningFile struct {
	// Sizes are the droplet size slugs pools may be created with; "*" and
	// "?" match as in shell patterns ("s-*", "gpu-h100x1-80gb").
	Sizes []string `json:"sizes"`
	// MaxNodesPerPool is the max of every created pool.
	MaxNodesPerPool *int `json:"max_nodes_per_pool"`
	// NamePrefix starts the name of every created pool.
	NamePrefix string `json:"name_prefix"`
	// TaintKeys are the taint keys a created pool may carry for workload
	// separation (see separationTaints in core/scaleup): a pod selecting
	// key=value and tolerating key=value:NoSchedule gets a pool with that
	// label and that taint only when key is listed here.
	TaintKeys []string `json:"taint_keys"`
	// MaxHourlyCostPerPool bounds what each created pool's nodes may cost
	// an hour, in USD; the pool carries it as its
	// TagPrefixMaxHourlyCostCents tag, in whole cents.
	MaxHourlyCostPerPool *float64 `json:"max_hourly_cost_per_pool"`
	// SizePreference, when set, lists the sizes pools may be created with
	// in the operator's order (autoprovisioning_preference.go).
	SizePreference []string `json:"size_preference"`
}

// autoprovisioningConfig is a validated autoprovisioning section.
type autoprovisioningConfig struct {
	sizes           []string
	maxNodesPerPool int
	namePrefix      string
	taintKeys       []string
	// maxHourlyCostCents: the created pools' own hourly limit (0: none).
	maxHourlyCostCents int
	// sizePreference: the only sizes pools are created with, first
	// preferred; nil: every allowed size, cheapest first.
	sizePreference []string
	// loggedUnknown: preferred sizes the catalogue lacks, logged once.
	loggedUnknown sync.Map
}

var (
	sizePattern = regexp.MustCompile(`^[a-z0-9*?-]+$`)
	namePrefix  = regexp.MustCompile(`^[a-z]([a-z0-9-]*)$`)
)

// parseAutoprovisioning validates the section; every error names its field.
func parseAutoprovisioning(f *autoprovisioningFile) (*autoprovisioningConfig, error) {
	if f == nil {
		return nil, nil
	}
	c := &autoprovisioningConfig{maxNodesPerPool: defaultMaxNodesPerPool, namePrefix: defaultNamePrefix}
	if len(f.Sizes) == 0 {
		return nil, errors.New(`autoprovisioning.sizes is empty: name the droplet sizes pools may be created with, e.g. ["s-*", "gpu-h100x1-80gb"]`)
	}
	for i, s := range f.Sizes {
		if !sizePattern.MatchString(s) || len(s) > 64 {
			return nil, fmt.Errorf("autoprovisioning.sizes[%d] %s is not a size slug or pattern: want lower-case letters, digits, '-', and the wildcards '*' and '?'", i, showPattern(s))
		}
		if slices.Contains(c.sizes, s) {
			return nil, fmt.Errorf("autoprovisioning.sizes[%d] %q is listed twice", i, s)
		}
		c.sizes = append(c.sizes, s)
	}
	if f.MaxNodesPerPool != nil {
		if n := *f.MaxNodesPerPool; n < 1 || n > maxMaxNodesPerPool {
			return nil, fmt.Errorf("autoprovisioning.max_nodes_per_pool %d is not between 1 and %d", n, maxMaxNodesPerPool)
		}
		c.maxNodesPerPool = *f.MaxNodesPerPool
	}
	if f.NamePrefix != "" {
		if !namePrefix.MatchString(f.NamePrefix) || len(f.NamePrefix) > maxNamePrefix {
			return nil, fmt.Errorf("autoprovisioning.name_prefix %s is not valid: want a lower-case letter, then lower-case letters, digits or '-', at most %d characters", showPattern(f.NamePrefix), maxNamePrefix)
		}
		c.namePrefix = f.NamePrefix
	}
	cents, err := parseMaxHourlyCostPerPool(f.MaxHourlyCostPerPool)
	if err != nil {
		return nil, err
	}
	c.maxHourlyCostCents = cents
	for i, k := range f.TaintKeys {
		if err := checkTaintKey(k); err != nil {
			return nil, fmt.Errorf("autoprovisioning.taint_keys[%d] %s %v", i, showPattern(k), err)
		}
		if slices.Contains(c.taintKeys, k) {
			return nil, fmt.Errorf("autoprovisioning.taint_keys[%d] %q is listed twice", i, k)
		}
		c.taintKeys = append(c.taintKeys, k)
	}
	if c.sizePreference, err = parseSizePreference(f.SizePreference, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Label and taint keys a created pool never carries for workload
// separation: the namespaces Kubernetes, the autoscaler and DOKS use for
// their own (node.kubernetes.io/not-ready, ToBeDeletedByClusterAutoscaler's
// cluster-autoscaler.kubernetes.io kin, doks.digitalocean.com/node-pool),
// and, for taints, the GPU taints DOKS puts on GPU pools itself.
var (
	reservedNamespaces = []string{"kubernetes.io", "k8s.io", "digitalocean.com"}
	reservedTaintKeys  = []string{"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler",
		string(gpu.ResourceNvidiaGPU), string(gpu.ResourceAMDGPU)}
)

// checkTaintKey says why a key may not be an allowed taint key; nil if it may.
func checkTaintKey(k string) error {
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return fmt.Errorf("is not a valid taint key: %s", strings.Join(errs, "; "))
	}
	if slices.Contains(reservedTaintKeys, k) {
		return errors.New("is a taint the autoscaler or DOKS sets itself")
	}
	if r := reservedNamespace(k); r != "" {
		return fmt.Errorf("is in the %s namespace, whose taints Kubernetes, the autoscaler or DOKS set", r)
	}
	return nil
}

// reservedNamespace is the reserved namespace key is in ("" if none).
func reservedNamespace(key string) string {
	if ns, _, found := strings.Cut(key, "/"); found {
		for _, r := range reservedNamespaces {
			if ns == r || strings.HasSuffix(ns, "."+r) {
				return r
			}
		}
	}
	return ""
}

// poolLabels are the labels, of those asked for, that a created pool
// carries: none in a reserved namespace, whose labels DOKS and Kubernetes
// set on each node themselves (doks.digitalocean.com/node-pool is the
// pool's name). The predicted template then lacks them, so a pod that
// selects one is not offered the pool.
func poolLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if reservedNamespace(k) == "" {
			out[k] = v
		}
	}
	return out
}

// allowedTaints are the taints, of those asked for, that a created pool
// carries: those whose key autoprovisioning.taint_keys lists, sorted. The
// others are left off (logged): the pool is then as it would be without
// them, usable by the pods that asked, which tolerate what they asked for.
// A taint Kubernetes would refuse is an error.
func (c *autoprovisioningConfig) allowedTaints(size string, taints []apiv1.Taint) ([]apiv1.Taint, error) {
	var out []apiv1.Taint
	for _, t := range taints {
		if !slices.Contains(c.taintKeys, t.Key) {
			klog.V(4).InfoS("Node autoprovisioning: taint left off the pool: its key is not in autoprovisioning.taint_keys",
				"size", size, "taint", t.ToString())
			continue
		}
		if _, err := parseTaint(t.ToString()); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b apiv1.Taint) int { return strings.Compare(a.ToString(), b.ToString()) })
	return out, nil
}

// allows reports whether a size slug matches one of the allowed patterns.
func (c *autoprovisioningConfig) allows(slug string) bool {
	for _, p := range c.sizes {
		if ok, _ := path.Match(p, slug); ok {
			return true
		}
	}
	return false
}

// offeredSizes are the catalogue's sizes a pool may be created with: allowed
// by the config, available, and offered in the cluster's region; cheapest
// first.
func offeredSizes(c *autoprovisioningConfig, catalog []godo.Size, region string) []godo.Size {
	var out []godo.Size
	for _, s := range catalog {
		if c.allows(s.Slug) && s.Available && slices.Contains(s.Regions, region) && s.Vcpus > 0 && s.Memory > 0 {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].PriceHourly != out[j].PriceHourly {
			return out[i].PriceHourly < out[j].PriceHourly
		}
		return out[i].Slug < out[j].Slug
	})
	return out
}

// plannedIDPrefix starts the ID of every planned group.
const plannedIDPrefix = "autoprovisioned-"

// plannedGroupID names a not-yet-existing group by what it would be: its
// size and a hash of what its nodes carry (cloudprovider.Carried's Key,
// the identity the planner groups pods by), so a failed creation backs off
// the same option at the next loop, and the pool is named from it
// (creation.go).
func plannedGroupID(slug string, carried cloudprovider.Carried) string {
	id := plannedIDPrefix + slug
	key := carried.Key()
	if key == "" {
		return id
	}
	sum := sha256.Sum256([]byte(key))
	return id + "-" + hex.EncodeToString(sum[:])[:8]
}

// gpuVendorOfModel reads the vendor from a Sizes API gpu_info.model such as
// "nvidia_h100" or "amd_mi300x".
func gpuVendorOfModel(model string) string {
	if strings.Contains(strings.ToLower(model), "amd") {
		return "amd"
	}
	return "nvidia"
}

// Predicted reservations of a DOKS node, used only when no pool of the size
// exists to copy a real template from. They are set on the safe side (a
// little more reserved than DOKS reserves), so a pod predicted to fit a new
// pool fits its real nodes; the real template is compared when the pool
// exists and a difference is logged.
const (
	reservedMilliOneCPU = 610 // s-1vcpu-2gb reports 390m allocatable
	reservedMilliMin    = 200
	reservedMemMaxMi    = 2048
	reservedMemFloorMi  = 100
)

// predictTemplate is the template DOKS would serve for a pool of the size:
// capacity from the Sizes API, allocatable from a pool of the same size when
// there is one (same), else the reservations above; GPU from gpu_info.
func predictTemplate(size godo.Size, name string, labels map[string]string, taints []apiv1.Taint, same *godo.KubernetesNodeTemplate) *godo.KubernetesNodeTemplate {
	milli := int64(size.Vcpus) * 1000
	memMi := int64(size.Memory)
	t := &godo.KubernetesNodeTemplate{
		Name: name, Slug: size.Slug, Labels: maps.Clone(labels),
		Capacity: &godo.KubernetesNodePoolResources{CPU: int64(size.Vcpus), CpuMilliCores: milli,
			Memory: fmt.Sprintf("%dMi", memMi), Pods: defaultPods},
	}
	if same != nil && same.Allocatable != nil {
		a := *same.Allocatable
		t.Allocatable = &a
	} else {
		allocMilli := milli - max(reservedMilliMin, milli/20)
		if size.Vcpus == 1 {
			allocMilli = milli - reservedMilliOneCPU
		}
		allocMem := memMi - min(memMi/4, reservedMemMaxMi) - max(reservedMemFloorMi, memMi/20)
		t.Allocatable = &godo.KubernetesNodePoolResources{CPU: allocMilli / 1000, CpuMilliCores: allocMilli,
			Memory: fmt.Sprintf("%dMi", allocMem), Pods: defaultPods}
	}
	for _, taint := range taints {
		t.Taints = append(t.Taints, taint.ToString())
	}
	if g := size.GPUInfo; g != nil && g.Count > 0 {
		vendor := gpuVendorOfModel(g.Model)
		t.Gpu = &godo.KubernetesNodePoolGPUResources{Vendor: vendor, Model: g.Model, Count: int64(g.Count)}
		if gt := gpuTaint(vendor); !slices.ContainsFunc(taints, func(x apiv1.Taint) bool { return x.MatchTaint(&gt) }) {
			t.Taints = append(t.Taints, gt.ToString())
		}
	}
	return t
}

// gpuTaint is the taint DOKS puts on the nodes of a GPU pool of the vendor
// (nvidia.com/gpu:NoSchedule, amd.com/gpu:NoSchedule), so that only pods
// tolerating it run there. A pool created for a GPU size gets it from DOKS,
// not from the creation request; its predicted template carries it so that
// a pod not tolerating it never causes a GPU pool it could not run on.
func gpuTaint(vendor string) apiv1.Taint {
	return apiv1.Taint{Key: string(gpuResourceForVendor(vendor)), Effect: apiv1.TaintEffectNoSchedule}
}

// templateDifference describes how a real template differs from the
// predicted one in what the simulation uses; "" when it does not.
func templateDifference(predicted, actual *godo.KubernetesNodeTemplate) string {
	var diffs []string
	cmp := func(what string, p, r *godo.KubernetesNodePoolResources) {
		if p == nil || r == nil {
			return
		}
		if p.CpuMilliCores != r.CpuMilliCores {
			diffs = append(diffs, fmt.Sprintf("%s.cpu_milli_cores predicted %d, real %d", what, p.CpuMilliCores, r.CpuMilliCores))
		}
		pm, err1 := resource.ParseQuantity(p.Memory)
		rm, err2 := resource.ParseQuantity(r.Memory)
		if err1 == nil && err2 == nil && pm.Cmp(rm) != 0 {
			diffs = append(diffs, fmt.Sprintf("%s.memory predicted %s, real %s", what, p.Memory, r.Memory))
		}
	}
	cmp("capacity", predicted.Capacity, actual.Capacity)
	cmp("allocatable", predicted.Allocatable, actual.Allocatable)
	var pg, rg int64
	if predicted.Gpu != nil {
		pg = predicted.Gpu.Count
	}
	if actual.Gpu != nil {
		rg = actual.Gpu.Count
	}
	if pg != rg {
		diffs = append(diffs, fmt.Sprintf("gpu.count predicted %d, real %d", pg, rg))
	}
	if p, r := sortedTaints(predicted.Taints), sortedTaints(actual.Taints); !slices.Equal(p, r) {
		diffs = append(diffs, fmt.Sprintf("taints predicted %v, real %v", p, r))
	}
	return strings.Join(diffs, "; ")
}

// sortedTaints are a template's taints in one canonical spelling, sorted.
func sortedTaints(taints []string) []string {
	out := make([]string, 0, len(taints))
	for _, s := range taints {
		if t, err := parseTaint(s); err == nil {
			out = append(out, t.ToString())
		} else {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// GetAvailableMachineTypes lists the sizes pools may be created with:
// allowed by the cloud config's autoprovisioning section, available and
// offered in the cluster's region, cheapest first (price_hourly); with
// autoprovisioning.size_preference, the listed ones only, in its order.
//
// While node pool creation is stopped (see creationStopped) the error
// wraps cloudprovider.ErrCreationStopped and says why.
func (p *CloudProvider) GetAvailableMachineTypes() ([]string, error) {
	if p.m.autoprovisioning != nil {
		if err := p.m.checkCreation(); err != nil {
			return nil, err
		}
	}
	sizes, err := p.offered()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(sizes))
	for i, s := range sizes {
		out[i] = s.Slug
	}
	return out, nil
}

func (p *CloudProvider) offered() ([]godo.Size, error) {
	c := p.m.autoprovisioning
	if c == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	catalog, err := p.pricing.catalog()
	if err != nil {
		return nil, err
	}
	p.m.mu.RLock()
	region := p.m.region
	p.m.mu.RUnlock()
	if region == "" {
		return nil, errors.New("the cluster's region is not known yet: cannot tell which sizes it is offered")
	}
	// Sizes that cannot be had now are not offered: the next allowed size
	// is, in price or preference order (unavailable.go).
	return slices.DeleteFunc(c.inPreferenceOrder(offeredSizes(c, catalog, region), catalog), func(s godo.Size) bool {
		why, _ := p.m.sizeUnavailable(s.Slug, catalog)
		return why != ""
	}), nil
}

// NewNodeGroup describes a pool that does not exist yet, of the given size
// with the labels and taints the pending pods need. Nothing is created
// until Create.
func (p *CloudProvider) NewNodeGroup(machineType string, labels map[string]string, systemLabels map[string]string,
	taints []apiv1.Taint, extraResources map[string]resource.Quantity) (cloudprovider.NodeGroup, error) {
	sizes, err := p.offered()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(sizes, func(s godo.Size) bool { return s.Slug == machineType })
	if i < 0 {
		return nil, fmt.Errorf("size %q is not allowed by the cloud config's autoprovisioning.sizes or not offered in the cluster's region", machineType)
	}
	if err := checkLabels("labels", labels); err != nil {
		return nil, err
	}
	labels = poolLabels(labels)
	taints, err = p.m.autoprovisioning.allowedTaints(machineType, taints)
	if err != nil {
		return nil, err
	}
	id := plannedGroupID(machineType, cloudprovider.Carried{Labels: labels, Taints: taints})
	var godoTaints []godo.Taint
	for _, t := range taints {
		godoTaints = append(godoTaints, godo.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	pool := &godo.KubernetesNodePool{ID: id, Name: id, Size: machineType, Labels: maps.Clone(labels), Taints: godoTaints}
	if cents := p.m.autoprovisioning.maxHourlyCostCents; cents > 0 {
		pool.Tags = []string{maxHourlyCostTag(cents)}
	}
	tmpl := predictTemplate(sizes[i], id, labels, taints, p.m.templateOfSize(machineType))
	g := newNodeGroup(p.m, pool, 0, p.m.autoprovisioning.maxNodesPerPool, &templateEntry{template: tmpl}, &poolCounter{}, 0)
	g.planned = &sizes[i]
	return g, nil
}

// templateOfSize is the cached real template of some pool of the size, or nil.
func (m *manager) templateOfSize(slug string) *godo.KubernetesNodeTemplate {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, g := range m.groups {
		if g.template != nil && g.template.template != nil && g.pool.Size == slug && g.planned == nil {
			return g.template.template
		}
	}
	return nil
}

// comparePredicted logs how a created pool's real template differs from
// the one its creation was decided on, once.
func (m *manager) comparePredicted(p *godo.KubernetesNodePool, actual *godo.KubernetesNodeTemplate) {
	m.mu.Lock()
	predicted := m.predicted[p.ID]
	delete(m.predicted, p.ID)
	m.mu.Unlock()
	if predicted == nil {
		return
	}
	if d := templateDifference(predicted, actual); d != "" {
		klog.InfoS("Created node pool's template differs from the one predicted from its size", "pool", p.Name, "size", p.Size, "difference", d)
		return
	}
	klog.V(2).InfoS("Created node pool's template is as predicted", "pool", p.Name, "size", p.Size)
}

// isAutoprovisioned reports whether the pool carries this autoscaler's
// ownership tag.
func isAutoprovisioned(p *godo.KubernetesNodePool) bool {
	return slices.Contains(p.Tags, TagAutoprovisioned)
}

// showPattern prints a short value (a mistyped size slug or prefix) quoted;
// a long one may be a token pasted into the wrong field (DigitalOcean
// tokens are about 70 characters) and is named by its length only.
func showPattern(v string) string {
	if len(v) <= 40 {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("(a value of %d characters)", len(v))
}

var _ cloudprovider.SizedCreator = (*NodeGroup)(nil)
