package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "github.com/doks-autoscaler/cluster-autoscaler/apis/provisioningrequest/v1"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
)

// kueueVersion is the Kueue release docs/provisioning-requests.md is
// checked with; .ci/run installs its controller.
const kueueVersion = "v0.17.0"

// Kueue's namespace and the names its internal certificate management uses
// (its defaults).
const (
	kueueNamespace = "kueue-system"
	kueueSecret    = "kueue-webhook-server-cert"
)

// The Kueue setup of docs/provisioning-requests.md, applied as the doc
// shows it, with Kueue's own controller manager and the autoscaler binary:
// Kueue makes a ProvisioningRequest for the suspended Job's workload, the
// autoscaler grows the pool by the whole Job in one call and marks the
// request Provisioned, and Kueue admits the Job, whose three pods run on
// the new nodes.
func TestKueueAdmitsTheDocsJobThroughTheAutoscaler(t *testing.T) {
	kueue := kueueBinary(t)
	s := newScenario(t, scenarioOptions{pools: []doks.PoolSpec{autoscaled("train", 0, 0, 5)}})
	objects := docsKueueSetup(t)
	s.installKueueCRDs()
	s.startKueue(kueue)
	s.startAutoscaler("--enable-provisioning-requests")

	job := s.applyKueueSetup(objects)
	s.eventually("Kueue admits the Job (unsuspends it)", 4*time.Minute, func() error {
		j, err := s.kube.BatchV1().Jobs(s.ns).Get(s.ctx, job, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ptr.Deref(j.Spec.Suspend, false) {
			return fmt.Errorf("Job %s still suspended", job)
		}
		return nil
	})

	// Admitted through the autoscaler: Kueue's request is provisioned, in
	// one pool update of the whole Job.
	reqs, err := s.provisioningRequests().List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs.Items) != 1 {
		t.Fatalf("%d ProvisioningRequests in %s, want Kueue's one", len(reqs.Items), s.ns)
	}
	pr := s.provisioningRequest(reqs.Items[0].GetName())
	if pr.Spec.ProvisioningClassName != v1.ProvisioningClassBestEffortAtomicScaleUp || len(pr.Spec.PodSets) != 1 || pr.Spec.PodSets[0].Count != 3 {
		t.Errorf("Kueue's request: class %q, pod sets %+v; want the doc's class and one set of 3", pr.Spec.ProvisioningClassName, pr.Spec.PodSets)
	}
	if c := apimeta.FindStatusCondition(pr.Status.Conditions, v1.Provisioned); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "CapacityIsProvisioned" {
		t.Errorf("Kueue's request %s: Provisioned is %+v, want True/CapacityIsProvisioned", pr.Name, c)
	}
	if err := s.updatesAre(1)(); err != nil {
		t.Error(err)
	}
	if m := s.maxTarget("train"); m != 3 {
		t.Errorf("pool train reached %d nodes, want 3 (one 1500m pod per 2-vCPU node)", m)
	}
	s.eventually("the Job's 3 pods running on the new nodes", 2*time.Minute, s.jobRunning(job, 3))
	s.waitNodes("train", 3, time.Minute)
}

// kueueBinary is $KUEUE_BINARY, else kueue on PATH or in $GOPATH/bin. CI
// must run this test: there a missing binary fails it; elsewhere it skips.
func kueueBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("KUEUE_BINARY"); b != "" {
		return b
	}
	if b, err := exec.LookPath("kueue"); err == nil {
		return b
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		if b := filepath.Join(strings.TrimSpace(string(out)), "bin", "kueue"); fileExists(b) {
			return b
		}
	}
	msg := "kueue not found (KUEUE_BINARY, PATH, $GOPATH/bin): go install sigs.k8s.io/kueue/cmd/kueue@" + kueueVersion
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// docsKueueSetup reads the objects of the YAML block after the
// kueue-setup marker in docs/provisioning-requests.md.
func docsKueueSetup(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "provisioning-requests.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte("<!-- kueue-setup:"))
	if !ok {
		t.Fatal("docs/provisioning-requests.md has no kueue-setup marker")
	}
	_, after, ok = bytes.Cut(after, []byte("```yaml\n"))
	block, _, closed := bytes.Cut(after, []byte("```"))
	if !ok || !closed {
		t.Fatal("no yaml block after the kueue-setup marker")
	}
	objs, err := decodeYAML(block)
	if err != nil {
		t.Fatalf("the doc's Kueue setup: %v", err)
	}
	return objs
}

func decodeYAML(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// installKueueCRDs creates Kueue's CRDs from its module (too large to copy
// here), with the conversion webhooks its release manifests configure:
// Kueue's certificate management fills their CA bundles and waits until it
// has. The API server calls them only to convert between versions, and
// everything here reads and writes the stored one, v1beta2.
func (s *scenario) installKueueCRDs() {
	s.t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kueue@"+kueueVersion).Output()
	if err != nil {
		s.t.Fatalf("go mod download sigs.k8s.io/kueue@%s: %v", kueueVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		s.t.Fatalf("go mod download: no module directory in %s (%v)", out, err)
	}
	files, err := filepath.Glob(filepath.Join(mod.Dir, "config", "components", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		s.t.Fatalf("no CRDs in %s (%v)", mod.Dir, err)
	}
	converted := map[string]bool{"localqueues": true, "clusterqueues": true, "cohorts": true, "workloads": true, "multikueueclusters": true}
	client, err := apiextensions.NewForConfig(sharedCP.Config)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			s.t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			s.t.Fatalf("%s: %v", f, err)
		}
		if converted[crd.Spec.Names.Plural] {
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
						Namespace: kueueNamespace, Name: "kueue-webhook-service", Path: ptr.To("/convert")}},
					ConversionReviewVersions: []string{"v1"},
				},
			}
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(s.ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			s.t.Fatalf("CRD %s: %v", crd.Name, err)
		}
		name := crd.Name
		s.eventually("CRD "+name+" established", 30*time.Second, func() error {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(s.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("CRD %s not established", name)
		})
	}
}

// startKueue runs Kueue's controller manager against the sandbox: only the
// batch/job integration, no leader election, webhook and health servers
// on loopback ports of their own, no metrics or visibility server. Its
// internal certificate management makes the webhook certificate into a
// Secret; in a cluster the Secret is mounted into Kueue's pod, here the
// test copies it into the certificate directory, as the kubelet would.
func (s *scenario) startKueue(binary string) {
	s.t.Helper()
	if err := sharedCP.EnsureNamespace(s.ctx, kueueNamespace); err != nil {
		s.t.Fatal(err)
	}
	// Kueue's manifests create the Secret empty; its certificate management
	// fills it.
	secret := &apiv1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kueueSecret, Namespace: kueueNamespace}}
	if _, err := s.kube.CoreV1().Secrets(kueueNamespace).Create(s.ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	dir := filepath.Join(artifacts, s.ns, "kueue")
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	config := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
featureGates:
  VisibilityOnDemand: false
integrations:
  frameworks: ["batch/job"]
`, kueueNamespace, freePort(s.t), freePort(s.t), certDir)
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		s.t.Fatal(err)
	}
	go s.mountSecret(kueueNamespace, kueueSecret, certDir)
	logPath := filepath.Join(dir, "kueue.log")
	p, err := sandbox.RunAutoscaler(binary, []string{"--config=" + configPath, "--kubeconfig=" + sharedCP.KubeconfigPath, "--zap-log-level=3"}, logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("started kueue %s (pid %d), log %s", kueueVersion, p.Cmd.Process.Pid, logPath)
	s.t.Cleanup(func() {
		p.Stop(15 * time.Second)
		if s.t.Failed() {
			s.t.Logf("kueue log (last 100 lines):\n%s", tail(logPath, 100))
		}
	})
}

// mountSecret writes the Secret's keys into dir as files, and again when
// they change, until the scenario ends: a secret volume.
func (s *scenario) mountSecret(ns, name, dir string) {
	written := map[string]string{}
	for s.ctx.Err() == nil {
		if sec, err := s.kube.CoreV1().Secrets(ns).Get(s.ctx, name, metav1.GetOptions{}); err == nil {
			for k, v := range sec.Data {
				if written[k] != string(v) && os.WriteFile(filepath.Join(dir, k), v, 0o600) == nil {
					written[k] = string(v)
				}
			}
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// applyKueueSetup creates objs in order, namespaced ones in the scenario's
// namespace, as kubectl apply -n would; the cluster-scoped ones are deleted
// at the end. It returns the Job's name.
func (s *scenario) applyKueueSetup(objs []*unstructured.Unstructured) (job string) {
	s.t.Helper()
	dyn, err := dynamic.NewForConfig(sharedCP.Config)
	if err != nil {
		s.t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(s.kube.Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			s.t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == apimeta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(s.ns)
		} else {
			gvr, name := m.Resource, o.GetName()
			s.t.Cleanup(func() { deleteClusterObject(dyn, gvr, name) })
		}
		if _, err := ri.Create(s.ctx, o, metav1.CreateOptions{}); err != nil {
			s.t.Fatalf("creating %s %s: %v", gvk.Kind, o.GetName(), err)
		}
		if gvk.Kind == "Job" {
			job = o.GetName()
		}
	}
	if job == "" {
		s.t.Fatal("the doc's Kueue setup has no Job")
	}
	return job
}

func deleteClusterObject(dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = dyn.Resource(gvr).Delete(ctx, name, metav1.DeleteOptions{})
}
