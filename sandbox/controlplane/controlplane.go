// Package controlplane runs a Kubernetes control plane inside the current process, on
// loopback only: an embedded etcd, kube-apiserver, kube-scheduler and the handful of
// kube-controller-manager controllers the sandbox needs (ReplicaSet, Deployment,
// DaemonSet, disruption, garbage collector, namespace, Job, ResourceClaim). Nothing is downloaded and no
// external binary runs. It exists for the sandbox, e2e tests and demos; the production
// autoscaler must never import it.
package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// AdminUser is the user name bound to the admin token (group system:masters).
const AdminUser = "sandbox-admin"

// ClientQPS and ClientBurst are the client-side rate limits of every client the
// sandbox's own components use: the admin client (node agent, harnesses), the
// controllers and the scheduler. A real control plane runs each component on its own
// machine with limits sized for the cluster; client-go's defaults (5 and 10) or the
// scheduler's (50 and 100) would make the sandbox, not the autoscaler, the bottleneck
// of a 5,000-node benchmark: binding 10,000 pods, or marking 5,000 unschedulable, one
// request each.
const (
	ClientQPS   = 500
	ClientBurst = 1000
)

// TokenUser is one line of the apiserver's static token file.
type TokenUser struct {
	Token  string
	Name   string
	UID    string
	Groups []string
}

// Options configures Start.
type Options struct {
	// Dir receives kubeconfig, token file and etcd data. A temp dir (removed by Stop) when empty.
	Dir string
	// ExtraTokens are more static-token identities, e.g. a least-privilege user for RBAC tests.
	ExtraTokens []TokenUser
	// LogOutput receives the component logs (etcd errors, apiserver, scheduler, controllers).
	// When set, the process-wide klog output is redirected there: the components log through
	// klog and would otherwise drown the caller's stderr. nil leaves klog alone.
	LogOutput io.Writer
	// NoScheduler and NoControllers leave those components out.
	NoScheduler   bool
	NoControllers bool
	// DisabledAPIs are group/versions the apiserver does not serve
	// (--runtime-config=<gv>=false), as on an older cluster: e.g.
	// resource.k8s.io/v1 before Kubernetes 1.34. The scheduler and
	// controllers of this version expect the APIs they watch: leave them out
	// when disabling one of those.
	DisabledAPIs []string
}

// Timings records how long each start-up step took.
type Timings struct {
	Etcd, APIServer, Scheduler, Controllers, Total time.Duration
}

// ControlPlane is a running control plane. Stop tears it down.
type ControlPlane struct {
	// Config is an admin client config (static token, system:masters).
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// KubeconfigPath is a kubeconfig file with the admin token, usable by kubectl.
	KubeconfigPath string
	// TokenFile is the apiserver's static token file.
	TokenFile string
	// Dir holds the files above.
	Dir string
	// URL is the apiserver's https URL on 127.0.0.1.
	URL string
	// Version is the Kubernetes version the apiserver reports at /version:
	// that of the k8s.io/kubernetes module it is built from.
	Version string
	Timings Timings

	adminToken string
	// schedulerClient is the scheduler's client config, as it built it from its flags.
	schedulerClient *rest.Config
	removeDir       bool
	tb              *hostTB
	etcd            *etcdServer
	apiServer       *kubeapiservertesting.TestServer
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	stopOnce        sync.Once
}

// AdminToken returns the bearer token of the admin user. Callers must not log it.
func (c *ControlPlane) AdminToken() string { return c.adminToken }

// Start brings up etcd, the apiserver and (unless disabled) the scheduler and controllers,
// and returns once the apiserver answers and the default namespace exists.
func Start(opts Options) (cp *ControlPlane, err error) {
	begin := time.Now()
	if opts.LogOutput != nil {
		redirectKlog(opts.LogOutput)
	}
	c := &ControlPlane{Dir: opts.Dir}
	if c.Dir == "" {
		dir, err := os.MkdirTemp("", "sandbox-controlplane-")
		if err != nil {
			return nil, err
		}
		c.Dir, c.removeDir = dir, true
	} else if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel

	t0 := time.Now()
	c.etcd, err = startEtcd(filepath.Join(c.Dir, "etcd"), opts.LogOutput)
	if err != nil {
		return c, fmt.Errorf("etcd: %w", err)
	}
	c.Timings.Etcd = time.Since(t0)
	klog.Infof("sandbox control plane: etcd ready at %s in %v", c.etcd.clientURL, c.Timings.Etcd)

	c.adminToken, err = randomToken()
	if err != nil {
		return c, err
	}
	users := append([]TokenUser{{Token: c.adminToken, Name: AdminUser, UID: "sandbox-admin-uid", Groups: []string{"system:masters"}}}, opts.ExtraTokens...)
	c.TokenFile = filepath.Join(c.Dir, "tokens.csv")
	if err := writeTokenFile(c.TokenFile, users); err != nil {
		return c, err
	}

	// Before the apiserver starts: it reads the version once, for /version.
	if c.Version, err = stampVersion(); err != nil {
		return c, err
	}

	t0 = time.Now()
	c.tb = newHostTB("sandbox-apiserver", opts.LogOutput)
	if err := c.startAPIServer(opts.DisabledAPIs); err != nil {
		return c, fmt.Errorf("kube-apiserver: %w", err)
	}
	c.Timings.APIServer = time.Since(t0)
	klog.Infof("sandbox control plane: kube-apiserver ready at %s in %v", c.URL, c.Timings.APIServer)

	if !opts.NoScheduler {
		t0 = time.Now()
		if err := c.startScheduler(ctx); err != nil {
			return c, fmt.Errorf("kube-scheduler: %w", err)
		}
		c.Timings.Scheduler = time.Since(t0)
		klog.Infof("sandbox control plane: kube-scheduler started in %v", c.Timings.Scheduler)
	}
	if !opts.NoControllers {
		t0 = time.Now()
		if err := c.startControllers(ctx); err != nil {
			return c, fmt.Errorf("controllers: %w", err)
		}
		c.Timings.Controllers = time.Since(t0)
		klog.Infof("sandbox control plane: controllers started in %v", c.Timings.Controllers)
	}
	c.Timings.Total = time.Since(begin)
	return c, nil
}

func (c *ControlPlane) startAPIServer(disabled []string) (err error) {
	// The helper reports some failures through Fatalf; turn those into errors.
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(errFatal)
			if !ok {
				panic(r)
			}
			err = errors.New(f.msg)
		}
	}()
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{c.etcd.clientURL}
	flags := []string{
		"--token-auth-file=" + c.TokenFile,
		"--authorization-mode=Node,RBAC",
		// No service-account token controller and no node lifecycle controller run here:
		// ServiceAccount admission would reject pods, TaintNodesByCondition would leave a
		// not-ready taint on every new Node forever.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--endpoint-reconciler-type=none",
	}
	for _, gv := range disabled {
		flags = append(flags, "--runtime-config="+gv+"=false")
	}
	instance := &kubeapiservertesting.TestServerInstanceOptions{EnableCertAuth: false, DisableInvariantChecks: true}
	server, err := kubeapiservertesting.StartTestServer(c.tb, instance, flags, storage)
	if err != nil {
		return err
	}
	c.apiServer = &server
	c.URL = server.ClientConfig.Host
	if !strings.HasPrefix(c.URL, "https://") {
		c.URL = "https://" + c.URL
	}
	caData, err := os.ReadFile(server.ServerOpts.SecureServing.ServerCert.CertKey.CertFile)
	if err != nil {
		return fmt.Errorf("read serving certificate: %w", err)
	}
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.URL, caData, c.adminToken); err != nil {
		return err
	}
	c.Config, err = clientcmd.BuildConfigFromFlags("", c.KubeconfigPath)
	if err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = ClientQPS, ClientBurst
	c.Client, err = kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	// Prove the token and CA written to the kubeconfig work before handing it out.
	if _, err := c.Client.CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("admin kubeconfig does not work: %w", err)
	}
	return nil
}

// UserConfig returns a client config for one of the ExtraTokens identities.
func (c *ControlPlane) UserConfig(token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = token
	return cfg
}

// EnsureNamespace creates ns when missing.
func (c *ControlPlane) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &apiv1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return err
	}
	return nil
}

// Stop tears everything down; safe to call more than once.
func (c *ControlPlane) Stop() {
	c.stopOnce.Do(func() {
		if c.cancel != nil {
			c.cancel()
		}
		c.wg.Wait()
		if c.apiServer != nil && c.apiServer.TearDownFn != nil {
			c.apiServer.TearDownFn()
		}
		if c.tb != nil {
			c.tb.runCleanups()
		}
		if c.etcd != nil {
			c.etcd.stop()
		}
		if c.removeDir {
			_ = os.RemoveAll(c.Dir)
		}
		klog.Infof("sandbox control plane stopped")
	})
}

// redirectKlog sends every klog line, errors included, to w instead of stderr.
func redirectKlog(w io.Writer) {
	fs := flag.NewFlagSet("sandbox-klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, value); err != nil {
			klog.Warningf("sandbox control plane: klog flag %s: %v", name, err)
		}
	}
	klog.SetOutput(w)
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func writeTokenFile(path string, users []TokenUser) error {
	var b strings.Builder
	for _, u := range users {
		if u.Token == "" || u.Name == "" {
			return fmt.Errorf("token user %q: token and name are required", u.Name)
		}
		uid := u.UID
		if uid == "" {
			uid = u.Name
		}
		fmt.Fprintf(&b, "%s,%s,%s", u.Token, u.Name, uid)
		if len(u.Groups) > 0 {
			fmt.Fprintf(&b, ",\"%s\"", strings.Join(u.Groups, ","))
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func writeKubeconfig(path, server string, caData []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: AdminUser, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = "sandbox"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
