package provisioningrequest

import (
	"context"
	"fmt"
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
)

// Client reads ProvisioningRequests and PodTemplates from informer caches
// and writes requests' status through the dynamic client (the CRD speaks
// JSON only).
type Client struct {
	dyn       dynamic.NamespaceableResourceInterface
	factory   dynamicinformer.DynamicSharedInformerFactory
	requests  cache.GenericLister
	synced    cache.InformerSynced
	templates corelisters.PodTemplateLister
	timeout   time.Duration
}

// NewClient registers the informers: ProvisioningRequests on a dynamic
// factory of its own (Start starts it), PodTemplates on core's factory.
func NewClient(dyn dynamic.Interface, core informers.SharedInformerFactory, timeout time.Duration) *Client {
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := f.ForResource(v1.Resource)
	return &Client{
		dyn: dyn.Resource(v1.Resource), factory: f, requests: inf.Lister(), synced: inf.Informer().HasSynced,
		templates: core.Core().V1().PodTemplates().Lister(), timeout: timeout,
	}
}

// AddEventHandler calls h on every change of a request (to wake the loop).
func (c *Client) AddEventHandler(h func()) error {
	_, err := c.factory.ForResource(v1.Resource).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { h() },
		UpdateFunc: func(interface{}, interface{}) { h() },
	})
	return err
}

// Start starts the request informer and waits for its cache.
func (c *Client) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("ProvisioningRequest cache did not sync (is the CRD provisioningrequests.autoscaling.x-k8s.io installed?)")
	}
	return nil
}

// List returns the requests in the cache, oldest first (ties by namespace
// and name), each a copy the caller may change.
func (c *Client) List() ([]*v1.ProvisioningRequest, error) {
	objs, err := c.requests.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*v1.ProvisioningRequest, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		pr := &v1.ProvisioningRequest{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), pr); err != nil {
			return nil, fmt.Errorf("ProvisioningRequest %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

// PodTemplate returns the PodTemplate a pod set names.
func (c *Client) PodTemplate(namespace, name string) (*apiv1.PodTemplate, error) {
	return c.templates.PodTemplates(namespace).Get(name)
}

// UpdateStatus writes pr's status (its resourceVersion guards against
// overwriting a newer one).
func (c *Client) UpdateStatus(ctx context.Context, pr *v1.ProvisioningRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pr.APIVersion, pr.Kind = v1.SchemeGroupVersion.String(), v1.Kind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pr)
	if err != nil {
		return err
	}
	_, err = c.dyn.Namespace(pr.Namespace).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
	return err
}

// Delete deletes pr.
func (c *Client) Delete(ctx context.Context, pr *v1.ProvisioningRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.dyn.Namespace(pr.Namespace).Delete(ctx, pr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pr.UID}})
}
