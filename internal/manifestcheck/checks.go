package manifestcheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Bundle is one installation's objects, by role. Both deploy/ and the Helm
// chart produce exactly one of each.
type Bundle struct {
	ServiceAccount     *corev1.ServiceAccount
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	Role               *rbacv1.Role
	RoleBinding        *rbacv1.RoleBinding
	CloudConfig        *corev1.Secret // the Secret holding cloud.json
	Deployment         *appsv1.Deployment
	// PodDisruptionBudget of the autoscaler's pods; optional here (the
	// chart can leave it out), required by Check.
	PodDisruptionBudget *policyv1.PodDisruptionBudget
	Others              []runtime.Object
}

// NewBundle sorts objs into a Bundle; two objects of a kind it expects once
// (other than Secrets not holding cloud.json) are an error.
func NewBundle(objs []runtime.Object) (*Bundle, error) {
	b := &Bundle{}
	set := func(have bool, kind string) error {
		if have {
			return fmt.Errorf("more than one %s", kind)
		}
		return nil
	}
	for _, o := range objs {
		var err error
		switch v := o.(type) {
		case *corev1.ServiceAccount:
			err = set(b.ServiceAccount != nil, "ServiceAccount")
			b.ServiceAccount = v
		case *rbacv1.ClusterRole:
			err = set(b.ClusterRole != nil, "ClusterRole")
			b.ClusterRole = v
		case *rbacv1.ClusterRoleBinding:
			err = set(b.ClusterRoleBinding != nil, "ClusterRoleBinding")
			b.ClusterRoleBinding = v
		case *rbacv1.Role:
			err = set(b.Role != nil, "Role")
			b.Role = v
		case *rbacv1.RoleBinding:
			err = set(b.RoleBinding != nil, "RoleBinding")
			b.RoleBinding = v
		case *corev1.Secret:
			if _, ok := secretValue(v, "cloud.json"); ok {
				err = set(b.CloudConfig != nil, "cloud config Secret")
				b.CloudConfig = v
			} else {
				b.Others = append(b.Others, o)
			}
		case *appsv1.Deployment:
			err = set(b.Deployment != nil, "Deployment")
			b.Deployment = v
		case *policyv1.PodDisruptionBudget:
			err = set(b.PodDisruptionBudget != nil, "PodDisruptionBudget")
			b.PodDisruptionBudget = v
		default:
			b.Others = append(b.Others, o)
		}
		if err != nil {
			return nil, err
		}
	}
	var missing []string
	if b.ServiceAccount == nil {
		missing = append(missing, "ServiceAccount")
	}
	if b.ClusterRole == nil || b.ClusterRoleBinding == nil || b.Role == nil || b.RoleBinding == nil {
		missing = append(missing, "RBAC (ClusterRole, ClusterRoleBinding, Role, RoleBinding)")
	}
	if b.CloudConfig == nil {
		missing = append(missing, "cloud config Secret")
	}
	if b.Deployment == nil {
		missing = append(missing, "Deployment")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return b, nil
}

func secretValue(s *corev1.Secret, key string) (string, bool) {
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	if v, ok := s.Data[key]; ok {
		return string(v), true
	}
	return "", false
}

// CloudConfig is the part of cloud.json the checks read.
type CloudConfig struct {
	ClusterID string `json:"cluster_id"`
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
	URL       string `json:"url,omitempty"`
	// NodePoolSelection is "auto_scale" (also when empty) or "tags".
	NodePoolSelection string `json:"node_pool_selection,omitempty"`
	// Autoprovisioning is the section --node-autoprovisioning-enabled needs.
	Autoprovisioning *Autoprovisioning `json:"autoprovisioning,omitempty"`
	// PriceOverrides are hourly prices in USD by size slug.
	PriceOverrides map[string]float64 `json:"price_overrides,omitempty"`
	// MaxNodeProvisionTimeBySize are provision times (Go durations) by size slug.
	MaxNodeProvisionTimeBySize map[string]string `json:"max_node_provision_time_by_size,omitempty"`
}

// Autoprovisioning is cloud.json's autoprovisioning section.
type Autoprovisioning struct {
	Sizes           []string `json:"sizes"`
	MaxNodesPerPool *int     `json:"max_nodes_per_pool,omitempty"`
	NamePrefix      string   `json:"name_prefix,omitempty"`
	TaintKeys       []string `json:"taint_keys,omitempty"`
	// MaxHourlyCostPerPool is each created pool's hourly limit in USD.
	MaxHourlyCostPerPool *float64 `json:"max_hourly_cost_per_pool,omitempty"`
	// SizePreference is the ordered list of sizes pools are created with.
	SizePreference []string `json:"size_preference,omitempty"`
}

// ParseCloudConfig decodes the cloud.json held by the cloud config Secret.
func (b *Bundle) ParseCloudConfig() (CloudConfig, error) {
	raw, _ := secretValue(b.CloudConfig, "cloud.json")
	var cc CloudConfig
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cc); err != nil {
		return cc, fmt.Errorf("cloud.json: %w", err)
	}
	return cc, nil
}

// Container returns the autoscaler container (the first one).
func (b *Bundle) Container() *corev1.Container {
	if len(b.Deployment.Spec.Template.Spec.Containers) == 0 {
		return nil
	}
	return &b.Deployment.Spec.Template.Spec.Containers[0]
}

// boolFlags are upstream 1.36.1's boolean flags (name and type from
// shared/reference/upstream-1.36.1-flags.tsv): they take no separate value,
// so a bare --name means true and the next argument is not theirs.
var boolFlags = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range []string{
		"add-dir-header", "alsologtostderr", "async-node-groups", "aws-use-static-instance-list",
		"balance-similar-node-groups", "bulk-mig-instances-listing-enabled",
		"capacity-buffer-controller-enabled", "capacity-buffer-pod-dry-run-enabled",
		"capacity-buffer-pod-injection-enabled", "capacity-quotas-enabled",
		"check-capacity-batch-processing", "clusterapi-cloud-config-authoritative",
		"cordon-node-before-terminating", "daemonset-eviction-for-empty-nodes",
		"daemonset-eviction-for-occupied-nodes", "debugging-snapshot-enabled",
		"dynamic-node-delete-delay-after-taint-enabled", "emit-per-nodegroup-metrics",
		"enable-csi-node-aware-scheduling", "enable-dynamic-resource-allocation",
		"enable-proactive-scaleup", "enable-provisioning-requests", "enforce-node-group-min-size",
		"fastpath-binpacking-enabled", "force-delete-failed-nodes",
		"force-delete-unregistered-nodes", "force-ds", "frequent-loops-enabled",
		"ignore-daemonsets-utilization", "ignore-mirror-pods-utilization", "leader-elect",
		"legacy-stderr-threshold-behavior", "log-json-split-stream", "log-text-split-stream",
		"logtostderr", "max-node-skip-eval-time-tracker-enabled",
		"node-removal-latency-tracking-enabled", "one-output", "parallel-scale-up", "profiling",
		"record-duplicated-events", "regional", "salvo-scale-up", "scale-down-delay-type-local",
		"scale-down-enabled", "scale-down-unready-enabled", "scale-from-unschedulable",
		"scale-up-from-zero", "scaleup-simulation-for-skipped-node-groups-enabled", "skip-headers",
		"skip-log-headers", "skip-nodes-with-custom-controller-pods",
		"skip-nodes-with-local-storage", "skip-nodes-with-system-pods", "write-status-configmap",
	} {
		m[n] = true
	}
	return m
}()

// Flags returns the container's flags as the binary reads them: --name=value
// or -name=value, --name value for flags that are not boolean, a bare boolean
// --name meaning true; "_" and "-" in a name are the same flag (upstream's
// normalisation), and when a flag is repeated the last one wins. Arguments
// after "--", and the image command itself, are not flags.
func (b *Bundle) Flags() map[string]string {
	c := b.Container()
	if c == nil {
		return nil
	}
	args := slices.Concat(c.Command, c.Args)
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		name = strings.ReplaceAll(name, "_", "-")
		if !hasValue {
			if boolFlags[name] || i+1 >= len(args) {
				value = "true"
			} else {
				i++
				value = args[i]
			}
		}
		out[name] = value
	}
	return out
}

// Flag returns the value the binary takes for --name (see Flags).
func (b *Bundle) Flag(name string) (string, bool) {
	v, ok := b.Flags()[strings.ReplaceAll(name, "_", "-")]
	return v, ok
}

// MountedFile resolves a file path inside the container to the Secret key
// that provides it, following the container's volume mounts.
func (b *Bundle) MountedFile(file string) (secretName, key string, readOnly bool, err error) {
	c := b.Container()
	spec := b.Deployment.Spec.Template.Spec
	for _, m := range c.VolumeMounts {
		dir := path.Clean(m.MountPath)
		rel, ok := strings.CutPrefix(path.Clean(file), dir+"/")
		if !ok || m.SubPath != "" {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rel, m.ReadOnly, nil
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return v.Secret.SecretName, it.Key, m.ReadOnly, nil
				}
			}
			return "", "", false, fmt.Errorf("%s: volume %s has no item with path %s", file, v.Name, rel)
		}
	}
	return "", "", false, fmt.Errorf("%s is not provided by any Secret volume mount", file)
}

// Check returns every safety property the bundle breaks, concern by concern.
func (b *Bundle) Check() []error {
	if b.Container() == nil {
		return []error{fmt.Errorf("deployment has no container")}
	}
	var errs []error
	for _, check := range []func() []error{
		b.checkFlags,
		b.checkSecretMounts,
		b.checkPodSecurity,
		b.checkResources,
		b.checkProbes,
		b.checkShutdown,
		b.checkSpread,
		b.checkPodDisruptionBudget,
		b.checkBindings,
		b.checkRBAC,
	} {
		errs = append(errs, check()...)
	}
	return errs
}

// findings collects the properties one check finds broken.
type findings []error

func (f *findings) fail(format string, args ...interface{}) {
	*f = append(*f, fmt.Errorf(format, args...))
}

// checkFlags checks the flags the autoscaler needs to run as intended
// against the Deployment they run in.
func (b *Bundle) checkFlags() []error {
	var f findings
	dep := b.Deployment
	if v, _ := b.Flag("cloud-provider"); v != "digitalocean" {
		f.fail("--cloud-provider=%q, want digitalocean", v)
	}
	if v, _ := b.Flag("namespace"); v != dep.Namespace {
		f.fail("--namespace=%q, but the Deployment runs in %q (status ConfigMap and Lease live there)", v, dep.Namespace)
	}
	if v, _ := b.Flag("leader-elect"); v != "true" && (dep.Spec.Replicas == nil || *dep.Spec.Replicas > 1) {
		f.fail("more than one replica without --leader-elect=true: both would autoscale")
	}
	return f
}

// checkSecretMounts checks that the cloud config and the token come from
// read-only Secret mounts that match what --cloud-config and cloud.json
// name, and that no mount is writable.
func (b *Bundle) checkSecretMounts() []error {
	var f findings
	cloudConfigPath, ok := b.Flag("cloud-config")
	if !ok {
		f.fail("no --cloud-config flag")
	} else if name, key, ro, err := b.MountedFile(cloudConfigPath); err != nil {
		f.fail("cloud config: %v", err)
	} else {
		if name != b.CloudConfig.Name || key != "cloud.json" {
			f.fail("--cloud-config=%s comes from Secret %s key %s, want %s key cloud.json", cloudConfigPath, name, key, b.CloudConfig.Name)
		}
		if !ro {
			f.fail("cloud config mount is not read-only")
		}
	}
	cc, err := b.ParseCloudConfig()
	if err != nil {
		f.fail("%v", err)
	} else {
		if cc.Token != "" {
			f.fail("cloud.json holds an inline token; use token_file and a separate Secret")
		}
		if cc.ClusterID == "" {
			f.fail("cloud.json has no cluster_id")
		}
		// Next to DOKS's managed autoscaler only tags mode gives every pool
		// a single autoscaler (kubernetes/autoscaler#3556).
		if cc.NodePoolSelection != "tags" {
			f.fail("cloud.json node_pool_selection %q: want \"tags\", so that pools DOKS's managed autoscaler scales (auto_scale on) are left to it", cc.NodePoolSelection)
		}
		if cc.TokenFile == "" {
			f.fail("cloud.json has no token_file")
		} else if name, key, ro, err := b.MountedFile(cc.TokenFile); err != nil {
			f.fail("token_file: %v", err)
		} else {
			if name == b.CloudConfig.Name {
				f.fail("token_file %s points into the cloud config Secret", cc.TokenFile)
			}
			if key == "" || !ro {
				f.fail("token_file %s: key %q read-only %v", cc.TokenFile, key, ro)
			}
		}
	}
	for _, m := range b.Container().VolumeMounts {
		if !m.ReadOnly {
			f.fail("volume mount %s at %s is writable", m.Name, m.MountPath)
		}
	}
	return f
}

// checkPodSecurity checks for a hardened pod (non-root uid 65532, read-only
// root filesystem, no privilege or capabilities, RuntimeDefault seccomp, no
// host namespaces) at system-cluster-critical priority. Container settings
// win over the pod's, as in the kubelet.
func (b *Bundle) checkPodSecurity() []error {
	var f findings
	spec := b.Deployment.Spec.Template.Spec
	psc := spec.SecurityContext
	csc := b.Container().SecurityContext
	if csc == nil {
		f.fail("container has no securityContext")
		csc = &corev1.SecurityContext{}
	}
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if !boolTrue(csc.RunAsNonRoot) && !boolTrue(psc.RunAsNonRoot) {
		f.fail("runAsNonRoot not set")
	}
	uid := csc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	if uid == nil || *uid != 65532 {
		f.fail("runAsUser = %v, want 65532", uid)
	}
	if !boolTrue(csc.ReadOnlyRootFilesystem) {
		f.fail("readOnlyRootFilesystem not set")
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		f.fail("allowPrivilegeEscalation not false")
	}
	if boolTrue(csc.Privileged) {
		f.fail("privileged container")
	}
	if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) > 0 {
		f.fail("capabilities: want drop [ALL] and nothing added, got %+v", csc.Capabilities)
	}
	seccomp := csc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		f.fail("seccompProfile is not RuntimeDefault")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		f.fail("pod uses host namespaces")
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		f.fail("priorityClassName = %q, want system-cluster-critical", spec.PriorityClassName)
	}
	return f
}

// checkResources checks for requests, so the pod is scheduled with room, and
// a memory limit, so a leak is restarted instead of starving the node.
func (b *Bundle) checkResources() []error {
	var f findings
	r := b.Container().Resources
	if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() {
		f.fail("cpu/memory requests not set")
	}
	if r.Limits.Memory().IsZero() {
		f.fail("memory limit not set")
	} else if r.Limits.Memory().Cmp(*r.Requests.Memory()) < 0 {
		f.fail("memory limit below request")
	}
	return f
}

// metricsPort is the port of --address (the binary's default 8085), where
// /metrics and /health-check are served.
func (b *Bundle) metricsPort() int32 {
	port := int32(8085)
	if addr, ok := b.Flag("address"); ok {
		if _, p, found := strings.Cut(addr, ":"); found {
			var n int32
			if _, err := fmt.Sscan(p, &n); err == nil {
				port = n
			}
		}
	}
	return port
}

// checkProbes checks for liveness and readiness probes on /health-check at
// the --address port, which the container declares. Readiness matters too: a
// pod whose HTTP server does not answer leaves the metrics Service.
func (b *Bundle) checkProbes() []error {
	var f findings
	c := b.Container()
	port := b.metricsPort()
	if lp := c.LivenessProbe; lp == nil || lp.HTTPGet == nil {
		f.fail("no HTTP livenessProbe")
	} else {
		if lp.HTTPGet.Path != "/health-check" {
			f.fail("livenessProbe path %q, want /health-check", lp.HTTPGet.Path)
		}
		if got := resolvePort(c, lp.HTTPGet.Port); got != port {
			f.fail("livenessProbe port %d, want %d", got, port)
		}
	}
	if !hasContainerPort(c, port) {
		f.fail("no containerPort %d for metrics", port)
	}
	if rp := c.ReadinessProbe; rp == nil || rp.HTTPGet == nil {
		f.fail("no HTTP readinessProbe")
	} else if rp.HTTPGet.Path != "/health-check" || resolvePort(c, rp.HTTPGet.Port) != port {
		f.fail("readinessProbe %s on port %d, want /health-check on %d", rp.HTTPGet.Path, resolvePort(c, rp.HTTPGet.Port), port)
	}
	return f
}

// checkShutdown checks that the pod is given the time the binary's exit
// takes; otherwise SIGKILL cuts a node removal short and leaves the Lease to
// expire.
func (b *Bundle) checkShutdown() []error {
	var f findings
	if g := b.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < MinGracePeriodSeconds {
		f.fail("terminationGracePeriodSeconds %v is shorter than the autoscaler's shutdown (%d s: up to %d s documented waits, then the loop's last call and the Lease release)",
			printInt64(g), MinGracePeriodSeconds, ExitWaitSeconds)
	}
	return f
}

// checkSpread checks that replicas run on different nodes, so that one
// node's loss leaves a standby.
func (b *Bundle) checkSpread() []error {
	var f findings
	dep := b.Deployment
	if dep.Spec.Replicas != nil && *dep.Spec.Replicas > 1 && !spreadsByHostname(dep.Spec.Template.Spec) {
		f.fail("%d replicas without hostname topology spread or anti-affinity", *dep.Spec.Replicas)
	}
	return f
}

// checkBindings checks that the pod runs as the bundle's ServiceAccount and
// that the two bindings give their roles to that ServiceAccount only, in the
// Deployment's namespace.
func (b *Bundle) checkBindings() []error {
	var f findings
	sa, ns := b.ServiceAccount, b.Deployment.Namespace
	if name := b.Deployment.Spec.Template.Spec.ServiceAccountName; name != sa.Name || sa.Namespace != ns {
		f.fail("pod runs as %s but ServiceAccount is %s/%s", name, sa.Namespace, sa.Name)
	}
	checkSubjects := func(what string, subjects []rbacv1.Subject) {
		if len(subjects) != 1 || subjects[0].Kind != rbacv1.ServiceAccountKind || subjects[0].Name != sa.Name || subjects[0].Namespace != ns {
			f.fail("%s subjects %+v, want only ServiceAccount %s/%s", what, subjects, ns, sa.Name)
		}
	}
	checkSubjects("ClusterRoleBinding", b.ClusterRoleBinding.Subjects)
	checkSubjects("RoleBinding", b.RoleBinding.Subjects)
	if r := b.ClusterRoleBinding.RoleRef; r.Kind != "ClusterRole" || r.Name != b.ClusterRole.Name {
		f.fail("ClusterRoleBinding refers to %s %s", r.Kind, r.Name)
	}
	if r := b.RoleBinding.RoleRef; r.Kind != "Role" || r.Name != b.Role.Name {
		f.fail("RoleBinding refers to %s %s", r.Kind, r.Name)
	}
	if b.Role.Namespace != ns || b.RoleBinding.Namespace != ns {
		f.fail("Role/RoleBinding in %s/%s, want %s", b.Role.Namespace, b.RoleBinding.Namespace, ns)
	}
	return f
}

// checkRBAC checks for least privilege: no wildcards, non-resource URLs or
// Secrets; the ClusterRole writes only what clusterWriteAllowed lists, and
// the Role writes (other than create) only objects it names.
func (b *Bundle) checkRBAC() []error {
	errs := CheckRules("ClusterRole", b.ClusterRole.Rules, clusterWriteAllowed)
	return append(errs, CheckRules("Role", b.Role.Rules, nil)...)
}

// checkPodDisruptionBudget checks for a PodDisruptionBudget that lets one
// replica go. Without one, a kube-system pod keeps its node
// (--skip-nodes-with-system-pods); one that allows no disruption blocks
// every drain of the autoscaler's nodes.
func (b *Bundle) checkPodDisruptionBudget() []error {
	pdb, dep := b.PodDisruptionBudget, b.Deployment
	if pdb == nil {
		return []error{fmt.Errorf("no PodDisruptionBudget for the autoscaler's pods: nodes running them are never scaled down")}
	}
	var f findings
	if pdb.Namespace != dep.Namespace {
		f.fail("PodDisruptionBudget in namespace %q, the Deployment in %q", pdb.Namespace, dep.Namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || pdb.Spec.Selector == nil || sel.Empty() {
		f.fail("PodDisruptionBudget selector %v does not select the autoscaler's pods (%v)", pdb.Spec.Selector, err)
	} else if !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		f.fail("PodDisruptionBudget selector %s does not match the pod labels %v", sel, dep.Spec.Template.Labels)
	}
	replicas := 1
	if dep.Spec.Replicas != nil {
		replicas = int(*dep.Spec.Replicas)
	}
	switch minA, maxU := pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable; {
	case minA != nil && maxU != nil:
		f.fail("PodDisruptionBudget sets both minAvailable and maxUnavailable (the API server refuses it)")
	case minA == nil && maxU == nil:
		f.fail("PodDisruptionBudget sets neither minAvailable nor maxUnavailable")
	case maxU != nil:
		// The disruption controller rounds percentages up.
		if n, err := intstr.GetScaledValueFromIntOrPercent(maxU, replicas, true); err != nil || n < 1 {
			f.fail("PodDisruptionBudget maxUnavailable %s allows no disruption of %d replica(s) (%v)", maxU.String(), replicas, err)
		}
	default:
		if n, err := intstr.GetScaledValueFromIntOrPercent(minA, replicas, true); err != nil || n >= replicas {
			f.fail("PodDisruptionBudget minAvailable %s allows no disruption of %d replica(s) (%v)", minA.String(), replicas, err)
		}
	}
	return f
}

// ExitWaitSeconds is the shutdown the binary documents (docs/how-it-decides.md "High
// availability"; core/autoscaler.go exitWait and exitAPITimeout): after the
// loop stops, up to 20 s for node removals in flight, then up to 5 s for the
// status ConfigMap's deletion, and only then the Lease is released.
const ExitWaitSeconds = 20 + 5

// MinGracePeriodSeconds adds to it the iteration in flight when SIGTERM
// arrives (DigitalOcean calls still running 20 s after the signal are
// cancelled: core.CloudCallGrace) and the Lease release.
const MinGracePeriodSeconds = ExitWaitSeconds + 20

func printInt64(p *int64) string {
	if p == nil {
		return "unset (30)"
	}
	return fmt.Sprint(*p)
}

// clusterWriteAllowed are the only cluster-wide writes the autoscaler makes.
var clusterWriteAllowed = map[string][]string{
	"/nodes":         {"update"},
	"/pods/eviction": {"create"},
	"/events":        {"create", "patch"},
	// CapacityBuffer conditions (docs/capacity-buffers.md).
	"autoscaling.x-k8s.io/capacitybuffers/status": {"update"},
	// ProvisioningRequest conditions, and upstream's clean-up of requests
	// finished more than a week ago (docs/provisioning-requests.md).
	"autoscaling.x-k8s.io/provisioningrequests/status": {"update"},
	"autoscaling.x-k8s.io/provisioningrequests":        {"delete"},
}

var readVerbs = map[string]bool{"get": true, "list": true, "watch": true}

// CheckRules flags wildcards, Secret access and writes. Writes are allowed
// when listed in allowedWrites (group/resource → verbs) or, when allowedWrites
// is nil (namespaced Role), when limited by resourceNames — except create,
// which RBAC cannot limit by name.
func CheckRules(what string, rules []rbacv1.PolicyRule, allowedWrites map[string][]string) []error {
	var errs []error
	for i, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
			for _, v := range list {
				if v == "*" {
					errs = append(errs, fmt.Errorf("%s rule %d uses a wildcard", what, i))
				}
			}
		}
		if len(r.NonResourceURLs) > 0 {
			errs = append(errs, fmt.Errorf("%s rule %d grants non-resource URLs", what, i))
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if res == "secrets" {
					errs = append(errs, fmt.Errorf("%s grants access to secrets", what))
				}
				for _, verb := range r.Verbs {
					if readVerbs[verb] {
						continue
					}
					if allowedWrites != nil {
						if !slices.Contains(allowedWrites[g+"/"+res], verb) {
							errs = append(errs, fmt.Errorf("%s grants %s on %s/%s", what, verb, g, res))
						}
						continue
					}
					if verb != "create" && len(r.ResourceNames) == 0 {
						errs = append(errs, fmt.Errorf("%s grants %s on every %s/%s (no resourceNames)", what, verb, g, res))
					}
				}
			}
		}
	}
	return errs
}

// Allows reports whether rules grant verb on group/resource (named name, ""
// for collection requests such as list and watch).
func Allows(rules []rbacv1.PolicyRule, group, resource, verb, name string) bool {
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, group) || !slices.Contains(r.Resources, resource) || !slices.Contains(r.Verbs, verb) {
			continue
		}
		if len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// Grants flattens rules into sorted "group/resource[/name]:verb" strings, so
// that two rule sets written differently compare equal when they grant the same.
func Grants(rules []rbacv1.PolicyRule) []string {
	seen := map[string]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						key := g + "/" + res
						if n != "" {
							key += "/" + n
						}
						seen[key+":"+v] = true
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func spreadsByHostname(spec corev1.PodSpec) bool {
	for _, tsc := range spec.TopologySpreadConstraints {
		if tsc.TopologyKey == corev1.LabelHostname && tsc.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t.TopologyKey == corev1.LabelHostname {
				return true
			}
		}
	}
	return false
}

func resolvePort(c *corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

func hasContainerPort(c *corev1.Container, port int32) bool {
	return slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == port })
}

func boolTrue(b *bool) bool { return b != nil && *b }
