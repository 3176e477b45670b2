// Package capacitybuffer implements CapacityBuffers
// (autoscaling.x-k8s.io/v1beta1): the controller that resolves each buffer
// into its status (pod shape and number of replicas, or a condition saying
// why not), and the injector that turns resolved buffers into fake pods for
// scale-up (processors/pods), so their room is provisioned and kept without
// any pod running in it.
package capacitybuffer

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
)

// Client reads buffers from an informer cache (converted to the typed
// objects once, as they enter it) and writes their status.
type Client struct {
	dyn      dynamic.Interface
	informer cache.SharedIndexInformer
}

// NewClient watches CapacityBuffers in every namespace.
func NewClient(dyn dynamic.Interface) (*Client, error) {
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := f.ForResource(v1beta1.Resource).Informer()
	if err := inf.SetTransform(toBuffer); err != nil {
		return nil, err
	}
	return &Client{dyn: dyn, informer: inf}, nil
}

// toBuffer converts an unstructured buffer into the typed object the cache
// keeps; tombstones and objects of other types pass as they are.
func toBuffer(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	b := &v1beta1.CapacityBuffer{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, fmt.Errorf("CapacityBuffer %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	// The one field the cache drops. Status writes send the cached buffer
	// back, which is safe for this field alone: an update without
	// managedFields keeps the stored ones (the API server's rule).
	b.ManagedFields = nil
	return b, nil
}

// Informer is the buffers' informer (for event handlers; Start runs it).
func (c *Client) Informer() cache.SharedIndexInformer { return c.informer }

// HasSynced says whether the cache holds the first full list.
func (c *Client) HasSynced() bool { return c.informer.HasSynced() }

// List returns the cached buffers of every namespace. They are shared with
// the cache: copy before changing them.
func (c *Client) List() []*v1beta1.CapacityBuffer {
	var out []*v1beta1.CapacityBuffer
	for _, o := range c.informer.GetStore().List() {
		if b, ok := o.(*v1beta1.CapacityBuffer); ok {
			out = append(out, b)
		}
	}
	return out
}

// ListNamespace returns the cached buffers of namespace ns, shared with
// the cache as List's.
func (c *Client) ListNamespace(ns string) []*v1beta1.CapacityBuffer {
	objs, err := c.informer.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		return nil
	}
	var out []*v1beta1.CapacityBuffer
	for _, o := range objs {
		if b, ok := o.(*v1beta1.CapacityBuffer); ok {
			out = append(out, b)
		}
	}
	return out
}

// UpdateStatus writes b's status (the status subresource).
func (c *Client) UpdateStatus(ctx context.Context, b *v1beta1.CapacityBuffer) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1beta1.APIVersion)
	u.SetKind(v1beta1.Kind)
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err = c.dyn.Resource(v1beta1.Resource).Namespace(b.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

// apiTimeout bounds each write.
const apiTimeout = 30 * time.Second
