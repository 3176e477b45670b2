package provisioningrequest

import (
	"context"
	"fmt"
	"sort"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	prinformers "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/client/informers/externalversions"
	prlisters "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/provisioningrequest/v1"
	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/informercache"
)

// Client reads ProvisioningRequests and PodTemplates from informer caches
// and writes requests' status through the generated typed client. What it
// reads is the cache's own object, shared with every reader, as
// client-go's listers return it: copy before changing one.
type Client struct {
	client    versioned.Interface
	factory   prinformers.SharedInformerFactory
	informer  cache.SharedIndexInformer
	requests  prlisters.ProvisioningRequestLister
	templates corelisters.PodTemplateLister
	timeout   time.Duration
}

// NewClient registers the informers: ProvisioningRequests on a factory of
// their own (Start starts it), PodTemplates on core's factory, trimmed as
// the pods made from them are only simulated (informercache.Templates).
func NewClient(client versioned.Interface, core informers.SharedInformerFactory, timeout time.Duration) (*Client, error) {
	f := prinformers.NewSharedInformerFactory(client, 0)
	inf := f.Autoscaling().V1().ProvisioningRequests()
	templates := core.Core().V1().PodTemplates()
	if err := informercache.Templates(templates.Informer()); err != nil {
		return nil, fmt.Errorf("PodTemplate cache: %w", err)
	}
	return &Client{
		client: client, factory: f, informer: inf.Informer(), requests: inf.Lister(),
		templates: templates.Lister(), timeout: timeout,
	}, nil
}

// AddEventHandler calls h on every change of a request (to wake the loop).
func (c *Client) AddEventHandler(h func()) error {
	_, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { h() },
		UpdateFunc: func(interface{}, interface{}) { h() },
	})
	return err
}

// Start starts the request informer and waits for its cache.
func (c *Client) Start(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return fmt.Errorf("ProvisioningRequest cache did not sync (is the CRD provisioningrequests.autoscaling.x-k8s.io installed?)")
	}
	return nil
}

// List returns the requests in the cache, oldest first (ties by namespace
// and name). They are shared with the cache: copy before changing them.
func (c *Client) List() ([]*v1.ProvisioningRequest, error) {
	out, err := c.requests.List(labels.Everything())
	if err != nil {
		return nil, err
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

// deepCopies returns copies of prs, for a caller that changes them.
func deepCopies(prs []*v1.ProvisioningRequest) []*v1.ProvisioningRequest {
	out := make([]*v1.ProvisioningRequest, len(prs))
	for i, pr := range prs {
		out[i] = pr.DeepCopy()
	}
	return out
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
	_, err := c.client.AutoscalingV1().ProvisioningRequests(pr.Namespace).UpdateStatus(ctx, pr, metav1.UpdateOptions{})
	return err
}

// Delete deletes pr.
func (c *Client) Delete(ctx context.Context, pr *v1.ProvisioningRequest) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.client.AutoscalingV1().ProvisioningRequests(pr.Namespace).Delete(ctx, pr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pr.UID}})
}
