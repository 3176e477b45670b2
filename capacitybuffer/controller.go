package capacitybuffer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
)

// resyncInterval: buffers are resolved again this often even when no watched
// object changed (a failed status write is retried sooner, retryInterval).
const (
	resyncInterval = time.Minute
	retryInterval  = 5 * time.Second
)

// Controller keeps each buffer's status resolved: the pod template its pods
// are made from, how many, and the ReadyForProvisioning condition. Buffers
// of a provisioning strategy other than upstream's active one are left
// alone (another controller owns them).
type Controller struct {
	client  *Client
	sources Sources
	// dryRun: the template goes through the API server's defaulting and
	// admission webhooks (a dry-run pod create) before it is used, so the
	// fake pods take the room real ones would
	// (--capacity-buffer-pod-dry-run-enabled).
	dryRun    bool
	kube      kubernetes.Interface
	templates *Templates
	kick      chan struct{}
	// changed is called after a status write (the autoscaler's loop wakes).
	changed func()
}

// NewController returns a controller writing through client. templates
// receives each resolved buffer's final pod template, for the injector.
func NewController(client *Client, sources Sources, kube kubernetes.Interface, dryRun bool, templates *Templates, changed func()) *Controller {
	return &Controller{client: client, sources: sources, kube: kube, dryRun: dryRun, templates: templates,
		kick: make(chan struct{}, 1), changed: changed}
}

// Watch makes any change of informer's objects start a reconcile.
func (c *Controller) Watch(informer cache.SharedIndexInformer) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { c.Kick() },
		UpdateFunc: func(interface{}, interface{}) { c.Kick() },
		DeleteFunc: func(interface{}) { c.Kick() },
	})
	return err
}

// Kick asks for a reconcile.
func (c *Controller) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run reconciles every buffer on each change and every resyncInterval until
// ctx ends. The caches must have synced.
func (c *Controller) Run(ctx context.Context) {
	klog.InfoS("CapacityBuffer controller started", "dryRun", c.dryRun)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-timer.C:
		}
		next := resyncInterval
		if !c.Reconcile(ctx) {
			next = retryInterval
		}
		timer.Reset(next)
	}
}

// Reconcile resolves every buffer and writes the statuses that changed;
// false when a write failed (the caller retries soon).
func (c *Controller) Reconcile(ctx context.Context) bool {
	ok, wrote := true, false
	live := map[types.UID]bool{}
	for _, b := range c.client.List() {
		if b.Strategy() != v1beta1.ActiveProvisioningStrategy {
			continue
		}
		live[b.UID] = true
		next := b.DeepCopy()
		c.resolveInto(ctx, next)
		if equality.Semantic.DeepEqual(b.Status, next.Status) {
			continue
		}
		if err := c.client.UpdateStatus(ctx, next); err != nil {
			klog.ErrorS(err, "CapacityBuffer status not written", "buffer", klog.KObj(b))
			ok = false
			continue
		}
		wrote = true
	}
	c.templates.keep(live)
	if wrote && c.changed != nil {
		c.changed()
	}
	return ok
}

// resolveInto sets b's status from its spec, as upstream's translators do:
// ReadyForProvisioning True with the template and replicas, or False with
// the reason upstream gives ("error") and a message naming the field.
func (c *Controller) resolveInto(ctx context.Context, b *v1beta1.CapacityBuffer) {
	strategy := b.Strategy()
	b.Status.ProvisioningStrategy = &strategy
	r, err := c.sources.Resolve(b)
	if err == nil && c.dryRun {
		err = c.admit(ctx, b, r)
	}
	if err != nil {
		b.Status.PodTemplateRef, b.Status.PodTemplateGeneration, b.Status.Replicas = nil, nil, nil
		msg := "Buffer not ready for provisioning: " + err.Error()
		if setCondition(b, v1beta1.ReadyForProvisioningCondition, metav1.ConditionFalse, v1beta1.NotReadyReason, msg) {
			klog.InfoS("CapacityBuffer cannot be provisioned", "buffer", klog.KObj(b), "reason", err.Error())
		}
		c.templates.forget(b.UID)
		return
	}
	b.Status.PodTemplateRef, b.Status.PodTemplateGeneration = r.TemplateRef, r.TemplateGeneration
	b.Status.Replicas = &r.Replicas
	if setCondition(b, v1beta1.ReadyForProvisioningCondition, metav1.ConditionTrue, v1beta1.AttributesSetSuccessfullyReason, "ready") {
		klog.InfoS("CapacityBuffer ready for provisioning", "buffer", klog.KObj(b), "replicas", r.Replicas)
	}
	c.templates.set(b.UID, r.Template)
}

// admit runs the template through the API server (a dry-run create: no pod
// is created) and keeps the pod spec it returns, webhooks' changes
// included. A template the API server refuses makes the buffer not ready.
func (c *Controller) admit(ctx context.Context, b *v1beta1.CapacityBuffer, r *Resolved) error {
	key := dryRunKey(b, r)
	if t := c.templates.admitted(b.UID, key); t != nil {
		r.Template = t
		return nil
	}
	pod := &apiv1.Pod{ObjectMeta: *r.Template.ObjectMeta.DeepCopy(), Spec: *r.Template.Spec.DeepCopy()}
	pod.Name, pod.GenerateName, pod.Namespace = "", "capacity-buffer-dry-run-", b.Namespace
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	out, err := c.kube.CoreV1().Pods(b.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("the API server refuses a pod of this template (dry run): %w", err)
	}
	dropServiceAccountVolume(&out.Spec)
	out.Spec.NodeName = ""
	r.Template = &apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: out.Labels, Annotations: out.Annotations}, Spec: out.Spec}
	c.templates.setAdmitted(b.UID, key, r.Template)
	return nil
}

// dryRunKey changes when the dry run's answer may: the buffer's spec or
// the template it resolved to changed.
func dryRunKey(b *v1beta1.CapacityBuffer, r *Resolved) string {
	return fmt.Sprintf("%d/%s", b.Generation, r.Template.String())
}

// dropServiceAccountVolume removes the projected token volume the API
// server adds (kube-api-access-<random>): it differs on every dry run and
// takes no room.
func dropServiceAccountVolume(spec *apiv1.PodSpec) {
	const prefix = "kube-api-access-"
	vols := spec.Volumes[:0]
	for _, v := range spec.Volumes {
		if !strings.HasPrefix(v.Name, prefix) {
			vols = append(vols, v)
		}
	}
	spec.Volumes = vols
	for _, cs := range [][]apiv1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			mounts := cs[i].VolumeMounts[:0]
			for _, m := range cs[i].VolumeMounts {
				if !strings.HasPrefix(m.Name, prefix) {
					mounts = append(mounts, m)
				}
			}
			cs[i].VolumeMounts = mounts
		}
	}
}

// setCondition sets a condition (its transition time changes only with its
// status, as meta.SetStatusCondition does); true when anything changed.
func setCondition(b *v1beta1.CapacityBuffer, typ string, status metav1.ConditionStatus, reason, msg string) bool {
	return meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: b.Generation,
		LastTransitionTime: metav1.Now(),
	})
}

// Templates holds each resolved buffer's final pod template (after the dry
// run), from the controller to the injector in the same process.
type Templates struct {
	mu       sync.Mutex
	byBuffer map[types.UID]*apiv1.PodTemplateSpec
	dryRun   map[types.UID]admitted
}

type admitted struct {
	key      string
	template *apiv1.PodTemplateSpec
}

// NewTemplates returns an empty store.
func NewTemplates() *Templates {
	return &Templates{byBuffer: map[types.UID]*apiv1.PodTemplateSpec{}, dryRun: map[types.UID]admitted{}}
}

// Get returns the buffer's template, nil when the controller has none.
func (t *Templates) Get(uid types.UID) *apiv1.PodTemplateSpec {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byBuffer[uid]
}

func (t *Templates) set(uid types.UID, tmpl *apiv1.PodTemplateSpec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byBuffer[uid] = tmpl
}

func (t *Templates) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byBuffer, uid)
	delete(t.dryRun, uid)
}

func (t *Templates) admitted(uid types.UID, key string) *apiv1.PodTemplateSpec {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.dryRun[uid]; ok && a.key == key {
		return a.template
	}
	return nil
}

func (t *Templates) setAdmitted(uid types.UID, key string, tmpl *apiv1.PodTemplateSpec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dryRun[uid] = admitted{key: key, template: tmpl}
}

// keep drops the buffers not in live (deleted).
func (t *Templates) keep(live map[types.UID]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range t.byBuffer {
		if !live[uid] {
			delete(t.byBuffer, uid)
			delete(t.dryRun, uid)
		}
	}
}
