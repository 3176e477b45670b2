package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiv1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/doks-autoscaler/cluster-autoscaler/clusterstate/api"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/manifestcheck"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// The identity and namespace the deploy/ manifests give the autoscaler.
const (
	rbacNamespace      = "kube-system"
	rbacServiceAccount = "cluster-autoscaler"
	rbacUser           = "system:serviceaccount:kube-system:cluster-autoscaler"
	statusConfigMap    = "cluster-autoscaler-status"
)

// rbacManifests are the deploy/ files that make up the autoscaler's identity and rights.
var rbacManifests = []string{"serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml", "role.yaml", "rolebinding.yaml"}

// applyRBAC creates the objects of the deploy/ RBAC manifests with the admin client and
// removes them when the test ends.
func (s *scenario) applyRBAC() {
	s.t.Helper()
	for _, name := range rbacManifests {
		raw, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", name))
		if err != nil {
			s.t.Fatal(err)
		}
		objs, err := manifestcheck.Decode(raw)
		if err != nil {
			s.t.Fatalf("deploy/%s: %v", name, err)
		}
		for _, obj := range objs {
			var del func() error
			switch o := obj.(type) {
			case *apiv1.ServiceAccount:
				_, err = s.kube.CoreV1().ServiceAccounts(o.Namespace).Create(s.ctx, o, metav1.CreateOptions{})
				del = func() error {
					return s.kube.CoreV1().ServiceAccounts(o.Namespace).Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				}
			case *rbacv1.ClusterRole:
				_, err = s.kube.RbacV1().ClusterRoles().Create(s.ctx, o, metav1.CreateOptions{})
				del = func() error {
					return s.kube.RbacV1().ClusterRoles().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				}
			case *rbacv1.ClusterRoleBinding:
				_, err = s.kube.RbacV1().ClusterRoleBindings().Create(s.ctx, o, metav1.CreateOptions{})
				del = func() error {
					return s.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				}
			case *rbacv1.Role:
				_, err = s.kube.RbacV1().Roles(o.Namespace).Create(s.ctx, o, metav1.CreateOptions{})
				del = func() error {
					return s.kube.RbacV1().Roles(o.Namespace).Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				}
			case *rbacv1.RoleBinding:
				_, err = s.kube.RbacV1().RoleBindings(o.Namespace).Create(s.ctx, o, metav1.CreateOptions{})
				del = func() error {
					return s.kube.RbacV1().RoleBindings(o.Namespace).Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				}
			default:
				s.t.Fatalf("deploy/%s: unexpected %T", name, obj)
			}
			if err != nil {
				s.t.Fatalf("deploy/%s: creating %T: %v", name, obj, err)
			}
			s.t.Cleanup(func() {
				if err := del(); err != nil && !apierrors.IsNotFound(err) {
					s.t.Logf("removing %T from deploy/%s: %v", obj, name, err)
				}
			})
		}
	}
}

// serviceAccountKubeconfig asks the apiserver for a token of the autoscaler's
// ServiceAccount (TokenRequest API) and writes a kubeconfig that uses it.
func (s *scenario) serviceAccountKubeconfig() (path string, client kubernetes.Interface) {
	s.t.Helper()
	tr, err := s.kube.CoreV1().ServiceAccounts(rbacNamespace).CreateToken(s.ctx, rbacServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("TokenRequest for %s/%s: %v", rbacNamespace, rbacServiceAccount, err)
	}
	admin, err := clientcmd.LoadFromFile(sharedCP.KubeconfigPath)
	if err != nil {
		s.t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sandbox"] = cluster.DeepCopy()
	cfg.AuthInfos[rbacServiceAccount] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: rbacServiceAccount, Namespace: rbacNamespace}
	cfg.CurrentContext = "sandbox"
	path = filepath.Join(artifacts, s.ns, "serviceaccount.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		s.t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		s.t.Fatal(err)
	}
	if client, err = kubernetes.NewForConfig(rc); err != nil {
		s.t.Fatal(err)
	}
	return path, client
}

// spreadByHost asks the scheduler (softly) to put the replicas on different nodes; the
// autoscaler may still pack them together.
func spreadByHost(d *appsv1.Deployment) {
	d.Spec.Template.Spec.TopologySpreadConstraints = []apiv1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: apiv1.LabelHostname, WhenUnsatisfiable: apiv1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels},
	}}
}

// taintWatch records every node seen with the autoscaler's deletion taint.
type taintWatch struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *scenario) watchTaints() *taintWatch {
	w := &taintWatch{seen: map[string]bool{}}
	go func() {
		for s.ctx.Err() == nil {
			if l, err := s.kube.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{}); err == nil {
				for _, n := range l.Items {
					for _, t := range n.Spec.Taints {
						if t.Key == ToBeDeletedTaint {
							w.mu.Lock()
							w.seen[n.Name] = true
							w.mu.Unlock()
						}
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

func (w *taintWatch) saw(node string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[node]
}

// clearAutoscalerState removes what an earlier run in kube-system may have left.
func (s *scenario) clearAutoscalerState() {
	s.t.Helper()
	for _, err := range []error{
		s.kube.CoordinationV1().Leases(rbacNamespace).Delete(s.ctx, leaseName, metav1.DeleteOptions{}),
		s.kube.CoreV1().ConfigMaps(rbacNamespace).Delete(s.ctx, statusConfigMap, metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			s.t.Fatal(err)
		}
	}
}

// The autoscaler running as the deploy/ ServiceAccount, with only the deploy/ RBAC, in
// kube-system with leader election: it scales down (taint, eviction, deletion) and up,
// writes its status ConfigMap and events, and is never refused by the apiserver.
func TestRBACDeployManifestsSuffice(t *testing.T) {
	s := newScenario(t, scenarioOptions{
		pools: []doks.PoolSpec{autoscaled("rbac", 2, 1, 3)},
		// Evicted pods take a moment to go, as they would on a kubelet.
		agent: nodeagent.Options{TerminationDelay: 2 * time.Second},
	})
	s.clearAutoscalerState()
	s.applyRBAC()
	kubeconfig, sa := s.serviceAccountKubeconfig()

	// The token is the ServiceAccount's, and RBAC applies to it.
	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(s.ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview as the ServiceAccount: %v", err)
	}
	if got := review.Status.UserInfo.Username; got != rbacUser {
		t.Fatalf("the token authenticates as %q, want %q", got, rbacUser)
	}
	if _, err := sa.CoreV1().Secrets(rbacNamespace).List(s.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount may list Secrets (err %v): RBAC is not enforced, the test would prove nothing", err)
	}

	// Two small pods on two nodes: one node is unneeded, and removing it needs an eviction.
	s.deploy("small", 2, smallPod, spreadByHost)
	s.waitRunning("small", 2, 30*time.Second)
	before := map[string]string{} // pod name → node
	nodes := map[string]bool{}
	for _, p := range s.pods("small") {
		before[p.Name] = p.Spec.NodeName
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) != 2 {
		t.Fatalf("the small pods did not land on two nodes: %v", before)
	}
	taints := s.watchTaints()

	ca := s.startAutoscaler("--kubeconfig="+kubeconfig, "--namespace="+rbacNamespace, "--leader-elect=true",
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s")
	// Stop it before the RBAC objects go, so that its shutdown runs with its rights.
	t.Cleanup(func() { ca.Stop(15 * time.Second) })
	id := s.electionIdentity(ca)
	s.eventually("the ServiceAccount's replica holding the Lease in "+rbacNamespace, 30*time.Second, func() error {
		h, err := s.leaseHolder(rbacNamespace)
		if err != nil {
			return err
		}
		if h != id {
			return fmt.Errorf("Lease held by %q", h)
		}
		return nil
	})

	// Scale-down: taint, evict, delete.
	start := time.Now()
	s.waitTarget("rbac", 1, 60*time.Second)
	s.waitNodes("rbac", 1, 60*time.Second)
	s.waitRunning("small", 2, 30*time.Second)
	var removed, evicted string
	for pod, node := range before {
		if _, err := s.kube.CoreV1().Nodes().Get(s.ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			removed, evicted = node, pod
		}
	}
	if removed == "" {
		t.Fatalf("no node of the small pods was removed: %v", before)
	}
	t.Logf("scale-down as the ServiceAccount: node %s removed (pod %s evicted) %v after start",
		removed, evicted, time.Since(start).Round(100*time.Millisecond))
	if !taints.saw(removed) {
		t.Errorf("node %s went without carrying the %s taint", removed, ToBeDeletedTaint)
	}
	if ev := s.eventsFor("ScaleDown", "Pod", evicted); len(ev) == 0 {
		t.Errorf("no ScaleDown event on the evicted pod %s", evicted)
	}

	// Scale-up: what is left of the remaining node (1900m - 2×200m) is too little.
	start = time.Now()
	s.deploy("big", 1, "1600m")
	s.waitTarget("rbac", 2, 60*time.Second)
	t.Logf("scale-up as the ServiceAccount: pool at 2 %v after the pod was created", time.Since(start).Round(100*time.Millisecond))
	s.waitRunning("big", 1, 60*time.Second)
	s.waitEvent("TriggeredScaleUp", 30*time.Second)

	// The status ConfigMap reflects the pool, and events went to kube-system too.
	pool := s.pool("rbac")
	s.eventually("the status ConfigMap showing the pool at 2", 30*time.Second, func() error {
		cm, err := s.kube.CoreV1().ConfigMaps(rbacNamespace).Get(s.ctx, statusConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var st api.ClusterAutoscalerStatus
		if err := yaml.Unmarshal([]byte(cm.Data["status"]), &st); err != nil {
			return fmt.Errorf("status: %v", err)
		}
		for _, g := range st.NodeGroups {
			if g.Name == pool.ID {
				if g.Health.CloudProviderTarget != 2 {
					return fmt.Errorf("status shows target %d", g.Health.CloudProviderTarget)
				}
				return nil
			}
		}
		return fmt.Errorf("pool %s (%s) not in the status", pool.Name, pool.ID)
	})
	s.eventually("a ScaledUpGroup event in "+rbacNamespace, 15*time.Second, func() error {
		l, err := s.kube.CoreV1().Events(rbacNamespace).List(s.ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", "ScaledUpGroup").String(),
		})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})

	// Shutdown: the status ConfigMap is deleted and the Lease released, both as the
	// ServiceAccount.
	ca.Stop(20 * time.Second)
	if err := ca.Err(); err != nil {
		t.Errorf("the autoscaler did not exit cleanly: %v", err)
	}
	if _, err := s.kube.CoreV1().ConfigMaps(rbacNamespace).Get(s.ctx, statusConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("status ConfigMap still there after shutdown (err %v)", err)
	}
	if h, err := s.leaseHolder(rbacNamespace); err != nil || h != "" {
		t.Errorf("Lease still held by %q after shutdown (err %v)", h, err)
	}
	for _, l := range logLines(ca.LogPath, "") {
		if strings.Contains(strings.ToLower(l), "forbidden") {
			t.Errorf("refused by the apiserver: %s", l)
		}
	}
}

// eventsFor lists the events of the scenario's namespace with reason about one object.
func (s *scenario) eventsFor(reason, kind, name string) []apiv1.Event {
	s.t.Helper()
	var out []apiv1.Event
	for _, ev := range s.events(reason) {
		if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out
}
