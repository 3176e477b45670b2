// Package priority is the expander driven by the user's ConfigMap
// cluster-autoscaler-priority-expander (key "priorities"): YAML mapping an
// integer priority to a list of regular expressions over node group ids.
// Options whose group matches the highest priority win. The ConfigMap is
// read through an informer's lister and parsed again only when its
// resourceVersion changes, so edits apply on the next scale-up without a
// restart. A missing or invalid ConfigMap is logged and the filter then
// passes every option on, so a typo never blocks scale-ups.
package priority

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/expander"
)

const (
	// ConfigMapName is the ConfigMap the priority expander reads.
	ConfigMapName = "cluster-autoscaler-priority-expander"
	// ConfigMapKey is the key holding the priorities YAML.
	ConfigMapKey = "priorities"
)

// Recorder records a ConfigMap the expander ignores because it does not
// parse. The reporter (core/report) implements it: it alone writes events.
type Recorder interface {
	PriorityConfigMapInvalid(cm *apiv1.ConfigMap, err error)
}

type level struct {
	priority int
	regexps  []*regexp.Regexp
}

type filter struct {
	lister   corelisters.ConfigMapNamespaceLister
	recorder Recorder

	mu       sync.Mutex
	version  string // resourceVersion of the parsed ConfigMap ("" none)
	levels   []level
	parseErr error
	missing  bool
}

// NewFilter returns the priority filter reading the ConfigMap through lister
// (scoped to the autoscaler's namespace). recorder may be nil.
func NewFilter(lister corelisters.ConfigMapNamespaceLister, recorder Recorder) expander.Filter {
	return &filter{lister: lister, recorder: recorder}
}

// parse reads the priorities YAML: a map from integer priority to a list of
// group-id regular expressions.
func parse(data string) ([]level, error) {
	raw := map[string][]string{}
	if err := yaml.Unmarshal([]byte(data), &raw); err != nil {
		return nil, fmt.Errorf("invalid priorities YAML: %w", err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("priorities YAML is empty")
	}
	var out []level
	for k, exprs := range raw {
		p, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("priority %q is not an integer", k)
		}
		l := level{priority: p}
		for _, e := range exprs {
			re, err := regexp.Compile(e)
			if err != nil {
				return nil, fmt.Errorf("priority %d: bad regular expression %q: %v", p, e, err)
			}
			l.regexps = append(l.regexps, re)
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].priority > out[j].priority })
	return out, nil
}

// reload re-parses the ConfigMap when it changed; returns the levels to use
// (nil: pass everything).
func (f *filter) reload() []level {
	f.mu.Lock()
	defer f.mu.Unlock()
	cm, err := f.lister.Get(ConfigMapName)
	if err != nil {
		if !f.missing {
			if apierrors.IsNotFound(err) {
				klog.InfoS("Priority expander: ConfigMap not found; all node groups have equal priority", "configMap", ConfigMapName)
			} else {
				klog.ErrorS(err, "Priority expander: cannot read ConfigMap; all node groups have equal priority", "configMap", ConfigMapName)
			}
		}
		f.missing, f.version, f.levels, f.parseErr = true, "", nil, nil
		return nil
	}
	f.missing = false
	if cm.ResourceVersion == f.version && f.version != "" {
		return f.levels
	}
	f.version = cm.ResourceVersion
	data, ok := cm.Data[ConfigMapKey]
	if !ok {
		f.levels, f.parseErr = nil, fmt.Errorf("key %q missing", ConfigMapKey)
	} else {
		f.levels, f.parseErr = parse(data)
	}
	if f.parseErr != nil {
		klog.ErrorS(f.parseErr, "Priority expander: ConfigMap ignored", "configMap", ConfigMapName, "resourceVersion", cm.ResourceVersion)
		if f.recorder != nil {
			f.recorder.PriorityConfigMapInvalid(cm, f.parseErr)
		}
		return nil
	}
	klog.InfoS("Priority expander: priority levels loaded", "levels", len(f.levels), "configMap", ConfigMapName, "resourceVersion", cm.ResourceVersion)
	return f.levels
}

func (f *filter) BestOptions(options []expander.Option) []expander.Option {
	levels := f.reload()
	if len(levels) == 0 {
		return options
	}
	best := 0
	found := false
	var out []expander.Option
	for _, o := range options {
		p, ok := groupPriority(levels, o.NodeGroup.Id())
		if !ok {
			continue
		}
		switch {
		case !found || p > best:
			best, found = p, true
			out = []expander.Option{o}
		case p == best:
			out = append(out, o)
		}
	}
	if !found {
		klog.V(2).InfoS("Priority expander: no option matches a priority; passing all on", "nodeGroups", expander.GroupIDs(options))
		return options
	}
	klog.V(2).InfoS("Priority expander: options kept", "priority", best, "nodeGroups", expander.GroupIDs(out))
	return out
}

// groupPriority returns the highest priority with an expression matching id,
// and whether any matches.
func groupPriority(levels []level, id string) (int, bool) {
	for _, l := range levels { // sorted highest first
		for _, re := range l.regexps {
			if re.MatchString(id) {
				return l.priority, true
			}
		}
	}
	return 0, false
}
