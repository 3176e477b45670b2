// Package capacitybuffer implements CapacityBuffers
// (autoscaling.x-k8s.io/v1beta1): the controller that resolves each buffer
// into its status (pod shape and number of replicas, or a condition saying
// why not), and the injector that turns resolved buffers into fake pods for
// scale-up (fakepods), so their room is provisioned and kept without
// any pod running in it.
package capacitybuffer

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/client/clientset/versioned"
	cbinformers "github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/client/informers/externalversions/capacitybuffer/v1beta1"
	cblisters "github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/client/listers/capacitybuffer/v1beta1"
	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
)

// Client reads buffers from an informer cache and writes their status,
// through the generated typed client. What it reads is the cache's own
// object, shared with every reader, as client-go's listers return it: copy
// before changing one.
type Client struct {
	client   versioned.Interface
	informer cache.SharedIndexInformer
	lister   cblisters.CapacityBufferLister
}

// NewClient watches CapacityBuffers in every namespace.
func NewClient(client versioned.Interface) (*Client, error) {
	inf := cbinformers.NewCapacityBufferInformer(client, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(dropManagedFields); err != nil {
		return nil, err
	}
	return &Client{client: client, informer: inf, lister: cblisters.NewCapacityBufferLister(inf.GetIndexer())}, nil
}

// dropManagedFields is the one field the cache drops. Status writes send a
// copy of the cached buffer back, which is safe for this field alone: an
// update without managedFields keeps the stored ones (the API server's
// rule).
func dropManagedFields(obj interface{}) (interface{}, error) {
	if b, ok := obj.(*v1beta1.CapacityBuffer); ok {
		b.ManagedFields = nil
	}
	return obj, nil
}

// Informer is the buffers' informer (for event handlers; Start runs it).
func (c *Client) Informer() cache.SharedIndexInformer { return c.informer }

// HasSynced says whether the cache holds the first full list.
func (c *Client) HasSynced() bool { return c.informer.HasSynced() }

// List returns the cached buffers of every namespace (shared: copy before
// changing them).
func (c *Client) List() []*v1beta1.CapacityBuffer {
	out, _ := c.lister.List(labels.Everything()) // a cache list fails never
	return out
}

// ListNamespace returns the cached buffers of namespace ns (shared).
func (c *Client) ListNamespace(ns string) []*v1beta1.CapacityBuffer {
	out, _ := c.lister.CapacityBuffers(ns).List(labels.Everything())
	return out
}

// Get returns the cached buffer namespace/name (shared), a NotFound error
// when the cache has none.
func (c *Client) Get(namespace, name string) (*v1beta1.CapacityBuffer, error) {
	return c.lister.CapacityBuffers(namespace).Get(name)
}

// UpdateStatus writes b's status (the status subresource).
func (c *Client) UpdateStatus(ctx context.Context, b *v1beta1.CapacityBuffer) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := c.client.AutoscalingV1beta1().CapacityBuffers(b.Namespace).UpdateStatus(ctx, b, metav1.UpdateOptions{})
	return err
}

// apiTimeout bounds each write.
const apiTimeout = 30 * time.Second
