package nodeagent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/digitalocean/godo"
	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// Attributes every driver takes from the kernel (k8s.io/dynamic-resource-allocation's
// deviceattribute package): the GPU's PCI address and its PCIe root complex.
const (
	attrPCIBusID = "resource.kubernetes.io/pciBusID"
	attrPCIeRoot = "resource.kubernetes.io/pcieRoot"
)

// draDriver is the DRA driver that publishes the GPUs of a node of this size, or "" when
// the size has no GPU or its vendor's driver is not installed (the device plugin is).
func (a *Agent) draDriver(size string) string {
	vendor, _, count := doks.SizeGPU(size)
	if count == 0 {
		return ""
	}
	if d := gpudriver.DriverForVendor(vendor); slices.Contains(a.opts.DRADrivers, d) {
		return d
	}
	return ""
}

// publishSlices plays the GPU DRA drivers' kubelet plugins: each registered GPU node whose
// driver runs gets its ResourceSlice once it has been up for SliceDelay, unless its pool's
// slices are held.
func (a *Agent) publishSlices(ctx context.Context, pools []godo.KubernetesNodePool) {
	if len(a.opts.DRADrivers) == 0 {
		return
	}
	type due struct{ node, pool, size, driver string }
	var todo []due
	a.mu.Lock()
	for _, p := range pools {
		driver := a.draDriver(p.Size)
		if driver == "" || a.holdSlices[p.Name] {
			continue
		}
		for _, n := range p.Nodes {
			since, ok := a.registered[n.Name]
			if ok && !a.sliced[n.Name] && time.Since(since) >= a.opts.SliceDelay {
				todo = append(todo, due{n.Name, p.Name, p.Size, driver})
			}
		}
	}
	a.mu.Unlock()
	for _, d := range todo {
		if err := a.publishSlice(ctx, d.node, d.size, d.driver); err != nil {
			if ctx.Err() == nil {
				klog.Warningf("node agent: publishing the %s ResourceSlice of %s: %v (retrying)", d.driver, d.node, err)
			}
			continue
		}
		a.mu.Lock()
		a.sliced[d.node] = true
		a.mu.Unlock()
		klog.Infof("node agent: %s published the ResourceSlice of node %s (pool %s, size %s)", d.driver, d.node, d.pool, d.size)
	}
}

// publishSlice creates the node's slice as the driver's kubelet plugin does: named by the
// API server from <node>-<driver>-, owned by the Node so that it goes with it.
func (a *Agent) publishSlice(ctx context.Context, nodeName, size, driver string) error {
	node, err := a.nodeLister.Get(nodeName)
	if err != nil {
		if node, err = a.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
			return err
		}
	}
	_, model, count := doks.SizeGPU(size)
	s := gpudriver.Slice(nodeName, driver, model, count)
	s.Name = ""
	s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true)}}
	a.mu.Lock()
	index := a.indexLocked(nodeName)
	a.mu.Unlock()
	for i := range s.Spec.Devices {
		machineAttributes(&s.Spec.Devices[i], driver, node, index, i)
	}
	_, err = a.kube.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
	return err
}

// machineAttributes adds what the drivers read from one machine's hardware and software,
// which no size determines: made up here, stable for a node.
func machineAttributes(d *resourceapi.Device, driver string, node *apiv1.Node, nodeIndex, gpu int) {
	str := func(name, v string) {
		d.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{StringValue: ptr.To(v)}
	}
	version := func(name, v string) {
		d.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{VersionValue: ptr.To(v)}
	}
	bus := 0x18 + 0x10*gpu
	str(attrPCIBusID, fmt.Sprintf("0000:%02x:00.0", bus))
	str(attrPCIeRoot, fmt.Sprintf("pci0000:%02x", bus-1))
	switch driver {
	case gpudriver.NVIDIA:
		str("uuid", fmt.Sprintf("GPU-%08x-%04x-%04x-0000-%012x", nodeIndex, gpu, bus, node.UID[len(node.UID)-6:]))
		version("driverVersion", "570.148.8")
		version("cudaDriverVersion", "12.8.0")
	case gpudriver.AMD:
		version("driverVersion", "6.12.12")
		str("driverVersionFull", "6.12.12")
		str("partitionProfile", "spx_nps1")
		d.Attributes["numaNode"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(gpu / 4))}
	}
}

// deleteSlices removes a gone node's slices: its driver went with it. The garbage
// collector would too, later, through the owner reference.
func (a *Agent) deleteSlices(ctx context.Context, nodeName string) {
	if len(a.opts.DRADrivers) == 0 {
		return
	}
	err := a.kube.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + nodeName})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.Warningf("node agent: deleting the ResourceSlices of node %s: %v", nodeName, err)
	}
	a.mu.Lock()
	delete(a.sliced, nodeName)
	a.mu.Unlock()
}
