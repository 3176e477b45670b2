package preflight

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	cbv1beta1 "github.com/doks-autoscaler/cluster-autoscaler/apis/capacitybuffer/v1beta1"
	provreqv1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/deploy"
	"github.com/doks-autoscaler/cluster-autoscaler/simulator/dra"
	"github.com/doks-autoscaler/cluster-autoscaler/version"
)

// kubeClient builds the client the autoscaler would build from the same
// flags: --kubeconfig / --kubernetes, else the in-cluster configuration.
func kubeClient(o config.AutoscalingOptions) (kubernetes.Interface, string, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" || o.KubernetesURL != "" {
		cfg, err = clientcmd.BuildConfigFromFlags(o.KubernetesURL, o.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client configuration (--kubeconfig %q, --kubernetes %q): %v", o.Kubeconfig, o.KubernetesURL, err)
	}
	cfg.UserAgent = "cluster-autoscaler-preflight/" + version.Version
	cfg.Timeout = 10 * time.Second
	// About 80 access reviews: let them go at once.
	cfg.QPS, cfg.Burst = 100, 200
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client: %v", err)
	}
	return c, cfg.Host, nil
}

func checkKubernetes(ctx context.Context, o Options) Report {
	kube, host := o.Kube, o.KubeHost
	if kube == nil {
		var err error
		if kube, host, err = kubeClient(o.Autoscaling); err != nil {
			return Report{{Check: "kube-config", Verdict: Fail, Detail: err.Error(),
				Fix: "run in the cluster (the chart's helm test does), or give --kubeconfig=<file> (and --kubernetes=<url> to override its server)"}}
		}
	}
	var r Report
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		res := Result{Check: "kube-api", Verdict: Fail, Detail: fmt.Sprintf("cannot reach the Kubernetes API server at %s: %v", host, err),
			Fix: "check the kubeconfig's server and that this machine or pod reaches it"}
		if apierrors.IsUnauthorized(err) {
			res.Detail = fmt.Sprintf("the Kubernetes API server at %s refused the credentials (401): %v", host, err)
			res.Fix = "use a kubeconfig whose credentials are valid (doctl kubernetes cluster kubeconfig save <cluster>)"
		}
		return append(r, res)
	}
	who := whoAmI(ctx, kube)
	r = append(r, Result{Check: "kube-api", Verdict: OK, Detail: fmt.Sprintf("Kubernetes API server at %s: %s, as %s", host, v.GitVersion, who)})
	o.Autoscaling.DynamicResourceAllocationEnabled, r = checkDRA(kube, o.Autoscaling, r)
	r = append(r, checkRBAC(ctx, kube, o.Autoscaling, who)...)
	r = append(r, checkBufferDryRun(ctx, kube, o.Autoscaling, who)...)
	r = append(r, checkPodDeletionCost(ctx, kube, o.Autoscaling, who)...)
	r = append(r, checkCRDs(kube, o.Autoscaling)...)
	r = append(r, checkNamespace(ctx, kube, o.Autoscaling)...)
	return r
}

// whoAmI asks the API server who the client is (SelfSubjectReview, which
// stores nothing); "(unknown user)" when it cannot tell.
func whoAmI(ctx context.Context, kube kubernetes.Interface) string {
	ssr, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || ssr.Status.UserInfo.Username == "" {
		return "(unknown user)"
	}
	return ssr.Status.UserInfo.Username
}

// checkDRA reports whether the server serves resource.k8s.io/v1 with the
// resources the simulation reads; the autoscaler runs without DRA when it
// does not, so that is a warning. It returns whether DRA stays on.
func checkDRA(kube kubernetes.Interface, o config.AutoscalingOptions, r Report) (bool, Report) {
	gv := resourceapi.SchemeGroupVersion.String()
	if !o.DynamicResourceAllocationEnabled {
		return false, append(r, Result{Check: "kube-api-group/" + gv, Verdict: OK, Detail: "not needed: Dynamic Resource Allocation is off"})
	}
	list, err := kube.Discovery().ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
		return false, append(r, Result{Check: "kube-api-group/" + gv, Verdict: Warn,
			Detail: fmt.Sprintf("the API server does not serve %s (Kubernetes older than 1.34?): the autoscaler runs without DRA, so pods' resource claims and nodes' devices are not simulated", gv),
			Fix:    "upgrade the cluster to Kubernetes 1.34 or later to simulate DRA claims (docs/compatibility.md)"})
	case err != nil:
		return true, append(r, Result{Check: "kube-api-group/" + gv, Verdict: Fail, Detail: fmt.Sprintf("discovery of %s failed: %v: the autoscaler stops at start-up on this", gv, err),
			Fix: "retry; check the API server's health (kubectl get --raw /readyz)"})
	}
	var missing []string
	for _, name := range dra.Resources {
		if !slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == name }) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return false, append(r, Result{Check: "kube-api-group/" + gv, Verdict: Warn,
			Detail: fmt.Sprintf("the API server serves %s without %s: the autoscaler runs without DRA", gv, strings.Join(missing, ", ")),
			Fix:    "enable the DRA resources on the API server to simulate claims (docs/compatibility.md)"})
	}
	return true, append(r, Result{Check: "kube-api-group/" + gv, Verdict: OK, Detail: fmt.Sprintf("%s is served: DRA claims are simulated", gv)})
}

// access is one right the autoscaler needs: a resource (maybe a
// subresource, maybe one object by name) and the verbs on it, cluster-wide
// or in its namespace.
type access struct {
	namespace, group, resource, subresource, name string
	verbs                                         []string
	// off names the flag that leaves it unused ("" when always needed).
	off string
}

func (a access) String() string {
	s := a.resource
	if a.subresource != "" {
		s += "/" + a.subresource
	}
	if a.group != "" {
		s += "." + a.group
	}
	if a.name != "" {
		s += ":" + a.name
	}
	if a.namespace != "" {
		s = a.namespace + "/" + s
	}
	return s
}

// neededAccess derives the rights from deploy/'s ClusterRole and Role, the
// rules the shipped installation grants; the Role's objects move to
// --namespace and its names follow the flags. Rights of features that are
// off are marked so.
func neededAccess(o config.AutoscalingOptions) ([]access, error) {
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(deploy.ClusterRole, &cr); err != nil {
		return nil, fmt.Errorf("deploy/clusterrole.yaml: %v", err)
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(deploy.Role, &role); err != nil {
		return nil, fmt.Errorf("deploy/role.yaml: %v", err)
	}
	var out []access
	add := func(ns string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					names := rule.ResourceNames
					if len(names) == 0 {
						names = []string{""}
					}
					for _, name := range names {
						a := access{namespace: ns, group: g, verbs: slices.Clone(rule.Verbs)}
						a.resource, a.subresource, _ = strings.Cut(res, "/")
						a.name = renamed(o, a.resource, name)
						a.off = offFlag(o, a)
						out = append(out, a)
					}
				}
			}
		}
	}
	add("", cr.Rules)
	add(o.Namespace, role.Rules)
	// Rules naming the same object are merged, so each gets one line.
	merged := map[string]*access{}
	var order []string
	for _, a := range out {
		k := a.String()
		if m, ok := merged[k]; ok {
			for _, v := range a.verbs {
				if !slices.Contains(m.verbs, v) {
					m.verbs = append(m.verbs, v)
				}
			}
			continue
		}
		cp := a
		merged[k] = &cp
		order = append(order, k)
	}
	res := make([]access, 0, len(order))
	for _, k := range order {
		res = append(res, *merged[k])
	}
	return res, nil
}

// renamed maps the default object names of deploy/role.yaml to the flags'.
func renamed(o config.AutoscalingOptions, resource, name string) string {
	switch {
	case resource == "configmaps" && name == "cluster-autoscaler-status":
		return o.StatusConfigMapName
	case resource == "leases" && name == "cluster-autoscaler":
		return o.LeaderElectResourceName
	}
	return name
}

// offFlag names the flag that makes a right unused, "" if it is needed.
func offFlag(o config.AutoscalingOptions, a access) string {
	switch {
	case a.group == provreqv1.SchemeGroupVersion.Group && a.resource == provreqv1.ProvisioningRequestsResource.Resource && !o.ProvisioningRequestsEnabled:
		return "--enable-provisioning-requests is off"
	case a.group == cbv1beta1.SchemeGroupVersion.Group && a.resource == cbv1beta1.CapacityBuffersResource.Resource &&
		!o.CapacityBufferControllerEnabled && !o.CapacityBufferPodInjectionEnabled:
		return "the capacity buffer flags are off"
	case a.group == resourceapi.SchemeGroupVersion.Group && !o.DynamicResourceAllocationEnabled:
		return "DRA is off"
	case a.group == "coordination.k8s.io" && a.resource == "leases" && !o.LeaderElect:
		return "--leader-elect is off"
	case a.resource == "configmaps" && (a.name != "" || slices.Equal(a.verbs, []string{"create"})) && !o.WriteStatusConfigMap:
		return "--write-status-configmap is off"
	}
	return ""
}

// checkRBAC asks the API server, one SelfSubjectAccessReview per verb,
// whether the client may do what the autoscaler does. The allowed rights
// make one line; each resource with a missing verb a line of its own.
func checkRBAC(ctx context.Context, kube kubernetes.Interface, o config.AutoscalingOptions, who string) Report {
	needed, err := neededAccess(o)
	if err != nil {
		return Report{{Check: "kube-rbac", Verdict: Fail, Detail: "reading the RBAC rules built in: " + err.Error()}}
	}
	type review struct {
		a       int
		verb    string
		allowed bool
		err     error
	}
	var reviews []*review
	for i, a := range needed {
		for _, v := range a.verbs {
			reviews = append(reviews, &review{a: i, verb: v})
		}
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, rv := range reviews {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a := needed[rv.a]
			ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: a.namespace, Verb: rv.verb, Group: a.group,
					Resource: a.resource, Subresource: a.subresource, Name: a.name}}}
			got, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
			if err != nil {
				rv.err = err
				return
			}
			rv.allowed = got.Status.Allowed
		}()
	}
	wg.Wait()

	var r Report
	allowed, unused := 0, 0
	missing := map[int][]string{}
	for _, rv := range reviews {
		if rv.err != nil {
			fix := "retry; check the API server's health"
			if apierrors.IsForbidden(rv.err) {
				fix = "the identity may not even ask (selfsubjectaccessreviews create, which every authenticated user has through system:basic-user): use the autoscaler's ServiceAccount"
			}
			return Report{{Check: "kube-rbac", Verdict: Fail, Detail: fmt.Sprintf("asking the API server what %s may do failed: %v", who, rv.err), Fix: fix}}
		}
		switch {
		case rv.allowed:
			allowed++
		case needed[rv.a].off != "":
			unused++
		default:
			missing[rv.a] = append(missing[rv.a], rv.verb)
		}
	}
	idx := make([]int, 0, len(missing))
	for i := range missing {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		a := needed[i]
		scope := "cluster-wide (ClusterRole cluster-autoscaler)"
		if a.namespace != "" {
			scope = "in namespace " + a.namespace + " (Role cluster-autoscaler)"
		}
		r = append(r, Result{Check: "kube-rbac/" + a.String(), Verdict: Fail,
			Detail: fmt.Sprintf("%s may not %s %s %s", who, strings.Join(missing[i], ", "), a.String(), scope),
			Fix:    "apply deploy/'s RBAC (kubectl apply -k deploy/) or the chart's (rbac.create=true), bound to the ServiceAccount the autoscaler runs as"})
	}
	res := Result{Check: "kube-rbac", Verdict: OK, Detail: fmt.Sprintf("%d of %d access reviews allowed for %s (rules of deploy/clusterrole.yaml and deploy/role.yaml, namespace %s)",
		allowed, len(reviews), who, o.Namespace)}
	if len(missing) > 0 {
		res.Verdict = Fail
		res.Detail += fmt.Sprintf("; %d resources miss rights (lines above)", len(missing))
		res.Fix = "grant the rights named above"
	}
	if unused > 0 {
		res.Detail += fmt.Sprintf("; %d reviews denied for features that are off, which is fine", unused)
	}
	return append(r, res)
}

// checkCRDs checks the CRDs of the enabled capacity APIs are served.
func checkCRDs(kube kubernetes.Interface, o config.AutoscalingOptions) Report {
	type crd struct {
		gv, resource, flag string
		on                 bool
	}
	crds := []crd{
		{provreqv1.SchemeGroupVersion.String(), provreqv1.ProvisioningRequestsResource.Resource, "--enable-provisioning-requests", o.ProvisioningRequestsEnabled},
		{cbv1beta1.SchemeGroupVersion.String(), cbv1beta1.CapacityBuffersResource.Resource, "--capacity-buffer-controller-enabled or --capacity-buffer-pod-injection-enabled",
			o.CapacityBufferControllerEnabled || o.CapacityBufferPodInjectionEnabled},
	}
	var r Report
	for _, c := range crds {
		group, version, _ := strings.Cut(c.gv, "/")
		check := "kube-crd/" + c.resource + "." + group
		if !c.on {
			r = append(r, Result{Check: check, Verdict: OK, Detail: "not needed: " + c.flag + " is off"})
			continue
		}
		list, err := kube.Discovery().ServerResourcesForGroupVersion(c.gv)
		served := err == nil && slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == c.resource })
		switch {
		case served:
			r = append(r, Result{Check: check, Verdict: OK, Detail: fmt.Sprintf("%s %s is served, as %s needs", c.resource, c.gv, c.flag)})
		case err == nil || apierrors.IsNotFound(err):
			r = append(r, Result{Check: check, Verdict: Fail,
				Detail: fmt.Sprintf("%s needs the %s.%s CRD (version %s), which the API server does not serve: the autoscaler's informer would never sync", c.flag, c.resource, group, version),
				Fix:    "install it: kubectl apply -k deploy/crds (the chart installs it from its crds/), or turn the flag off"})
		default:
			r = append(r, Result{Check: check, Verdict: Fail, Detail: fmt.Sprintf("discovery of %s failed: %v", c.gv, err), Fix: "retry; check the API server's health"})
		}
	}
	return r
}

// checkNamespace checks the autoscaler's namespace (the Lease's, the status
// ConfigMap's) exists and says who holds the Lease.
func checkNamespace(ctx context.Context, kube kubernetes.Interface, o config.AutoscalingOptions) Report {
	var r Report
	// A list by name: the ClusterRole grants list on namespaces, not get.
	list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", o.Namespace).String()})
	switch {
	case err != nil:
		r = append(r, Result{Check: "kube-namespace", Verdict: Warn, Detail: fmt.Sprintf("cannot tell whether namespace %s exists: %v", o.Namespace, err),
			Fix: "grant list on namespaces (deploy/clusterrole.yaml does)"})
	case !slices.ContainsFunc(list.Items, func(n corev1.Namespace) bool { return n.Name == o.Namespace }):
		return append(r, Result{Check: "kube-namespace", Verdict: Fail,
			Detail: fmt.Sprintf("namespace %s (--namespace: the Lease, the status ConfigMap) does not exist", o.Namespace),
			Fix:    fmt.Sprintf("kubectl create namespace %s, or set --namespace to the namespace the autoscaler is installed in", o.Namespace)})
	default:
		r = append(r, Result{Check: "kube-namespace", Verdict: OK, Detail: fmt.Sprintf("namespace %s exists", o.Namespace)})
	}
	if !o.LeaderElect {
		return r
	}
	check := "kube-lease"
	lease, err := kube.CoordinationV1().Leases(o.Namespace).Get(ctx, o.LeaderElectResourceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r = append(r, Result{Check: check, Verdict: OK, Detail: fmt.Sprintf("Lease %s/%s does not exist yet: the first replica creates it", o.Namespace, o.LeaderElectResourceName)})
	case err != nil:
		r = append(r, Result{Check: check, Verdict: Warn, Detail: fmt.Sprintf("cannot read Lease %s/%s: %v", o.Namespace, o.LeaderElectResourceName, err)})
	default:
		holder := "nobody"
		if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
			holder = *lease.Spec.HolderIdentity
		}
		d := fmt.Sprintf("Lease %s/%s is held by %s", o.Namespace, o.LeaderElectResourceName, holder)
		if lease.Spec.RenewTime != nil {
			d += fmt.Sprintf(", renewed %s ago", time.Since(lease.Spec.RenewTime.Time).Round(time.Second))
		}
		r = append(r, Result{Check: check, Verdict: OK, Detail: d + ": a running autoscaler with this Lease leads, another replica waits for it"})
	}
	return r
}

// checkBufferDryRun: the CapacityBuffer controller's dry run creates pods
// as dry runs, a right deploy/ does not grant (the chart does when both
// are on; docs/capacity-buffers.md). Without it every buffer reports
// ReadyForProvisioning=False, which does not stop the autoscaler.
func checkBufferDryRun(ctx context.Context, kube kubernetes.Interface, o config.AutoscalingOptions, who string) Report {
	if !o.CapacityBufferControllerEnabled || !o.CapacityBufferPodDryRunEnabled {
		return nil
	}
	return checkOptionalRight(ctx, kube, who, optionalRight{verb: "create", resource: "pods", check: "kube-rbac/pods:create (capacity buffer dry run)",
		denied:  "which the CapacityBuffer controller's dry run (--capacity-buffer-pod-dry-run-enabled, on by default) needs: every buffer would report ReadyForProvisioning=False",
		fix:     "grant create on pods (the chart does with both on), or pass --capacity-buffer-pod-dry-run-enabled=false (docs/capacity-buffers.md#dry-run)",
		allowed: "(as dry runs) for the CapacityBuffer controller"})
}

// checkPodDeletionCost: --pod-deletion-cost-on-unneeded-nodes patches
// pods, a right deploy/ does not grant (the chart does with the flag in
// extraArgs). Without it no pod gets a deletion cost; scale-down works as
// without the flag.
func checkPodDeletionCost(ctx context.Context, kube kubernetes.Interface, o config.AutoscalingOptions, who string) Report {
	if !o.PodDeletionCostOnUnneededNodes {
		return nil
	}
	return checkOptionalRight(ctx, kube, who, optionalRight{verb: "patch", resource: "pods", check: "kube-rbac/pods:patch (pod deletion cost)",
		denied:  "which --pod-deletion-cost-on-unneeded-nodes needs: no pod of an unneeded node gets its deletion cost, and scale-down evicts as without the flag",
		fix:     "grant patch on pods (the chart does with the flag in extraArgs), or drop --pod-deletion-cost-on-unneeded-nodes (docs/node-removal.md)",
		allowed: "to set the deletion cost of the pods of unneeded nodes"})
}

// optionalRight is a cluster-wide right deploy/ does not grant, that a
// feature that is on needs; the words say what is lost without it.
type optionalRight struct {
	verb, resource, check string
	denied, fix, allowed  string
}

// checkOptionalRight asks, by a SelfSubjectAccessReview, whether who holds
// r: a warning when not, since the autoscaler runs without it.
func checkOptionalRight(ctx context.Context, kube kubernetes.Interface, who string, r optionalRight) Report {
	ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: r.verb, Resource: r.resource}}}
	got, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
	switch {
	case err != nil:
		return Report{{Check: r.check, Verdict: Warn, Detail: fmt.Sprintf("cannot ask whether %s may %s %s: %v", who, r.verb, r.resource, err)}}
	case !got.Status.Allowed:
		return Report{{Check: r.check, Verdict: Warn, Detail: fmt.Sprintf("%s may not %s %s cluster-wide, %s", who, r.verb, r.resource, r.denied), Fix: r.fix}}
	}
	return Report{{Check: r.check, Verdict: OK, Detail: fmt.Sprintf("%s may %s %s %s", who, r.verb, r.resource, r.allowed)}}
}
