package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/internal/manifestcheck"
)

func mergeInto(dst, src map[string]interface{}) {
	for k, v := range src {
		if sv, ok := v.(map[string]interface{}); ok {
			if dv, ok := dst[k].(map[string]interface{}); ok {
				mergeInto(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decode turns the rendered YAML files into typed objects; Prometheus
// Operator kinds (not in client-go's scheme) come back as maps.
func decode(t *testing.T, rendered map[string]string) (typed []runtime.Object, crds []map[string]interface{}) {
	t.Helper()
	for name, text := range rendered {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range docSeparator.Split(text, -1) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: invalid YAML: %v\n%s", name, err, doc)
			}
			if tm.Kind == "" {
				continue // empty (disabled template) or comments only
			}
			if strings.HasPrefix(tm.APIVersion, "monitoring.coreos.com/") {
				m := map[string]interface{}{}
				if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatal(err)
				}
				crds = append(crds, m)
				continue
			}
			objs, err := manifestcheck.Decode([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			typed = append(typed, objs...)
		}
	}
	return typed, crds
}

func renderBundle(t *testing.T, rel release) (*manifestcheck.Bundle, []runtime.Object, []map[string]interface{}, map[string]string) {
	t.Helper()
	rendered, err := render(t, rel)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	typed, crds := decode(t, rendered)
	b, err := manifestcheck.NewBundle(typed)
	if err != nil {
		t.Fatalf("rendered chart: %v", err)
	}
	return b, typed, crds, rendered
}

func deployBundle(t *testing.T) *manifestcheck.Bundle {
	t.Helper()
	objs, err := manifestcheck.Objects()
	if err != nil {
		t.Fatal(err)
	}
	b, err := manifestcheck.NewBundle(objs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const testClusterID = "5f4a8c1e-0b3d-4e2f-9a6b-7c8d9e0f1a2b"

func withClusterID(extra map[string]interface{}) map[string]interface{} {
	v := map[string]interface{}{"cloudConfig": map[string]interface{}{"clusterID": testClusterID}}
	mergeInto(v, extra)
	return v
}

func TestChartRequiresClusterID(t *testing.T) {
	t.Parallel()
	_, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system"})
	if err == nil || !strings.Contains(err.Error(), "cloudConfig.clusterID is required") {
		t.Fatalf("rendering without a cluster ID: err = %v, want the required message", err)
	}
}

func TestChartDefaults(t *testing.T) {
	t.Parallel()
	b, typed, crds, rendered := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(nil)})
	for _, err := range b.Check() {
		t.Error(err)
	}
	if len(crds) != 0 {
		t.Errorf("Prometheus Operator objects rendered by default: %v", crds)
	}
	// As upstream's chart: a metrics Service by default.
	if svc := service(typed); svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8085 || svc.Spec.Ports[0].Name != "http" ||
		svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("metrics Service = %+v", svc)
	}

	// With release name cluster-autoscaler in kube-system the chart installs
	// what deploy/ does, object for object.
	d := deployBundle(t)
	if b.Deployment.Name != d.Deployment.Name || b.CloudConfig.Name != d.CloudConfig.Name || b.ServiceAccount.Name != d.ServiceAccount.Name ||
		b.PodDisruptionBudget.Name != d.PodDisruptionBudget.Name {
		t.Errorf("names differ from deploy/: %s %s %s %s", b.Deployment.Name, b.CloudConfig.Name, b.ServiceAccount.Name, b.PodDisruptionBudget.Name)
	}
	if *b.Deployment.Spec.Replicas != 2 {
		t.Errorf("replicas = %d", *b.Deployment.Spec.Replicas)
	}
	if got, want := b.Container().Image, "ghcr.io/doks-autoscaler/cluster-autoscaler:"+chartAppVersion(t); got != want {
		t.Errorf("image = %s, want %s (appVersion)", got, want)
	}
	if got, want := b.Container().Args, d.Container().Args; !reflect.DeepEqual(got, want) {
		t.Errorf("args:\n%v\ndeploy/ has:\n%v", got, want)
	}
	// Same pod hardening, resources, probes, grace period and volumes as deploy/.
	if !reflect.DeepEqual(b.Container().SecurityContext, d.Container().SecurityContext) ||
		!reflect.DeepEqual(b.Deployment.Spec.Template.Spec.SecurityContext, d.Deployment.Spec.Template.Spec.SecurityContext) {
		t.Error("securityContext differs from deploy/")
	}
	if !reflect.DeepEqual(b.Container().Resources, d.Container().Resources) {
		t.Errorf("resources %v differ from deploy/ %v", b.Container().Resources, d.Container().Resources)
	}
	if !reflect.DeepEqual(b.Container().LivenessProbe, d.Container().LivenessProbe) || !reflect.DeepEqual(b.Container().ReadinessProbe, d.Container().ReadinessProbe) {
		t.Error("probes differ from deploy/")
	}
	if g, dg := b.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds, d.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != *dg {
		t.Errorf("terminationGracePeriodSeconds %v, deploy/ has %d", g, *dg)
	}
	if !reflect.DeepEqual(b.Container().VolumeMounts, d.Container().VolumeMounts) ||
		!reflect.DeepEqual(b.Deployment.Spec.Template.Spec.Volumes, d.Deployment.Spec.Template.Spec.Volumes) {
		t.Error("volumes differ from deploy/")
	}
	// The env is deploy/'s: GOMEMLIMIT from the memory limit, nothing else.
	if !reflect.DeepEqual(b.Container().Env, d.Container().Env) || b.Deployment.Spec.Template.Spec.ImagePullSecrets != nil || b.Deployment.Spec.Strategy.Type != "" {
		t.Errorf("env %v (deploy/: %v), pull secrets %v, strategy %v rendered by default", b.Container().Env, d.Container().Env, b.Deployment.Spec.Template.Spec.ImagePullSecrets, b.Deployment.Spec.Strategy)
	}
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.ClusterID != testClusterID || cc.URL != "" || cc.Token != "" {
		t.Errorf("cloud.json = %+v", cc)
	}
	dcc, _ := d.ParseCloudConfig()
	if cc.TokenFile != dcc.TokenFile {
		t.Errorf("token_file %s, deploy/ has %s", cc.TokenFile, dcc.TokenFile)
	}
	if cc.NodePoolSelection != "tags" {
		t.Errorf("node_pool_selection = %q, want tags (safe next to DOKS's managed autoscaler)", cc.NodePoolSelection)
	}
	if pdb := b.PodDisruptionBudget; pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget = %+v, want maxUnavailable 1", pdb)
	}
	if !strings.Contains(rendered["NOTES.txt"], "create secret generic digitalocean-token --from-literal=access-token=") {
		t.Errorf("NOTES.txt does not say how to create the token Secret:\n%s", rendered["NOTES.txt"])
	}
	// /metrics from the leader's pod: a port-forward to the Deployment or
	// the Service may land on the standby.
	if !strings.Contains(rendered["NOTES.txt"], `port-forward "pod/$(kubectl -n kube-system get lease cluster-autoscaler`) {
		t.Errorf("NOTES.txt does not say how to reach the leader's /metrics:\n%s", rendered["NOTES.txt"])
	}
}

func service(objs []runtime.Object) *corev1.Service {
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok {
			return s
		}
	}
	return nil
}

func configMap(objs []runtime.Object, name string) *corev1.ConfigMap {
	for _, o := range objs {
		if c, ok := o.(*corev1.ConfigMap); ok && c.Name == name {
			return c
		}
	}
	return nil
}

func TestChartRBACEqualsDeploy(t *testing.T) {
	t.Parallel()
	d := deployBundle(t)
	for _, rel := range []release{
		{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(nil)},
		{name: "ca", namespace: "autoscaler", values: withClusterID(map[string]interface{}{"replicaCount": 1})},
	} {
		b, _, _, _ := renderBundle(t, rel)
		if got, want := manifestcheck.Grants(b.ClusterRole.Rules), manifestcheck.Grants(d.ClusterRole.Rules); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ClusterRole grants\n%v\ndeploy/ grants\n%v", rel.name, got, want)
		}
		if got, want := manifestcheck.Grants(b.Role.Rules), manifestcheck.Grants(d.Role.Rules); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Role grants\n%v\ndeploy/ grants\n%v", rel.name, got, want)
		}
	}
}

// upstreamValues is a values file as a user of upstream's chart writes it,
// setting every upstream value this chart takes.
const upstreamValues = `
cloudConfig:
  clusterID: 5f4a8c1e-0b3d-4e2f-9a6b-7c8d9e0f1a2b
  tokenSecretName: do-api
  tokenSecretKey: token
  url: https://api.example.test/
replicaCount: 3
image:
  tag: v1.2.3
  pullSecrets: [regcred]
rbac:
  create: true
  serviceAccount:
    create: true
    name: ca-sa
    annotations: {example.com/owner: ops}
    automountServiceAccountToken: true
podDisruptionBudget:
  maxUnavailable: 2
priorityClassName: platform-critical
extraArgs:
  v: 2
  expander: priority,least-waste
  scale-down-unneeded-time: 5m
  scale-down-utilization-threshold: 0.65
  skip-nodes-with-local-storage: false
  scale-down-enabled: null
  startup-taint_1: node.cilium.io/agent-not-ready
  startup-taint_2: example.com/booting
  status-config-map-name: ca-status
  leader-elect-resource-name: ca-lock
extraEnv:
  HTTPS_PROXY: http://proxy.internal:3128
  GOMAXPROCS: 2
extraVolumes:
  - name: ca-certs
    configMap: {name: corp-ca}
extraVolumeMounts:
  - name: ca-certs
    mountPath: /etc/ssl/certs/corp
    readOnly: true
extraVolumeSecrets:
  extra-creds:
    name: my-secret
    mountPath: /etc/extra
    items:
      - {key: a, path: b}
  plain:
    mountPath: /etc/plain
expanderPriorities:
  10: [".*"]
  50: ["^6f0c.*"]
priorityConfigMapAnnotations: {example.com/reviewed: "yes"}
updateStrategy:
  type: RollingUpdate
  rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
securityContext:
  runAsNonRoot: true
  runAsUser: 1001
  fsGroup: 1001
containerSecurityContext:
  runAsUser: 1001
  seccompProfile: null
nodeSelector: {doks.digitalocean.com/node-pool: system}
tolerations:
  - {key: dedicated, operator: Equal, value: system, effect: NoSchedule}
additionalLabels: {example.com/team: platform}
podAnnotations: {example.com/scrape: "yes"}
podLabels: {example.com/tier: infra}
service:
  create: true
  annotations: {example.com/svc: "yes"}
  labels: {example.com/svc-label: x}
  servicePort: 9999
  portName: metrics-port
  type: ClusterIP
serviceMonitor:
  enabled: true
  interval: 15s
  namespace: monitoring
  selector: {release: prom}
  path: /metrics
  annotations: {example.com/sm: "yes"}
  relabelings:
    - {sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: node}
prometheusRule:
  enabled: true
  additionalLabels: {release: prom}
  namespace: monitoring
  interval: 1m
  rules:
    - alert: ClusterAutoscalerUnsafe
      expr: cluster_autoscaler_cluster_safe_to_autoscale == 0
      for: 15m
      labels: {release: "{{ .Release.Name }}"}
`

func upstreamValuesMap(t *testing.T) map[string]interface{} {
	t.Helper()
	v := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(upstreamValues), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Every upstream chart value the README's table maps to itself has upstream's
// meaning here.
func TestChartTakesUpstreamValues(t *testing.T) {
	t.Parallel()
	b, typed, crds, _ := renderBundle(t, release{name: "ca", namespace: "autoscaler", values: upstreamValuesMap(t)})
	dep, spec, c := b.Deployment, b.Deployment.Spec.Template.Spec, b.Container()
	if dep.Name != "ca-cluster-autoscaler" || dep.Namespace != "autoscaler" {
		t.Errorf("deployment %s/%s", dep.Namespace, dep.Name)
	}
	if *dep.Spec.Replicas != 3 {
		t.Errorf("replicaCount: replicas = %d", *dep.Spec.Replicas)
	}
	if c.Image != "ghcr.io/doks-autoscaler/cluster-autoscaler:v1.2.3" {
		t.Errorf("image = %s", c.Image)
	}
	if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "regcred" {
		t.Errorf("image.pullSecrets: %v", spec.ImagePullSecrets)
	}
	if spec.ServiceAccountName != "ca-sa" || b.ServiceAccount.Name != "ca-sa" || b.ServiceAccount.Annotations["example.com/owner"] != "ops" ||
		b.ServiceAccount.AutomountServiceAccountToken == nil || !*b.ServiceAccount.AutomountServiceAccountToken {
		t.Errorf("rbac.serviceAccount: pod runs as %s, ServiceAccount %+v", spec.ServiceAccountName, b.ServiceAccount)
	}
	for _, subjects := range [][]rbacv1.Subject{b.ClusterRoleBinding.Subjects, b.RoleBinding.Subjects} {
		if len(subjects) != 1 || subjects[0].Name != "ca-sa" || subjects[0].Namespace != "autoscaler" {
			t.Errorf("bindings' subjects %v, want ca-sa in autoscaler", subjects)
		}
	}
	if pdb := b.PodDisruptionBudget; pdb == nil || pdb.Spec.MaxUnavailable.String() != "2" {
		t.Errorf("podDisruptionBudget: %+v", pdb)
	}
	if spec.PriorityClassName != "platform-critical" {
		t.Errorf("priorityClassName = %q", spec.PriorityClassName)
	}
	for flag, want := range map[string]string{
		"cloud-provider": "digitalocean", "namespace": "autoscaler", "leader-elect": "true", "v": "2",
		"expander": "priority,least-waste", "scale-down-unneeded-time": "5m", "scale-down-utilization-threshold": "0.65",
		"skip-nodes-with-local-storage": "false", "scale-down-enabled": "true", "status-config-map-name": "ca-status",
		"leader-elect-resource-name": "ca-lock", "startup-taint": "example.com/booting",
	} {
		if got, ok := b.Flag(flag); !ok || got != want {
			t.Errorf("extraArgs: --%s=%q (present %v), want %q", flag, got, ok, want)
		}
	}
	taints := 0
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--startup-taint=") {
			taints++
		}
	}
	if taints != 2 {
		t.Errorf("extraArgs startup-taint_1/_2: %d --startup-taint args in %v, want 2", taints, c.Args)
	}
	// RBAC follows the renamed status ConfigMap and Lease.
	if !manifestcheck.Allows(b.Role.Rules, "", "configmaps", "update", "ca-status") ||
		manifestcheck.Allows(b.Role.Rules, "", "configmaps", "update", "cluster-autoscaler-status") {
		t.Error("Role does not follow status-config-map-name")
	}
	if !manifestcheck.Allows(b.Role.Rules, "coordination.k8s.io", "leases", "update", "ca-lock") {
		t.Error("Role does not follow leader-elect-resource-name")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil { // the chart's own GOMEMLIMIT aside
			env[e.Name] = e.Value
		}
	}
	if !reflect.DeepEqual(env, map[string]string{"HTTPS_PROXY": "http://proxy.internal:3128", "GOMAXPROCS": "2"}) {
		t.Errorf("extraEnv: %v", c.Env)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	if m, v := mounts["ca-certs"], vols["ca-certs"]; m.MountPath != "/etc/ssl/certs/corp" || v.ConfigMap == nil || v.ConfigMap.Name != "corp-ca" {
		t.Errorf("extraVolumes/extraVolumeMounts: mount %+v volume %+v", m, v)
	}
	if m, v := mounts["extra-creds"], vols["extra-creds"]; m.MountPath != "/etc/extra" || !m.ReadOnly || v.Secret == nil ||
		v.Secret.SecretName != "my-secret" || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "a" || v.Secret.Items[0].Path != "b" {
		t.Errorf("extraVolumeSecrets.extra-creds: mount %+v volume %+v", m, v.Secret)
	}
	if m, v := mounts["plain"], vols["plain"]; m.MountPath != "/etc/plain" || v.Secret == nil || v.Secret.SecretName != "plain" {
		t.Errorf("extraVolumeSecrets.plain (Secret named after the volume): mount %+v volume %+v", m, v.Secret)
	}
	cm := configMap(typed, "cluster-autoscaler-priority-expander")
	if cm == nil || cm.Namespace != "autoscaler" || cm.Annotations["example.com/reviewed"] != "yes" {
		t.Fatalf("expanderPriorities: ConfigMap %+v", cm)
	}
	var prio map[int][]string
	if err := yaml.Unmarshal([]byte(cm.Data["priorities"]), &prio); err != nil || !reflect.DeepEqual(prio, map[int][]string{10: {".*"}, 50: {"^6f0c.*"}}) {
		t.Errorf("expanderPriorities: priorities %q (%v)", cm.Data["priorities"], err)
	}
	if dep.Spec.Strategy.Type != "RollingUpdate" || dep.Spec.Strategy.RollingUpdate.MaxSurge.String() != "1" || dep.Spec.Strategy.RollingUpdate.MaxUnavailable.String() != "0" {
		t.Errorf("updateStrategy: %+v", dep.Spec.Strategy)
	}
	if psc := spec.SecurityContext; psc == nil || *psc.RunAsUser != 1001 || *psc.FSGroup != 1001 {
		t.Errorf("securityContext: %+v", psc)
	}
	// Helm merges a values map over the chart's: the hardening stays unless
	// a key is given (runAsUser) or removed with null (seccompProfile).
	if csc := c.SecurityContext; csc == nil || !*csc.ReadOnlyRootFilesystem || *csc.RunAsUser != 1001 || csc.SeccompProfile != nil {
		t.Errorf("containerSecurityContext: %+v", csc)
	}
	if spec.NodeSelector["doks.digitalocean.com/node-pool"] != "system" {
		t.Errorf("nodeSelector = %v", spec.NodeSelector)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "dedicated" || spec.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("tolerations = %+v", spec.Tolerations)
	}
	// additionalLabels on every object and the pods; podLabels and
	// podAnnotations on the pods.
	for _, o := range typed {
		m, _ := o.(metav1.Object)
		if m.GetLabels()["example.com/team"] != "platform" {
			t.Errorf("additionalLabels missing on %T %s: %v", o, m.GetName(), m.GetLabels())
		}
	}
	pod := dep.Spec.Template
	if pod.Labels["example.com/team"] != "platform" || pod.Labels["example.com/tier"] != "infra" || pod.Annotations["example.com/scrape"] != "yes" {
		t.Errorf("pod labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if _, ok := dep.Spec.Selector.MatchLabels["example.com/tier"]; ok {
		t.Error("podLabels in the Deployment's selector: changing them would need the Deployment recreated")
	}
	svc := service(typed)
	if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9999 || svc.Spec.Ports[0].Name != "metrics-port" ||
		svc.Annotations["example.com/svc"] != "yes" || svc.Labels["example.com/svc-label"] != "x" {
		t.Fatalf("service.*: %+v", svc)
	}
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the pods", k, v)
		}
	}
	kinds := map[string]map[string]interface{}{}
	for _, o := range crds {
		kinds[o["kind"].(string)] = o
	}
	sm := kinds["ServiceMonitor"]
	if sm == nil {
		t.Fatalf("serviceMonitor.enabled: no ServiceMonitor in %v", crds)
	}
	smMeta := sm["metadata"].(map[string]interface{})
	if smMeta["namespace"] != "monitoring" || smMeta["labels"].(map[string]interface{})["release"] != "prom" ||
		smMeta["annotations"].(map[string]interface{})["example.com/sm"] != "yes" {
		t.Errorf("serviceMonitor namespace/selector/annotations: %v", smMeta)
	}
	smSpec := sm["spec"].(map[string]interface{})
	ep := smSpec["endpoints"].([]interface{})[0].(map[string]interface{})
	if ep["port"] != "metrics-port" || ep["interval"] != "15s" || ep["path"] != "/metrics" || len(ep["relabelings"].([]interface{})) != 1 {
		t.Errorf("ServiceMonitor endpoint = %v", ep)
	}
	if ns := smSpec["namespaceSelector"].(map[string]interface{})["matchNames"].([]interface{}); len(ns) != 1 || ns[0] != "autoscaler" {
		t.Errorf("ServiceMonitor namespaceSelector %v, want the release namespace", ns)
	}
	pr := kinds["PrometheusRule"]
	if pr == nil {
		t.Fatalf("prometheusRule.enabled: no PrometheusRule in %v", crds)
	}
	prMeta := pr["metadata"].(map[string]interface{})
	group := pr["spec"].(map[string]interface{})["groups"].([]interface{})[0].(map[string]interface{})
	// The user's rules follow the chart's alerts.
	rules := group["rules"].([]interface{})
	rule := rules[len(rules)-1].(map[string]interface{})
	if prMeta["namespace"] != "monitoring" || prMeta["labels"].(map[string]interface{})["release"] != "prom" || group["interval"] != "1m" ||
		rule["alert"] != "ClusterAutoscalerUnsafe" || rule["labels"].(map[string]interface{})["release"] != "ca" {
		t.Errorf("prometheusRule (rules through tpl): %v", pr)
	}
	// The token comes from the renamed Secret and key, where cloud.json says.
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.URL != "https://api.example.test/" {
		t.Errorf("url = %q", cc.URL)
	}
	if name, key, _, err := b.MountedFile(cc.TokenFile); err != nil || name != "do-api" || key != "token" {
		t.Errorf("token_file %s → %s/%s (%v), want do-api/token", cc.TokenFile, name, key, err)
	}
}

func TestChartNameOverrides(t *testing.T) {
	t.Parallel()
	b, typed, _, _ := renderBundle(t, release{name: "ops", namespace: "kube-system", values: withClusterID(map[string]interface{}{"nameOverride": "autoscaler"})})
	if b.Deployment.Name != "ops-autoscaler" || b.Deployment.Spec.Template.Labels["app.kubernetes.io/name"] != "autoscaler" || b.CloudConfig.Name != "ops-autoscaler-cloud-config" {
		t.Errorf("nameOverride: deployment %s, name label %q, cloud config %s", b.Deployment.Name, b.Deployment.Spec.Template.Labels["app.kubernetes.io/name"], b.CloudConfig.Name)
	}
	if !reflect.DeepEqual(b.PodDisruptionBudget.Spec.Selector.MatchLabels, b.Deployment.Spec.Selector.MatchLabels) ||
		!reflect.DeepEqual(service(typed).Spec.Selector, b.Deployment.Spec.Selector.MatchLabels) {
		t.Error("nameOverride: selectors no longer match the pods")
	}
	b, _, _, _ = renderBundle(t, release{name: "ops", namespace: "kube-system", values: withClusterID(map[string]interface{}{"fullnameOverride": "ca"})})
	if b.Deployment.Name != "ca" || b.ServiceAccount.Name != "ca" || b.ClusterRole.Name != "ca" || b.CloudConfig.Name != "ca-cloud-config" {
		t.Errorf("fullnameOverride: deployment %s, ServiceAccount %s, ClusterRole %s, cloud config %s", b.Deployment.Name, b.ServiceAccount.Name, b.ClusterRole.Name, b.CloudConfig.Name)
	}
}

// expanderPriorities renders the ConfigMap only for the priority expander,
// and takes upstream's string form too.
func TestChartExpanderPriorities(t *testing.T) {
	t.Parallel()
	_, typed, _, _ := renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(map[string]interface{}{
		"expanderPriorities": map[string]interface{}{"10": []interface{}{".*"}}})})
	if cm := configMap(typed, "cluster-autoscaler-priority-expander"); cm != nil {
		t.Errorf("priority ConfigMap rendered without extraArgs.expander=priority: %+v", cm)
	}
	_, typed, _, _ = renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(map[string]interface{}{
		"extraArgs":          map[string]interface{}{"expander": "priority"},
		"expanderPriorities": "10:\n  - .*\n20:\n  - ^gpu-.*\n"})})
	cm := configMap(typed, "cluster-autoscaler-priority-expander")
	if cm == nil || cm.Data["priorities"] != "10:\n  - .*\n20:\n  - ^gpu-.*" {
		t.Errorf("string expanderPriorities: %+v", cm)
	}
}

// Values of the chart's 0.1 names and upstream values this chart cannot
// honour are refused by name, never silently ignored.
func TestChartRefusesRenamedAndForeignValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		values  map[string]interface{}
		wantErr string
	}{
		{map[string]interface{}{"replicas": 3}, "value replicas is now replicaCount"},
		{map[string]interface{}{"imagePullSecrets": []interface{}{map[string]interface{}{"name": "x"}}}, "value imagePullSecrets is now image.pullSecrets"},
		{map[string]interface{}{"serviceAccount": map[string]interface{}{"name": "x"}}, "value serviceAccount is now rbac.serviceAccount"},
		{map[string]interface{}{"scanInterval": "30s"}, "value scanInterval is now extraArgs.scan-interval"},
		{map[string]interface{}{"expander": "price"}, "value expander is now extraArgs.expander"},
		{map[string]interface{}{"v": 2}, "value v is now extraArgs.v"},
		{map[string]interface{}{"service": map[string]interface{}{"enabled": true}}, "value service.enabled is now service.create"},
		{map[string]interface{}{"cloudProvider": "aws"}, `cloudProvider "aws": this chart runs only the digitalocean provider`},
		{map[string]interface{}{"autoscalingGroups": []interface{}{map[string]interface{}{"name": "a", "minSize": 1, "maxSize": 3}}}, "autoscalingGroups: DOKS node pools are found through the DigitalOcean API"},
		{map[string]interface{}{"autoDiscovery": map[string]interface{}{"clusterName": "c"}}, "autoDiscovery (clusterName): DOKS node pools"},
		{map[string]interface{}{"autoDiscovery": map[string]interface{}{"tags": []interface{}{"k8s.io/cluster-autoscaler/enabled"}}}, "autoDiscovery (tags): DOKS node pools"},
		{map[string]interface{}{"kwokConfigMapName": "kwok-config"}, "kwokConfigMapName is an upstream chart value for another cloud provider"},
		{map[string]interface{}{"clusterAPIMode": "kubeconfig-incluster"}, "clusterAPIMode is an upstream chart value for another cloud provider"},
		{map[string]interface{}{"serviceMonitor": map[string]interface{}{"enabled": true}, "service": map[string]interface{}{"create": false}}, "serviceMonitor.enabled needs service.create"},
		// Upstream values this chart does not implement.
		{map[string]interface{}{"customArgs": []interface{}{"--scale-down-delay-after-add=5m"}}, "customArgs is an upstream chart value this chart does not support: put each flag in extraArgs"},
		{map[string]interface{}{"extraObjects": []interface{}{map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}}, "extraObjects is an upstream chart value this chart does not support"},
		{map[string]interface{}{"envFromConfigMap": "ca-env"}, "envFromConfigMap is an upstream chart value this chart does not support"},
		{map[string]interface{}{"envFromSecret": "ca-env"}, "envFromSecret is an upstream chart value this chart does not support"},
		{map[string]interface{}{"extraEnvSecrets": map[string]interface{}{"X": map[string]interface{}{"name": "s", "key": "k"}}}, "extraEnvSecrets is an upstream chart value"},
		{map[string]interface{}{"dnsConfig": map[string]interface{}{"nameservers": []interface{}{"1.2.3.4"}}}, "dnsConfig is an upstream chart value this chart does not support"},
		{map[string]interface{}{"dnsPolicy": "Default"}, "dnsPolicy Default: an upstream chart value this chart does not support"},
		{map[string]interface{}{"hostNetwork": true}, "hostNetwork true: an upstream chart value"},
		{map[string]interface{}{"revisionHistoryLimit": 3}, "revisionHistoryLimit 3: an upstream chart value"},
		{map[string]interface{}{"initContainers": []interface{}{map[string]interface{}{"name": "x"}}}, "initContainers is an upstream chart value"},
		{map[string]interface{}{"deployment": map[string]interface{}{"annotations": map[string]interface{}{"a": "b"}}}, "deployment is an upstream chart value"},
		{map[string]interface{}{"vpa": map[string]interface{}{"enabled": true}}, "vpa is an upstream chart value"},
		{map[string]interface{}{"awsRegion": "us-east-1"}, "awsRegion is an upstream chart value for another cloud provider"},
		{map[string]interface{}{"rbac": map[string]interface{}{"additionalRules": []interface{}{map[string]interface{}{"verbs": []interface{}{"get"}}}}}, "rbac.additionalRules is an upstream chart value"},
		{map[string]interface{}{"rbac": map[string]interface{}{"clusterScoped": false}}, "rbac.clusterScoped false"},
		{map[string]interface{}{"rbac": map[string]interface{}{"pspEnabled": true}}, "rbac.pspEnabled"},
		{map[string]interface{}{"service": map[string]interface{}{"selector": map[string]interface{}{"a": "b"}}}, "service.selector is an upstream chart value"},
		{map[string]interface{}{"podDisruptionBudget": map[string]interface{}{"annotations": map[string]interface{}{"a": "b"}}}, "podDisruptionBudget.annotations is an upstream chart value"},
		// Any other unknown key, at the top or in a section: values.schema.json.
		{map[string]interface{}{"replicaCont": 3}, "replicaCont"},
		{map[string]interface{}{"image": map[string]interface{}{"digest": "sha256:0"}}, "digest"},
		{map[string]interface{}{"cloudConfig": map[string]interface{}{"token": "dop_v1_x"}}, "token"},
	}
	for _, tc := range tests {
		t.Run(tc.wantErr, func(t *testing.T) {
			t.Parallel()
			_, err := render(t, release{name: "ca", namespace: "kube-system", values: withClusterID(tc.values)})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
	// Upstream's defaults of the values this chart does not implement change
	// nothing and are accepted, as an upstream values file copies them.
	defaults := map[string]interface{}{
		"dnsPolicy": "ClusterFirst", "hostNetwork": false, "revisionHistoryLimit": 10, "customArgs": []interface{}{},
		"extraObjects": []interface{}{}, "envFromConfigMap": "", "envFromSecret": "", "dnsConfig": map[string]interface{}{},
		"initContainers": []interface{}{}, "deployment": map[string]interface{}{"annotations": map[string]interface{}{}},
		"awsRegion": "", "azureVMType": "", "kubeTargetVersionOverride": "",
		"rbac":                map[string]interface{}{"pspEnabled": false, "clusterScoped": true, "additionalRules": []interface{}{}},
		"podDisruptionBudget": map[string]interface{}{"annotations": map[string]interface{}{}, "selector": map[string]interface{}{}, "maxUnavailable": 1},
	}
	if b, _, _, _ := renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(defaults)}); b.PodDisruptionBudget == nil ||
		b.PodDisruptionBudget.Spec.MaxUnavailable.String() != "1" {
		t.Errorf("PodDisruptionBudget with upstream's empty annotations and selector: %+v", b.PodDisruptionBudget)
	}
	// cloudProvider: digitalocean, as an upstream values file may say, is fine.
	if _, err := render(t, release{name: "ca", namespace: "kube-system", values: withClusterID(map[string]interface{}{"cloudProvider": "digitalocean"})}); err != nil {
		t.Errorf("cloudProvider digitalocean refused: %v", err)
	}
}

func TestChartWithoutRBACAndServiceAccount(t *testing.T) {
	t.Parallel()
	values := withClusterID(map[string]interface{}{
		"rbac": map[string]interface{}{"create": false, "serviceAccount": map[string]interface{}{"name": "preexisting"}},
	})
	rendered, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	if err != nil {
		t.Fatal(err)
	}
	typed, _ := decode(t, rendered)
	var dep *appsv1.Deployment
	for _, o := range typed {
		switch v := o.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding, *corev1.ServiceAccount:
			t.Errorf("%T rendered with rbac.create false", v)
		case *appsv1.Deployment:
			dep = v
		}
	}
	if dep == nil || dep.Spec.Template.Spec.ServiceAccountName != "preexisting" {
		t.Errorf("deployment service account not the given one: %+v", dep)
	}

	// Not creating the ServiceAccount without naming one is a mistake: the
	// pod would run as the namespace's default ServiceAccount.
	for _, rbac := range []map[string]interface{}{
		{"serviceAccount": map[string]interface{}{"create": false}},
		{"create": false},
	} {
		values = withClusterID(map[string]interface{}{"rbac": rbac})
		if _, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values}); err == nil ||
			!strings.Contains(err.Error(), "rbac.serviceAccount.name is required") {
			t.Errorf("rbac %v: err = %v", rbac, err)
		}
	}
}

func TestChartCloudConfigEscaping(t *testing.T) {
	t.Parallel()
	// Values end up inside JSON: quotes and backslashes must not break it.
	values := withClusterID(map[string]interface{}{"cloudConfig": map[string]interface{}{"url": `https://api.example.test/a"b\c`}})
	b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	cc, err := b.ParseCloudConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.URL != `https://api.example.test/a"b\c` {
		t.Errorf("url = %q", cc.URL)
	}
}

// The cluster ID is checked as the binary checks it, at render time.
func TestChartClusterIDIsAUUID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"<CLUSTER_ID>", "my-cluster", "5f4a8c1e-0b3d-4e2f-9a6b-7c8d9e0f1a2"} {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			values := map[string]interface{}{"cloudConfig": map[string]interface{}{"clusterID": id}}
			if _, err := render(t, release{name: "ca", namespace: "kube-system", values: values}); err == nil ||
				!strings.Contains(err.Error(), "is not a UUID") {
				t.Errorf("err = %v, want the cluster ID refused", err)
			}
		})
	}
}

func TestChartMetadata(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]interface{}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c["apiVersion"] != "v2" || c["name"] != chartDir {
		t.Errorf("Chart.yaml apiVersion %v name %v", c["apiVersion"], c["name"])
	}
	semver := regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	if v, _ := c["version"].(string); !semver.MatchString(v) {
		t.Errorf("version %v is not SemVer 2", c["version"])
	}
	if c["appVersion"] == nil {
		t.Error("no appVersion (the default image tag)")
	}
}

// chartAppVersion is Chart.yaml's appVersion, the release's image tag.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion %q: %v", c.AppVersion, err)
	}
	return c.AppVersion
}

func TestChartRollsPodsWhenCloudConfigChanges(t *testing.T) {
	t.Parallel()
	checksum := func(clusterID string) string {
		values := map[string]interface{}{"cloudConfig": map[string]interface{}{"clusterID": clusterID}}
		b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
		return b.Deployment.Spec.Template.Annotations["checksum/cloud-config"]
	}
	a, again, other := checksum(testClusterID), checksum(testClusterID), checksum("0f4a8c1e-0b3d-4e2f-9a6b-7c8d9e0f1a2b")
	if len(a) != 64 || a != again {
		t.Errorf("checksum not stable: %q %q", a, again)
	}
	if a == other {
		t.Error("pod template unchanged when the cloud config changes: pods would keep the old config")
	}
}

func TestChartNodePoolSelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value   interface{}
		want    string // node_pool_selection in cloud.json
		wantErr string
	}{
		{"tags", "tags", ""},
		{"auto_scale", "auto_scale", ""},
		// values.schema.json's enum refuses them before the templates.
		{"Tags", "", `at '/nodePoolSelection': value must be one of 'tags', 'auto_scale'`},
		{"", "", `at '/nodePoolSelection': value must be one of 'tags', 'auto_scale'`},
		{"auto-scale", "", `at '/nodePoolSelection': value must be one of 'tags', 'auto_scale'`},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.value), func(t *testing.T) {
			t.Parallel()
			rel := release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(map[string]interface{}{"nodePoolSelection": tc.value})}
			if tc.wantErr != "" {
				if _, err := render(t, rel); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			b, _, _, rendered := renderBundle(t, rel)
			cc, err := b.ParseCloudConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cc.NodePoolSelection != tc.want {
				t.Errorf("node_pool_selection = %q, want %q", cc.NodePoolSelection, tc.want)
			}
			if !strings.Contains(rendered["NOTES.txt"], "Node pool selection: "+tc.want+".") {
				t.Errorf("NOTES.txt does not name the mode:\n%s", rendered["NOTES.txt"])
			}
		})
	}
}

func TestChartPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		value      interface{}
		none       bool
		minA, maxU string
		wantErr    string
	}{
		{"default", nil, false, "", "1", ""},
		{"maxUnavailable 50%", map[string]interface{}{"maxUnavailable": "50%"}, false, "", "50%", ""},
		{"minAvailable instead", map[string]interface{}{"minAvailable": 1, "maxUnavailable": nil}, false, "1", "", ""},
		{"both", map[string]interface{}{"minAvailable": 1}, false, "", "", "set minAvailable or maxUnavailable, not both"},
		{"off with null", "null", true, "", "", ""},
		{"off with {}", map[string]interface{}{"maxUnavailable": nil}, true, "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			values := withClusterID(nil)
			switch v := tc.value.(type) {
			case nil:
			case string: // "null": the whole value removed
				values["podDisruptionBudget"] = nil
			default:
				values["podDisruptionBudget"] = v
			}
			rel := release{name: "ca", namespace: "kube-system", values: values}
			if tc.wantErr != "" {
				if _, err := render(t, rel); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			b, _, _, _ := renderBundle(t, rel)
			pdb := b.PodDisruptionBudget
			if tc.none {
				if pdb != nil {
					t.Fatalf("PodDisruptionBudget rendered: %+v", pdb.Spec)
				}
				return
			}
			if pdb == nil {
				t.Fatal("no PodDisruptionBudget")
			}
			str := func(v interface{ String() string }, isNil bool) string {
				if isNil {
					return ""
				}
				return v.String()
			}
			if got := str(pdb.Spec.MinAvailable, pdb.Spec.MinAvailable == nil); got != tc.minA {
				t.Errorf("minAvailable = %q, want %q", got, tc.minA)
			}
			if got := str(pdb.Spec.MaxUnavailable, pdb.Spec.MaxUnavailable == nil); got != tc.maxU {
				t.Errorf("maxUnavailable = %q, want %q", got, tc.maxU)
			}
			if pdb.Name != b.Deployment.Name || pdb.Namespace != "kube-system" {
				t.Errorf("PodDisruptionBudget %s/%s", pdb.Namespace, pdb.Name)
			}
			for k, v := range pdb.Spec.Selector.MatchLabels {
				if b.Deployment.Spec.Template.Labels[k] != v {
					t.Errorf("selector %s=%s does not match the pods %v", k, v, b.Deployment.Spec.Template.Labels)
				}
			}
		})
	}
}

// extraArgs may not override the flags the chart derives from the release,
// in any spelling the binary would read as the same flag.
func TestChartRefusesOverridingItsOwnFlags(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"cloud-provider", "cloud_provider", "cloud-config", "cloud_config", "cloud-config_2",
		"namespace", "namespace_1", "--namespace", "leader-elect", "leader_elect", "address", "-address",
	} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			values := withClusterID(map[string]interface{}{"extraArgs": map[string]interface{}{key: "x", "max-nodes-total": 5}})
			_, err := render(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
			if err == nil || !strings.Contains(err.Error(), "extraArgs."+key+": --") || !strings.Contains(err.Error(), "is set by the chart") {
				t.Errorf("err = %v, want extraArgs.%s refused", err, key)
			}
		})
	}
	// Flags that only share a prefix are fine.
	b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(map[string]interface{}{
		"extraArgs": map[string]interface{}{"leader-elect-resource-name": "ca-lock", "leader-elect-lease-duration": "20s", "namespaces-ignored": "x"},
	})})
	if v, _ := b.Flag("leader-elect-resource-name"); v != "ca-lock" {
		t.Errorf("--leader-elect-resource-name = %q", v)
	}
}

// extraArgs in upstream's chart's forms: name: value, a bare flag (null), and
// a repeated flag (name_<anything>).
func TestChartExtraArgsUpstreamForms(t *testing.T) {
	t.Parallel()
	values := withClusterID(map[string]interface{}{"extraArgs": map[string]interface{}{
		"max-nodes-total":                  50,
		"scale-down-enabled":               nil,
		"skip-nodes-with-system-pods":      false,
		"startup-taint_1":                  "node.cilium.io/agent-not-ready",
		"startup-taint_2":                  "example.com/booting",
		"scale-down-utilization-threshold": 0.65,
		"max-empty-bulk-delete":            0,
	}})
	b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: values})
	args := b.Container().Args
	for _, want := range []string{
		"--max-nodes-total=50", "--scale-down-enabled", "--skip-nodes-with-system-pods=false",
		"--startup-taint=node.cilium.io/agent-not-ready", "--startup-taint=example.com/booting",
		"--scale-down-utilization-threshold=0.65", "--max-empty-bulk-delete=0",
	} {
		found := false
		for _, a := range args {
			found = found || a == want
		}
		if !found {
			t.Errorf("args %v lack %s", args, want)
		}
	}
}

func TestChartTerminationGracePeriod(t *testing.T) {
	t.Parallel()
	b, _, _, _ := renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(nil)})
	if g := b.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 60 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 60", g)
	}
	b, _, _, _ = renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(map[string]interface{}{"terminationGracePeriodSeconds": 120})})
	if g := b.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 120 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 120", g)
	}
	_, err := render(t, release{name: "ca", namespace: "kube-system", values: withClusterID(map[string]interface{}{"terminationGracePeriodSeconds": 30})})
	if err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSeconds 30 is shorter than the autoscaler's shutdown") {
		t.Errorf("err = %v, want the grace period refused", err)
	}
}

// --pod-deletion-cost-on-unneeded-nodes in extraArgs grants patch on pods,
// which deploy/ leaves out; without it, or set to false, nothing more.
func TestChartPodDeletionCostGrantsPatch(t *testing.T) {
	t.Parallel()
	d := deployBundle(t)
	for _, tc := range []struct {
		value any
		patch bool
	}{{nil, false}, {true, true}, {"true", true}, {false, false}} {
		extra := map[string]interface{}{}
		if tc.value != nil {
			extra["extraArgs"] = map[string]interface{}{"pod-deletion-cost-on-unneeded-nodes": tc.value}
		}
		b, _, _, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(extra)})
		got, base := manifestcheck.Grants(b.ClusterRole.Rules), manifestcheck.Grants(d.ClusterRole.Rules)
		var added []string
		for _, g := range got {
			if !slices.Contains(base, g) {
				added = append(added, g)
			}
		}
		if want := tc.patch; (len(added) > 0) != want || len(added) > 1 || want && !strings.Contains(added[0], "patch") {
			t.Errorf("extraArgs pod-deletion-cost-on-unneeded-nodes=%v: grants beyond deploy/ %v, want patch on pods %v", tc.value, added, want)
		}
	}
}
