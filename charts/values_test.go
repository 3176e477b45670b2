package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// upstreamDefaults are the keys of upstream's chart (kubernetes/autoscaler
// charts/cluster-autoscaler 9.59.0, appVersion 1.35.0) at their defaults, as
// a values file copied from it holds them, except cloudProvider (upstream's
// default is aws, which the chart refuses: see the test below).
const upstreamDefaults = `
affinity: {}
additionalLabels: {}
autoDiscovery:
  clusterName: null
  namespace: null
  tags: [k8s.io/cluster-autoscaler/enabled, "k8s.io/cluster-autoscaler/{{ .Values.autoDiscovery.clusterName }}"]
  roles: [worker]
  labels: []
autoscalingGroups: []
autoscalingGroupsnamePrefix: []
awsAccessKeyID: ""
awsRegion: ""
awsSecretAccessKey: ""
azureClientID: ""
azureClientSecret: ""
azureResourceGroup: ""
azureSubscriptionID: ""
azureTenantID: ""
azureUseManagedIdentityExtension: false
azureUserAssignedIdentityID: ""
azureUseWorkloadIdentityExtension: false
azureVMType: vmss
azureEnableForceDelete: false
azureEnableVMSSEtag: false
civoApiUrl: https://api.civo.com
civoApiKey: ""
civoClusterID: ""
civoRegion: ""
cloudConfigPath: ""
clusterAPICloudConfigPath: /etc/kubernetes/mgmt-kubeconfig
clusterAPIConfigMapsNamespace: ""
clusterAPIKubeconfigSecret: ""
clusterAPIMode: incluster-incluster
clusterAPIWorkloadKubeconfigPath: /etc/kubernetes/value
containerSecurityContext: {}
deployment: {annotations: {}, selector: {}}
dnsConfig: {}
dnsPolicy: ClusterFirst
envFromConfigMap: ""
envFromSecret: ""
expanderPriorities: {}
extraArgs: {logtostderr: true, stderrthreshold: info, v: 4}
customArgs: []
extraEnv: {}
extraEnvConfigMaps: {}
extraEnvSecrets: {}
extraObjects: []
extraVolumeMounts: []
extraVolumes: []
extraVolumeSecrets: {}
initContainers: []
fullnameOverride: ""
hostNetwork: false
image:
  repository: registry.k8s.io/autoscaling/cluster-autoscaler
  tag: v1.35.0
  pullPolicy: IfNotPresent
  pullSecrets: []
kubeTargetVersionOverride: ""
kwokConfigMapName: kwok-provider-config
magnumCABundlePath: /etc/kubernetes/ca-bundle.crt
magnumClusterName: ""
nameOverride: ""
nodeSelector: {}
podAnnotations: {}
podDisruptionBudget: {annotations: {}, selector: {}, maxUnavailable: 1}
podLabels: {}
priorityClassName: system-cluster-critical
priorityConfigMapAnnotations: {}
prometheusRule: {enabled: false, additionalLabels: {}, namespace: monitoring, interval: null, rules: []}
rbac:
  create: true
  pspEnabled: false
  clusterScoped: true
  annotations: {}
  serviceAccount: {annotations: {}, create: true, name: "", automountServiceAccountToken: true}
  additionalRules: []
replicaCount: 1
resources: {}
revisionHistoryLimit: 10
securityContext: {}
service:
  create: true
  annotations: {}
  labels: {}
  externalIPs: []
  selector: {}
  clusterIP: ""
  loadBalancerIP: ""
  loadBalancerSourceRanges: []
  servicePort: 8085
  portName: http
  type: ClusterIP
serviceMonitor:
  enabled: false
  interval: 10s
  namespace: monitoring
  selector: {release: prometheus-operator}
  path: /metrics
  annotations: {}
  relabelings: {}
  metricRelabelings: {}
tolerations: []
topologySpreadConstraints: []
updateStrategy: {}
vpa: {enabled: false, updateMode: Auto, containerPolicy: {}, recommender: default}
secretKeyRefNameOverride: ""
`

// A values file holding every one of upstream's defaults installs, once it
// names the provider and the cluster; upstream's default provider, aws, is
// refused by name.
func TestChartTakesUpstreamDefaults(t *testing.T) {
	t.Parallel()
	values := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(upstreamDefaults), &values); err != nil {
		t.Fatal(err)
	}
	values["cloudProvider"] = "digitalocean"
	b, _, _, _ := renderBundle(t, release{name: "ca", namespace: "kube-system", values: withClusterID(values)})
	if *b.Deployment.Spec.Replicas != 1 || b.PodDisruptionBudget == nil {
		t.Errorf("replicas %d, PodDisruptionBudget %v", *b.Deployment.Spec.Replicas, b.PodDisruptionBudget)
	}
	if out, err := helm(t, withClusterID(values), "lint", "--strict", chartDir); err != nil {
		t.Errorf("helm lint --strict with upstream's defaults: %v\n%s", err, out)
	}
	values["cloudProvider"] = "aws"
	if _, err := render(t, release{name: "ca", namespace: "kube-system", values: withClusterID(values)}); err == nil ||
		!strings.Contains(err.Error(), `cloudProvider "aws": this chart runs only the digitalocean provider`) {
		t.Errorf("cloudProvider aws: err = %v", err)
	}
}

// schema is the part of a JSON schema the test walks.
type schema struct {
	Type                 interface{}        `json:"type"`
	Enum                 []interface{}      `json:"enum"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Description          string             `json:"description"`
}

func loadSchema(t *testing.T) *schema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return &s
}

// child is the schema of key k: a declared property, else the schema
// additionalProperties gives; nil when k may not appear.
func (s *schema) child(k string) *schema {
	if c, ok := s.Properties[k]; ok {
		return c
	}
	if len(s.AdditionalProperties) > 0 && s.AdditionalProperties[0] == '{' {
		var c schema
		if json.Unmarshal(s.AdditionalProperties, &c) == nil {
			return &c
		}
	}
	return nil
}

// Every value in values.yaml, at every depth, has a type in
// values.schema.json, and every value upstream's chart defines is declared.
func TestChartSchemaTypesEveryValue(t *testing.T) {
	t.Parallel()
	s := loadSchema(t)
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]interface{}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	typed := 0
	var walk func(path string, v map[string]interface{}, s *schema)
	walk = func(path string, v map[string]interface{}, s *schema) {
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c := s.child(k)
			switch {
			case c == nil:
				t.Errorf("values.yaml %s%s is not declared in values.schema.json", path, k)
				continue
			case c.Type == nil:
				t.Errorf("values.yaml %s%s has no type in values.schema.json", path, k)
			default:
				typed++
			}
			if m, ok := v[k].(map[string]interface{}); ok {
				walk(path+k+".", m, c)
			}
		}
	}
	walk("", values, s)
	if typed < 100 {
		t.Errorf("%d values typed, want every one of values.yaml's", typed)
	}
	var upstream map[string]interface{}
	if err := yaml.Unmarshal([]byte(upstreamDefaults), &upstream); err != nil {
		t.Fatal(err)
	}
	for k := range upstream {
		if s.child(k) == nil || s.child(k).Type == nil {
			t.Errorf("upstream's value %s is not typed in values.schema.json", k)
		}
	}
	// Closed sets are enums.
	for _, path := range [][]string{{"image", "pullPolicy"}, {"nodePoolSelection"}, {"service", "type"}, {"updateStrategy", "type"}, {"dnsPolicy"}} {
		c := s
		for _, k := range path {
			c = c.child(k)
		}
		if len(c.Enum) == 0 {
			t.Errorf("%s has no enum in values.schema.json", strings.Join(path, "."))
		}
	}
}

// A value of the wrong type, or outside its closed set, is refused by helm
// install and helm lint, naming the value.
func TestChartSchemaRefusesBadTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		values map[string]interface{}
		at     string
	}{
		{map[string]interface{}{"replicaCount": "two"}, "/replicaCount"},
		{map[string]interface{}{"replicaCount": 1.5}, "/replicaCount"},
		{map[string]interface{}{"image": map[string]interface{}{"pullPolicy": "Sometimes"}}, "/image/pullPolicy"},
		{map[string]interface{}{"service": map[string]interface{}{"type": "Ingress"}}, "/service/type"},
		{map[string]interface{}{"service": map[string]interface{}{"servicePort": "http"}}, "/service/servicePort"},
		{map[string]interface{}{"serviceMonitor": map[string]interface{}{"interval": "often"}}, "/serviceMonitor/interval"},
		{map[string]interface{}{"serviceMonitor": map[string]interface{}{"selector": map[string]interface{}{"release": []interface{}{"a"}}}}, "/serviceMonitor/selector/release"},
		{map[string]interface{}{"capacityBuffers": map[string]interface{}{"podDryRunEnabled": "yes"}}, "/capacityBuffers/podDryRunEnabled"},
		{map[string]interface{}{"extraEnv": map[string]interface{}{"A": []interface{}{"b"}}}, "/extraEnv/A"},
		{map[string]interface{}{"extraArgs": map[string]interface{}{"scan-interval": map[string]interface{}{"s": 10}}}, "/extraArgs/scan-interval"},
		{map[string]interface{}{"resources": map[string]interface{}{"requests": map[string]interface{}{"cpu": "lots"}}}, "/resources/requests/cpu"},
		{map[string]interface{}{"terminationGracePeriodSeconds": "60s"}, "/terminationGracePeriodSeconds"},
		{map[string]interface{}{"rbac": map[string]interface{}{"create": "true"}}, "/rbac/create"},
		{map[string]interface{}{"tolerations": map[string]interface{}{"key": "x"}}, "/tolerations"},
		{map[string]interface{}{"updateStrategy": map[string]interface{}{"type": "BlueGreen"}}, "/updateStrategy/type"},
		{map[string]interface{}{"containerSecurityContext": map[string]interface{}{"runAsUser": "root"}}, "/containerSecurityContext/runAsUser"},
	}
	for _, tc := range tests {
		t.Run(tc.at, func(t *testing.T) {
			t.Parallel()
			want := "at '" + tc.at + "'"
			if _, err := helm(t, withClusterID(tc.values), "template", "ca", chartDir); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("helm template: err = %v, want %q", err, want)
			}
			if out, err := helm(t, withClusterID(tc.values), "lint", chartDir); err == nil || !strings.Contains(out+err.Error(), want) {
				t.Errorf("helm lint: err = %v, want %q\n%s", err, want, out)
			}
		})
	}
}

// With kube-prometheus-stack's defaults, its Prometheus selects
// ServiceMonitors and PrometheusRules labelled release: <its release name>:
// the chart's carry release: kube-prometheus-stack by default, and another
// name on request; both go to the release namespace unless told otherwise.
func TestChartMonitoringSelectedByKubePrometheusStack(t *testing.T) {
	t.Parallel()
	objects := func(values map[string]interface{}) map[string]map[string]interface{} {
		_, _, crds, _ := renderBundle(t, release{name: "cluster-autoscaler", namespace: "kube-system", values: withClusterID(values)})
		out := map[string]map[string]interface{}{}
		for _, c := range crds {
			out[c["kind"].(string)] = c["metadata"].(map[string]interface{})
		}
		return out
	}
	on := map[string]interface{}{
		"serviceMonitor": map[string]interface{}{"enabled": true},
		"prometheusRule": map[string]interface{}{"enabled": true},
	}
	got := objects(on)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		meta := got[kind]
		if meta == nil {
			t.Fatalf("no %s rendered", kind)
		}
		labels, _ := meta["labels"].(map[string]interface{})
		if labels["release"] != "kube-prometheus-stack" {
			t.Errorf("%s labels %v, want release: kube-prometheus-stack", kind, labels)
		}
		if meta["namespace"] != "kube-system" {
			t.Errorf("%s in namespace %v, want the release's", kind, meta["namespace"])
		}
	}
	got = objects(map[string]interface{}{
		"serviceMonitor": map[string]interface{}{"enabled": true, "namespace": "monitoring", "selector": map[string]interface{}{"release": "prom"}},
		"prometheusRule": map[string]interface{}{"enabled": true, "namespace": "monitoring", "additionalLabels": map[string]interface{}{"release": "prom"}},
	})
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		labels, _ := got[kind]["labels"].(map[string]interface{})
		if labels["release"] != "prom" || got[kind]["namespace"] != "monitoring" {
			t.Errorf("%s: labels %v in %v, want release: prom in monitoring", kind, labels, got[kind]["namespace"])
		}
	}
}
