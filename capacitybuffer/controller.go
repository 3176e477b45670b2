package capacitybuffer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
)

// Retries and resyncs. A buffer that is not ready (a refusal, a missing
// template) or whose status could not be written is retried with per-item
// exponential backoff, from retryBase up to retryMax, whatever made it
// fail: an admission refusal (a full ResourceQuota, a webhook) can end
// without any change the controller watches, so it is tried again, but
// each try costs a list and a dry-run create from the client's QPS, which
// the soft taints, evictions and drains share. Every resyncInterval the
// buffers not backing off are resolved again from the caches (no API call
// unless their template changed).
const (
	retryBase      = time.Second
	retryMax       = 5 * time.Minute
	resyncInterval = time.Minute
)

// Controller keeps each buffer's status resolved: the pod template its pods
// are made from, how many, and the ReadyForProvisioning condition. Buffers
// of a provisioning strategy other than upstream's active one are left
// alone (another controller owns them). Work goes through a rate-limited
// queue of buffer keys (namespace/name), as in every client-go controller:
// a buffer is synced when its spec or the object its template comes from
// changes, when it fails (with backoff), and on the periodic resync; never
// because of its own status write.
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
	queue     workqueue.TypedRateLimitingInterface[string]
	// changed is called after a status write (the autoscaler's loop wakes).
	changed func()
}

// NewController returns a controller writing through client. templates
// receives each resolved buffer's final pod template, for the injector.
func NewController(client *Client, sources Sources, kube kubernetes.Interface, dryRun bool, templates *Templates, changed func()) *Controller {
	return newController(client, sources, kube, dryRun, templates, changed, nil)
}

// newController is NewController with the queue's delays going through
// delayed (nil: a real clock's).
func newController(client *Client, sources Sources, kube kubernetes.Interface, dryRun bool, templates *Templates, changed func(), delayed workqueue.TypedDelayingInterface[string]) *Controller {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "capacitybuffers", DelayingQueue: delayed})
	return &Controller{client: client, sources: sources, kube: kube, dryRun: dryRun, templates: templates, queue: q, changed: changed}
}

// Watch queues the buffers informer's changes concern: a buffer whose spec
// changed (a new generation; its status writes, the controller's own
// included, are not a change to act on), was added or deleted; or the
// buffers naming a PodTemplate or workload that was added, deleted or
// given a new generation (its template or replicas changed; a status
// update leaves the generation).
func (c *Controller) Watch(informer cache.SharedIndexInformer) error {
	_, err := informer.AddEventHandler(c.handler())
	return err
}

func (c *Controller) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.enqueueFor(obj) },
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, err1 := meta.Accessor(oldObj)
			n, err2 := meta.Accessor(newObj)
			if err1 == nil && err2 == nil && o.GetGeneration() == n.GetGeneration() {
				return
			}
			c.enqueueFor(newObj)
		},
		DeleteFunc: func(obj interface{}) { c.enqueueFor(obj) },
	}
}

// enqueueFor queues the buffer obj is, or the buffers of obj's namespace
// whose spec names obj (by name: a PodTemplate and a Deployment of the same
// name both count, which costs a resolve from the caches at most).
func (c *Controller) enqueueFor(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if b, ok := obj.(*v1beta1.CapacityBuffer); ok {
		c.queue.Add(cache.ObjectName{Namespace: b.Namespace, Name: b.Name}.String())
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	for _, b := range c.client.ListNamespace(m.GetNamespace()) {
		if (b.Spec.PodTemplateRef != nil && b.Spec.PodTemplateRef.Name == m.GetName()) ||
			(b.Spec.ScalableRef != nil && b.Spec.ScalableRef.Name == m.GetName()) {
			c.queue.Add(cache.ObjectName{Namespace: b.Namespace, Name: b.Name}.String())
		}
	}
}

// Run works the queue until ctx ends, and resyncs every resyncInterval.
// The caches must have synced.
func (c *Controller) Run(ctx context.Context) {
	klog.InfoS("CapacityBuffer controller started", "dryRun", c.dryRun)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	go wait.UntilWithContext(ctx, func(context.Context) { c.resync() }, resyncInterval)
	for c.processNext(ctx) {
	}
}

// resync queues every buffer but those backing off: they come back when
// their delay ends, and queueing them now would cut it short.
func (c *Controller) resync() {
	for _, b := range c.client.List() {
		key := cache.ObjectName{Namespace: b.Namespace, Name: b.Name}.String()
		if c.queue.NumRequeues(key) == 0 {
			c.queue.Add(key)
		}
	}
}

// processNext syncs one buffer from the queue; false once the queue is
// shut down.
func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	if !errors.Is(err, errNotReady) {
		klog.ErrorS(err, "CapacityBuffer not synced", "buffer", key)
	}
	c.queue.AddRateLimited(key)
	klog.V(4).InfoS("CapacityBuffer retried with backoff", "buffer", key, "retries", c.queue.NumRequeues(key))
	return true
}

// errNotReady: the buffer's status says why it is not ready; it is
// retried with backoff.
var errNotReady = errors.New("not ready for provisioning")

// sync resolves one buffer and writes its status if it changed. It returns
// errNotReady when the buffer is not ready, the write's error when the
// status could not be written, nil otherwise.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	b, err := c.client.Get(ns, name)
	if apierrors.IsNotFound(err) {
		c.forgetDeleted()
		return nil
	}
	if err != nil {
		return err
	}
	if b.Strategy() != v1beta1.ActiveProvisioningStrategy {
		c.templates.forget(b.UID)
		return nil
	}
	next := b.DeepCopy()
	ready := c.resolveInto(ctx, next)
	if !equality.Semantic.DeepEqual(b.Status, next.Status) {
		if err := c.client.UpdateStatus(ctx, next); err != nil {
			return fmt.Errorf("writing the status: %w", err)
		}
		if c.changed != nil {
			c.changed()
		}
	}
	if !ready {
		return errNotReady
	}
	return nil
}

// forgetDeleted drops the templates of buffers no longer in the cache.
func (c *Controller) forgetDeleted() {
	live := map[types.UID]bool{}
	for _, b := range c.client.List() {
		live[b.UID] = true
	}
	c.templates.keep(live)
}

// resolveInto sets b's status from its spec, as upstream's translators do:
// ReadyForProvisioning True with the template and replicas, or False with
// the reason upstream gives ("error") and a message naming the field;
// true when ready. The message depends on the cause only, so that a
// refusal repeated with other details (the usage a quota reports, a
// generated pod name) does not rewrite the condition.
func (c *Controller) resolveInto(ctx context.Context, b *v1beta1.CapacityBuffer) bool {
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
		return false
	}
	b.Status.PodTemplateRef, b.Status.PodTemplateGeneration = r.TemplateRef, r.TemplateGeneration
	b.Status.Replicas = &r.Replicas
	if setCondition(b, v1beta1.ReadyForProvisioningCondition, metav1.ConditionTrue, v1beta1.AttributesSetSuccessfullyReason, "ready") {
		klog.InfoS("CapacityBuffer ready for provisioning", "buffer", klog.KObj(b), "replicas", r.Replicas)
	}
	c.templates.set(b.UID, r.Template)
	return true
}

// admit runs the buffer's template through the API server (a dry-run
// create: no pod is created) and keeps the pod spec it returns, webhooks'
// changes included, in r. The template sent is the live object's, read
// again (readLive), not r's cached one. A template the API server refuses
// makes the buffer not ready; one it admitted is not sent again until the
// buffer's spec or its template's source changes.
func (c *Controller) admit(ctx context.Context, b *v1beta1.CapacityBuffer, r *Resolved) error {
	key := dryRunKey(b, r)
	if t := c.templates.admitted(b.UID, key); t != nil {
		r.Template = t
		return nil
	}
	live, err := readLive(ctx, c.kube, b)
	if err != nil {
		return fmt.Errorf("the template to dry-run: %s", stableMessage(err))
	}
	out, err := c.dryRunCreate(ctx, b, live)
	if err != nil {
		return fmt.Errorf("the API server refuses a pod of this template (dry run): %s", stableMessage(err))
	}
	dropServiceAccountVolume(&out.Spec)
	out.Spec.NodeName = ""
	r.Template = &apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: out.Labels, Annotations: out.Annotations}, Spec: out.Spec}
	c.templates.setAdmitted(b.UID, key, r.Template)
	return nil
}

// dryRunCreate sends a pod of the live template as a dry-run create.
func (c *Controller) dryRunCreate(ctx context.Context, b *v1beta1.CapacityBuffer, live liveTemplate) (*apiv1.Pod, error) {
	pod := &apiv1.Pod{ObjectMeta: *live.spec.ObjectMeta.DeepCopy(), Spec: *live.spec.Spec.DeepCopy()}
	pod.Name, pod.GenerateName, pod.Namespace = "", dryRunPrefix, b.Namespace
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return c.kube.CoreV1().Pods(b.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// dryRunPrefix is the generateName of the dry run's pods.
const dryRunPrefix = "capacity-buffer-dry-run-"

// Parts of an API server's refusal that change from one try to the next
// for the same cause: the name generated for the dry run's pod, and what a
// ResourceQuota reports as used ("exceeded quota: q, requested: pods=1,
// used: pods=4, limited: pods=4").
var (
	generatedName = regexp.MustCompile(regexp.QuoteMeta(dryRunPrefix) + `[a-z0-9]+`)
	quotaUsed     = regexp.MustCompile(`, used: [^ ]*,`)
)

// stableMessage is err's message without the parts that change from one
// try to the next (generatedName, quotaUsed).
func stableMessage(err error) string {
	msg := generatedName.ReplaceAllString(err.Error(), dryRunPrefix+"<generated>")
	return quotaUsed.ReplaceAllString(msg, ",")
}

// dryRunKey changes when the dry run's answer may: the buffer's spec, the
// template it resolved to or the generation of that template's source
// changed (the last covers the fields the cache trims).
func dryRunKey(b *v1beta1.CapacityBuffer, r *Resolved) string {
	return fmt.Sprintf("%d/%d/%s", b.Generation, r.SourceGeneration, r.Template.String())
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

// setCondition sets a condition with meta.SetStatusCondition: its
// transition time changes only with its status, so a cause repeated is no
// write. (ProvisioningRequests stamp every write instead: their backoff
// counts from it; see provisioningrequest's setCondition.) True when
// anything changed.
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
