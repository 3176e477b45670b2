package capacitybuffer

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/client/clientset/versioned"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/informercache"
)

// Config says which parts run (the three --capacity-buffer-* flags).
type Config struct {
	Controller, Injection, DryRun bool
}

// Components are the parts Config enables, sharing one buffer cache.
type Components struct {
	client     *Client
	synced     []cache.InformerSynced
	Controller *Controller // nil unless cfg.Controller
	Injector   *Injector   // nil unless cfg.Injection
	// Writer writes what the Injector decided (nil unless cfg.Injection).
	Writer *StatusWriter
}

// New builds the enabled parts (nil when none is). The listers of pod
// templates and workloads come from factory, the autoscaler's own caches
// (its Run starts them); changed is called when the controller writes a
// status.
func New(cfg Config, kube kubernetes.Interface, buffers versioned.Interface, factory informers.SharedInformerFactory, changed func()) (*Components, error) {
	if !cfg.Controller && !cfg.Injection {
		return nil, nil
	}
	client, err := NewClient(buffers)
	if err != nil {
		return nil, fmt.Errorf("CapacityBuffer client: %w", err)
	}
	pts := factory.Core().V1().PodTemplates()
	deps := factory.Apps().V1().Deployments()
	rss := factory.Apps().V1().ReplicaSets()
	sss := factory.Apps().V1().StatefulSets()
	jobs := factory.Batch().V1().Jobs()
	rcs := factory.Core().V1().ReplicationControllers()
	src := Sources{PodTemplates: pts.Lister(), Deployments: deps.Lister(), ReplicaSets: rss.Lister(),
		StatefulSets: sss.Lister(), Jobs: jobs.Lister(), ReplicationControllers: rcs.Lister()}
	// The templates are read trimmed, as the autoscaler's are (the dry run
	// reads the live object: live.go).
	templateInformers := []cache.SharedIndexInformer{pts.Informer(), deps.Informer(), rss.Informer(), sss.Informer(), jobs.Informer(), rcs.Informer()}
	if err := informercache.Templates(templateInformers...); err != nil {
		return nil, fmt.Errorf("CapacityBuffer template caches: %w", err)
	}
	informers := append([]cache.SharedIndexInformer{client.Informer()}, templateInformers...)
	c := &Components{client: client}
	for _, inf := range informers {
		c.synced = append(c.synced, inf.HasSynced)
	}
	var templates *Templates
	if cfg.Controller {
		templates = NewTemplates()
		c.Controller = NewController(client, src, kube, cfg.DryRun, templates, changed)
		for _, inf := range informers {
			if err := c.Controller.Watch(inf); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Injection {
		c.Injector = NewInjector(client, src, templates)
		c.Writer = &StatusWriter{client: client}
		for _, s := range c.synced {
			c.Injector.synced = append(c.Injector.synced, s)
		}
	}
	return c, nil
}

// Run starts the buffer cache and, with the controller, runs it once the
// caches have synced, until ctx ends.
func (c *Components) Run(ctx context.Context) {
	go c.client.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	klog.InfoS("CapacityBuffer caches synced", "buffers", len(c.client.List()))
	if c.Controller != nil {
		c.Controller.Run(ctx)
	}
}
