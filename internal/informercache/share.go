package informercache

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxShared bounds each table of maps. A table that fills starts over
// empty: the objects keep the maps they share, and the maps of deleted
// objects the table still held are freed. A cluster has a few hundred
// distinct label sets and resource lists, not thousands.
const maxShared = 4096

// maxSharedStrings bounds the string table as maxShared does the others:
// a cluster's label keys and values, namespaces, images and owners repeat;
// the few unique ones (a node's hostname and ID) cost a table entry each.
// Annotation values are not shared: often unique (a node's IPs, a CNI's
// status of a pod), sometimes kilobytes, they would fill the table with
// strings it keeps after their objects are gone.
const maxSharedStrings = 1 << 15

// tables let the cached pods and nodes share what they repeat: equal maps
// (the capacity and allocatable of a pool's nodes, since every droplet of
// a size reports the same; the requests, limits and labels of a workload's
// replicas), equal toleration lists (nearly every pod carries the two that
// the API server's DefaultTolerationSeconds admission adds), and strings.
// Decoding gives every object its own copy of each; at 1,000 nodes and
// 2,000 pods the maps alone were 4.7 of a 24.5 MB live heap.
//
// Sharing is safe because cached objects are read-only (client-go's
// contract for informer caches): whatever changes one works on a DeepCopy,
// which copies the maps.
//
// Locking: sharePod and shareNode take mu once per object, and every
// method named ...Locked runs with it held. What costs time is done before
// taking it: the transform runs under the lock of client-go's queue, so
// the tables' lock only guards map lookups. The keys of the maps to share
// (listKey formats quantities with Quantity.String) are built first.
type tables struct {
	mu          sync.Mutex
	lists       map[string]apiv1.ResourceList
	labels      map[string]map[string]string
	tolerations map[string][]apiv1.Toleration
	strs        map[string]string
}

func newTables() *tables {
	return &tables{lists: map[string]apiv1.ResourceList{}, labels: map[string]map[string]string{},
		tolerations: map[string][]apiv1.Toleration{}, strs: map[string]string{}}
}

// sharePod shares a pod's labels (a ReplicaSet's or DaemonSet's replicas'
// only: a StatefulSet's or a Job's pods' labels name the pod or the Job,
// never equal to another's), every resource list of its spec, its
// tolerations and the strings sharePodStringsLocked names.
func (t *tables) sharePod(p *apiv1.Pod) {
	ref := metav1.GetControllerOfNoCopy(p)
	replica := ref != nil && (ref.Kind == "ReplicaSet" || ref.Kind == "DaemonSet")
	var labels string
	if replica {
		labels = labelsKey(p.Labels)
	}
	lists := podLists(p)
	keys := make([]string, len(lists))
	for i, l := range lists {
		keys[i] = listKey(*l)
	}
	// Clipped: an append to a pod's list never writes into another's.
	tolerations := slices.Clip(p.Spec.Tolerations)
	tolerationsKey := tolerationsKey(tolerations)

	t.mu.Lock()
	defer t.mu.Unlock()
	if replica {
		p.Labels = share(t.labels, labels, p.Labels)
	}
	for i, l := range lists {
		*l = share(t.lists, keys[i], *l)
	}
	p.Spec.Tolerations = share(t.tolerations, tolerationsKey, tolerations)
	t.sharePodStringsLocked(p, replica)
}

// podLists are the resource lists of a pod's spec.
func podLists(p *apiv1.Pod) []*apiv1.ResourceList {
	var out []*apiv1.ResourceList
	for _, cs := range [][]apiv1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			out = append(out, &r.Requests, &r.Limits)
		}
	}
	if r := p.Spec.Resources; r != nil {
		out = append(out, &r.Requests, &r.Limits)
	}
	return append(out, &p.Spec.Overhead)
}

// shareNode shares a node's capacity and allocatable, and the strings
// shareNodeStringsLocked names.
func (t *tables) shareNode(n *apiv1.Node) {
	capacity, allocatable := listKey(n.Status.Capacity), listKey(n.Status.Allocatable)

	t.mu.Lock()
	defer t.mu.Unlock()
	n.Status.Capacity = share(t.lists, capacity, n.Status.Capacity)
	n.Status.Allocatable = share(t.lists, allocatable, n.Status.Allocatable)
	t.shareNodeStringsLocked(n)
}

// share returns the map (or list) table holds under key, making m the one
// it holds if there is none. An empty key (an empty m) is never shared.
func share[M any](table map[string]M, key string, m M) M {
	if key == "" {
		return m
	}
	if shared, ok := table[key]; ok {
		return shared
	}
	if len(table) >= maxShared {
		clear(table)
	}
	table[key] = m
	return m
}

// The keys below tell equal maps apart exactly: names and values in order,
// separated by bytes no label, resource name, quantity or toleration field
// may contain.

// listKey is a resource list's key: each name with its quantity as
// Quantity.String writes it (250m and 0.25 are one), in name order.
func listKey(l apiv1.ResourceList) string {
	if len(l) == 0 {
		return ""
	}
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, string(n))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		q := l[apiv1.ResourceName(n)]
		b.WriteString(n)
		b.WriteByte(0)
		b.WriteString(q.String())
		b.WriteByte(1)
	}
	return b.String()
}

// labelsKey is a label set's key, in key order.
func labelsKey(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(1)
	}
	return b.String()
}

// tolerationsKey is a toleration list's key, in the list's order (another
// order is another list), seconds included (MatchToleration ignores them).
func tolerationsKey(ts []apiv1.Toleration) string {
	if len(ts) == 0 {
		return ""
	}
	var b strings.Builder
	for i := range ts {
		t := &ts[i]
		secs := "-"
		if t.TolerationSeconds != nil {
			secs = strconv.FormatInt(*t.TolerationSeconds, 10)
		}
		for _, f := range []string{t.Key, string(t.Operator), t.Value, string(t.Effect), secs} {
			b.WriteString(f)
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	return b.String()
}

// strLocked returns the shared string equal to v. Decoding gives every
// string of every object its own allocation, so the node labels' keys, a
// pod's namespace, owner, scheduler and container image are each held once
// an object: with this, once a cluster.
func (t *tables) strLocked(v string) string {
	if v == "" {
		return v
	}
	if shared, ok := t.strs[v]; ok {
		return shared
	}
	if len(t.strs) >= maxSharedStrings {
		clear(t.strs)
	}
	t.strs[v] = v
	return v
}

// strMapLocked returns m with its keys, and its values when values is set,
// shared (a new map: the decoded one's keys cannot be replaced in place).
func (t *tables) strMapLocked(m map[string]string, values bool) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if values {
			v = t.strLocked(v)
		}
		out[t.strLocked(k)] = v
	}
	return out
}

// shareMetaStringsLocked shares the strings of an object's metadata that
// repeat across objects: not its name, UID or version.
func (t *tables) shareMetaStringsLocked(m *metav1.ObjectMeta, labelsShared bool) {
	m.Namespace, m.GenerateName = t.strLocked(m.Namespace), t.strLocked(m.GenerateName)
	if !labelsShared {
		m.Labels = t.strMapLocked(m.Labels, true)
	}
	m.Annotations = t.strMapLocked(m.Annotations, false)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = t.strLocked(r.APIVersion), t.strLocked(r.Kind), t.strLocked(r.Name)
	}
}

// shareNodeStringsLocked shares a node's label keys and values, annotation
// keys, its taints' strings and its name (which its pods and its hostname
// label repeat).
func (t *tables) shareNodeStringsLocked(n *apiv1.Node) {
	n.Name = t.strLocked(n.Name)
	t.shareMetaStringsLocked(&n.ObjectMeta, false)
	for i := range n.Spec.Taints {
		tt := &n.Spec.Taints[i]
		tt.Key, tt.Value, tt.Effect = t.strLocked(tt.Key), t.strLocked(tt.Value), apiv1.TaintEffect(t.strLocked(string(tt.Effect)))
	}
}

// sharePodStringsLocked shares what repeats among pods: metadata (but
// labels, when shared whole), the spec's node, scheduler, service account
// and policies, its containers' names, images and policies, the phase.
func (t *tables) sharePodStringsLocked(p *apiv1.Pod, labelsShared bool) {
	t.shareMetaStringsLocked(&p.ObjectMeta, labelsShared)
	sp := &p.Spec
	sp.NodeName, sp.SchedulerName, sp.PriorityClassName = t.strLocked(sp.NodeName), t.strLocked(sp.SchedulerName), t.strLocked(sp.PriorityClassName)
	sp.ServiceAccountName, sp.DeprecatedServiceAccount = t.strLocked(sp.ServiceAccountName), t.strLocked(sp.DeprecatedServiceAccount)
	sp.RestartPolicy, sp.DNSPolicy = apiv1.RestartPolicy(t.strLocked(string(sp.RestartPolicy))), apiv1.DNSPolicy(t.strLocked(string(sp.DNSPolicy)))
	for _, cs := range [][]apiv1.Container{sp.InitContainers, sp.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Name, c.Image = t.strLocked(c.Name), t.strLocked(c.Image)
			c.ImagePullPolicy = apiv1.PullPolicy(t.strLocked(string(c.ImagePullPolicy)))
			c.TerminationMessagePath = t.strLocked(c.TerminationMessagePath)
			c.TerminationMessagePolicy = apiv1.TerminationMessagePolicy(t.strLocked(string(c.TerminationMessagePolicy)))
		}
	}
	p.Status.Phase = apiv1.PodPhase(t.strLocked(string(p.Status.Phase)))
}
