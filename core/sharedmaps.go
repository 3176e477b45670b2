package core

import (
	"hash/maphash"
	"maps"
	"slices"
	"strconv"
	"sync"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxSharedMaps bounds each table of sharedMaps. A table that fills starts
// over empty: the objects keep the maps they share, and the maps of deleted
// objects the table still held are freed. A cluster has a few hundred
// distinct label sets and resource lists, not thousands.
const maxSharedMaps = 4096

// sharedMaps lets the cached pods and nodes share equal maps: the capacity
// and allocatable of a pool's nodes (every droplet of a size reports the
// same), the requests and limits of a workload's replicas and their labels,
// and pods' tolerations (nearly every pod carries the same two, which the
// API server's DefaultTolerationSeconds admission adds).
// Decoding gives every object its own copy of each; at 1,000 nodes and
// 2,000 pods those copies were 4.7 of a 24.5 MB live heap.
//
// Sharing is safe because cached objects are read-only (client-go's
// contract for informer caches): whatever changes one works on a DeepCopy,
// which copies the maps. The autoscaler's shallow copies of pods
// (withNodeName) share every map with the cached pod already.
type sharedMaps struct {
	mu          sync.Mutex
	lists       map[uint64][]apiv1.ResourceList
	labels      map[uint64][]map[string]string
	tolerations map[uint64][][]apiv1.Toleration
	strs        map[string]string
}

func newSharedMaps() *sharedMaps {
	return &sharedMaps{lists: map[uint64][]apiv1.ResourceList{}, labels: map[uint64][]map[string]string{},
		tolerations: map[uint64][][]apiv1.Toleration{}, strs: map[string]string{}}
}

// transform is the informers' transform: trimForCache, then the maps of
// pods and nodes shared.
func (s *sharedMaps) transform(obj interface{}) (interface{}, error) {
	obj, err := trimForCache(obj)
	if err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *apiv1.Pod:
		s.sharePod(o)
	case *apiv1.Node:
		o.Status.Capacity = s.list(o.Status.Capacity)
		o.Status.Allocatable = s.list(o.Status.Allocatable)
		s.shareNodeStrings(o)
	}
	return obj, nil
}

// maxSharedStrings bounds the string table as maxSharedMaps does the others:
// a cluster's label keys and values, namespaces, images and owners repeat;
// the few unique ones (a node's hostname and ID) cost a table entry each.
// Annotation values are not shared: often unique (a node's IPs, a CNI's
// status of a pod), sometimes kilobytes, they would fill the table with
// strings it keeps after their objects are gone.
const maxSharedStrings = 1 << 15

// str returns the shared string equal to v; s.mu must be held. Decoding
// gives every string of every object its own allocation, so the node labels'
// keys, a pod's namespace, owner, scheduler and container image are each
// held once an object: with this, once a cluster.
func (s *sharedMaps) str(v string) string {
	if v == "" {
		return v
	}
	if shared, ok := s.strs[v]; ok {
		return shared
	}
	if len(s.strs) >= maxSharedStrings {
		clear(s.strs)
	}
	s.strs[v] = v
	return v
}

// strMap returns m with its keys, and its values when values is set,
// shared (a new map: the decoded one's keys cannot be replaced in place);
// s.mu must be held.
func (s *sharedMaps) strMap(m map[string]string, values bool) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if values {
			v = s.str(v)
		}
		out[s.str(k)] = v
	}
	return out
}

// shareMetaStrings shares the strings of an object's metadata that repeat
// across objects: not its name, UID or version; s.mu must be held.
func (s *sharedMaps) shareMetaStrings(m *metav1.ObjectMeta, labelsShared bool) {
	m.Namespace, m.GenerateName = s.str(m.Namespace), s.str(m.GenerateName)
	if !labelsShared {
		m.Labels = s.strMap(m.Labels, true)
	}
	m.Annotations = s.strMap(m.Annotations, false)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = s.str(r.APIVersion), s.str(r.Kind), s.str(r.Name)
	}
}

// shareNodeStrings shares a node's label keys and values, annotation keys,
// its taints' strings and its name (which its pods and its hostname label
// repeat).
func (s *sharedMaps) shareNodeStrings(n *apiv1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n.Name = s.str(n.Name)
	s.shareMetaStrings(&n.ObjectMeta, false)
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		t.Key, t.Value, t.Effect = s.str(t.Key), s.str(t.Value), apiv1.TaintEffect(s.str(string(t.Effect)))
	}
}

// sharePodStrings shares what repeats among pods: metadata (but labels
// sharePod shared whole), the spec's node, scheduler, service account and
// policies, its containers' names, images and policies, the phase.
func (s *sharedMaps) sharePodStrings(p *apiv1.Pod, labelsShared bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shareMetaStrings(&p.ObjectMeta, labelsShared)
	sp := &p.Spec
	sp.NodeName, sp.SchedulerName, sp.PriorityClassName = s.str(sp.NodeName), s.str(sp.SchedulerName), s.str(sp.PriorityClassName)
	sp.ServiceAccountName, sp.DeprecatedServiceAccount = s.str(sp.ServiceAccountName), s.str(sp.DeprecatedServiceAccount)
	sp.RestartPolicy, sp.DNSPolicy = apiv1.RestartPolicy(s.str(string(sp.RestartPolicy))), apiv1.DNSPolicy(s.str(string(sp.DNSPolicy)))
	for _, cs := range [][]apiv1.Container{sp.InitContainers, sp.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Name, c.Image = s.str(c.Name), s.str(c.Image)
			c.ImagePullPolicy = apiv1.PullPolicy(s.str(string(c.ImagePullPolicy)))
			c.TerminationMessagePath = s.str(c.TerminationMessagePath)
			c.TerminationMessagePolicy = apiv1.TerminationMessagePolicy(s.str(string(c.TerminationMessagePolicy)))
		}
	}
	p.Status.Phase = apiv1.PodPhase(s.str(string(p.Status.Phase)))
}

// sharePod shares a pod's labels and every resource list of its spec. The
// labels of a StatefulSet's or a Job's pods name the pod or the Job, so are
// never equal to another's: not worth a table entry. (Nor are a node's.)
func (s *sharedMaps) sharePod(p *apiv1.Pod) {
	ref := metav1.GetControllerOfNoCopy(p)
	replica := ref != nil && (ref.Kind == "ReplicaSet" || ref.Kind == "DaemonSet")
	if replica {
		p.Labels = s.labelSet(p.Labels)
	}
	for _, cs := range [][]apiv1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests, r.Limits = s.list(r.Requests), s.list(r.Limits)
		}
	}
	if r := p.Spec.Resources; r != nil {
		r.Requests, r.Limits = s.list(r.Requests), s.list(r.Limits)
	}
	p.Spec.Overhead = s.list(p.Spec.Overhead)
	p.Spec.Tolerations = s.tolerationList(p.Spec.Tolerations)
	s.sharePodStrings(p, replica)
}

// tolerationList returns the shared list equal to ts (same tolerations in
// the same order), making ts the shared one if there is none.
func (s *sharedMaps) tolerationList(ts []apiv1.Toleration) []apiv1.Toleration {
	if len(ts) == 0 {
		return ts
	}
	var h uint64
	for i := range ts {
		h = h*31 + hashStrings(ts[i].Key, tolerationRest(&ts[i]))
	}
	equal := func(a, b []apiv1.Toleration) bool {
		return slices.EqualFunc(a, b, func(x, y apiv1.Toleration) bool { return x.MatchToleration(&y) && sameSeconds(x, y) })
	}
	// Clipped: an append to a pod's list never writes into another's.
	return share(&s.mu, s.tolerations, h, slices.Clip(ts), equal)
}

// tolerationRest is a toleration's fields but the key, in one string.
func tolerationRest(t *apiv1.Toleration) string {
	secs := "-"
	if t.TolerationSeconds != nil {
		secs = strconv.FormatInt(*t.TolerationSeconds, 10)
	}
	return string(t.Operator) + "\x00" + t.Value + "\x00" + string(t.Effect) + "\x00" + secs
}

// sameSeconds: MatchToleration compares all but TolerationSeconds.
func sameSeconds(a, b apiv1.Toleration) bool {
	if a.TolerationSeconds == nil || b.TolerationSeconds == nil {
		return a.TolerationSeconds == b.TolerationSeconds
	}
	return *a.TolerationSeconds == *b.TolerationSeconds
}

// list returns the shared list equal to l, making l the shared one if
// there is none. Equal: the same names, each quantity written the same by
// Quantity.String.
func (s *sharedMaps) list(l apiv1.ResourceList) apiv1.ResourceList {
	if len(l) == 0 {
		return l
	}
	var h uint64
	for n, q := range l {
		// Order-independent: the sum of each entry's hash.
		h += hashStrings(string(n), q.String())
	}
	equal := func(a, b apiv1.ResourceList) bool {
		return maps.EqualFunc(a, b, func(x, y resource.Quantity) bool { return x.String() == y.String() })
	}
	return share(&s.mu, s.lists, h, l, equal)
}

// labelSet returns the shared label set equal to m, making m the shared
// one if there is none.
func (s *sharedMaps) labelSet(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	var h uint64
	for k, v := range m {
		h += hashStrings(k, v)
	}
	return share(&s.mu, s.labels, h, m, maps.Equal[map[string]string])
}

// share looks m up in table under its hash h, equal telling collisions
// apart, and adds it if absent.
func share[M any](mu *sync.Mutex, table map[uint64][]M, h uint64, m M, equal func(a, b M) bool) M {
	mu.Lock()
	defer mu.Unlock()
	for _, shared := range table[h] {
		if equal(shared, m) {
			return shared
		}
	}
	if len(table) >= maxSharedMaps {
		clear(table)
	}
	table[h] = append(table[h], m)
	return m
}

// hashSeed keeps hashes comparable for the life of the process.
var hashSeed = maphash.MakeSeed()

// hashStrings hashes a name and a value together.
func hashStrings(a, b string) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	h.WriteString(a)
	h.WriteByte(0)
	h.WriteString(b)
	return h.Sum64()
}
