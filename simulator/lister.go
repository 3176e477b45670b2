package simulator

import (
	"fmt"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
)

// frameworkLister is the SharedLister handed to the scheduler framework. The
// framework and its plugins keep a reference to it from construction time,
// so it points at whichever snapshot the PredicateChecker is currently
// asked about.
type frameworkLister struct {
	snapshot *ClusterSnapshot
}

var (
	_ fwk.SharedLister      = &frameworkLister{}
	_ fwk.NodeInfoLister    = nodeInfoLister{}
	_ fwk.StorageInfoLister = storageInfoLister{}
)

func (l *frameworkLister) NodeInfos() fwk.NodeInfoLister {
	return nodeInfoLister{l}
}

func (l *frameworkLister) StorageInfos() fwk.StorageInfoLister {
	return storageInfoLister{l}
}

// The workload (gang) scheduling listers: the simulation has no pod groups,
// and the plugins that read them are not enabled.
func (l *frameworkLister) PodGroupStates() fwk.PodGroupStateLister { return noPodGroups{} }
func (l *frameworkLister) PodGroups() fwk.PodGroupLister           { return noPodGroupObjects{} }
func (l *frameworkLister) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return noCompositePodGroups{}
}
func (l *frameworkLister) CompositePodGroups() fwk.CompositePodGroupLister {
	return noCompositePodGroupObjects{}
}

// dra is the DRA state of the snapshot the framework is asked about.
func (l *frameworkLister) dra() *dra.Snapshot {
	if l.snapshot == nil {
		return nil
	}
	return l.snapshot.dra
}

type nodeInfoLister struct{ l *frameworkLister }

func (n nodeInfoLister) snap() (*ClusterSnapshot, error) {
	if n.l.snapshot == nil {
		return nil, fmt.Errorf("no cluster snapshot set for the scheduler framework")
	}
	return n.l.snapshot, nil
}

func (n nodeInfoLister) List() ([]fwk.NodeInfo, error) {
	s, err := n.snap()
	if err != nil {
		return nil, err
	}
	return s.nodeList(), nil
}

func (n nodeInfoLister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	s, err := n.snap()
	if err != nil {
		return nil, err
	}
	list, _, _ := s.affinityLists()
	return list, nil
}

func (n nodeInfoLister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	s, err := n.snap()
	if err != nil {
		return nil, err
	}
	_, list, _ := s.affinityLists()
	return list, nil
}

func (n nodeInfoLister) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	s, err := n.snap()
	if err != nil {
		return nil, err
	}
	_, _, list := s.affinityLists()
	return list, nil
}

func (n nodeInfoLister) Get(nodeName string) (fwk.NodeInfo, error) {
	s, err := n.snap()
	if err != nil {
		return nil, err
	}
	info, found := s.nodes[nodeName]
	if !found {
		return nil, fmt.Errorf("nodeinfo not found for node name %q", nodeName)
	}
	return info, nil
}

type storageInfoLister struct{ l *frameworkLister }

func (st storageInfoLister) IsPVCUsedByPods(key string) bool {
	if st.l.snapshot == nil {
		return false
	}
	return st.l.snapshot.isPVCUsedByPods(key)
}

type noPodGroups struct{}

func (noPodGroups) Get(namespace, name string) (fwk.PodGroupState, error) {
	return nil, fmt.Errorf("pod group %s/%s not found: the simulation tracks no pod groups", namespace, name)
}

type noPodGroupObjects struct{}

func (noPodGroupObjects) Get(namespace, name string) (*schedulingapi.PodGroup, error) {
	return nil, fmt.Errorf("pod group %s/%s not found: the simulation tracks no pod groups", namespace, name)
}

type noCompositePodGroups struct{}

func (noCompositePodGroups) Get(namespace, name string) (fwk.CompositePodGroupState, error) {
	return nil, fmt.Errorf("composite pod group %s/%s not found: the simulation tracks no pod groups", namespace, name)
}

type noCompositePodGroupObjects struct{}

func (noCompositePodGroupObjects) Get(namespace, name string) (*schedulingv1alpha3.CompositePodGroup, error) {
	return nil, fmt.Errorf("composite pod group %s/%s not found: the simulation tracks no pod groups", namespace, name)
}
