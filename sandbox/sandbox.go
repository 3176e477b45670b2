// Package sandbox is a local DOKS cluster in one process: an in-process Kubernetes
// control plane (sandbox/controlplane), the DOKS API simulator (sandbox/doks) and a node
// agent (sandbox/nodeagent) that turns simulated droplets into Nodes. The autoscaler runs
// against it unchanged, with the kubeconfig and cloud-config files the sandbox writes.
// Only sandbox tooling, e2e tests, demos and benchmarks import it.
package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/digitalocean/godo"
	"golang.org/x/oauth2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/digitalocean/gpudriver"
	"github.com/doks-autoscaler/cluster-autoscaler/deploy/crds"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/controlplane"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/doks"
	"github.com/doks-autoscaler/cluster-autoscaler/sandbox/nodeagent"
)

// Defaults of Options.
const (
	DefaultBootDelay   = 2 * time.Second
	DefaultDeleteDelay = time.Second
	DefaultRegion      = doks.DefaultRegion
)

// Options configures Start.
type Options struct {
	// Dir receives kubeconfig, cloud-config, token and log files. A temp dir, removed by
	// Stop, when empty.
	Dir string
	// ClusterID of the simulated cluster; a random UUID when empty.
	ClusterID string
	// Region of the simulated nodes; DefaultRegion when empty.
	Region string
	// BootDelay is how long a new droplet provisions before it runs; DefaultBootDelay when 0.
	BootDelay time.Duration
	// DeleteDelay is how long a deleted droplet lingers; DefaultDeleteDelay when 0.
	DeleteDelay time.Duration
	// DropletLimit is the account's droplet limit the DOKS API enforces
	// (doks.DefaultDropletLimit on a new DigitalOcean account); 0: none.
	DropletLimit int
	// Pools are created before Start returns; their nodes are registered by then.
	Pools []doks.PoolSpec
	// LogOutput receives control-plane and sandbox logs (all of klog). When nil they go to
	// <Dir>/sandbox.log.
	LogOutput io.Writer
	// ExtraTokens are more apiserver identities (see controlplane.TokenUser).
	ExtraTokens []controlplane.TokenUser
	// Agent tunes the node agent; its Region is taken from Region. Agent.DRADrivers puts the
	// sandbox in DRA mode: Start installs each driver's DeviceClass, as DOKS's
	// nvidia_gpu_dra_driver / amd_gpu_dra_driver add-ons do through the drivers' charts, and
	// the agent publishes each GPU node's ResourceSlice.
	Agent nodeagent.Options
	// ControlPlane, when set, is used instead of starting one, so that many sandboxes (e2e
	// scenarios) share its start-up cost. Stop then leaves it running and deletes the Nodes
	// this sandbox registered, with their pods. LogOutput and ExtraTokens are ignored.
	ControlPlane *controlplane.ControlPlane
}

// Sandbox is a running local DOKS cluster.
type Sandbox struct {
	Dir       string
	ClusterID string
	// KubeconfigPath: admin kubeconfig for kubectl and --kubeconfig.
	KubeconfigPath string
	// CloudConfigPath: JSON for --cloud-config (cluster_id, token_file, url).
	CloudConfigPath string
	// TokenPath: the DigitalOcean API token file the cloud-config names.
	TokenPath string
	// LogPath is the log file when Options.LogOutput was nil.
	LogPath string

	ControlPlane *controlplane.ControlPlane
	Kube         kubernetes.Interface
	DOKS         *doks.Server
	Agent        *nodeagent.Agent

	doToken            string
	deviceClasses      []string // installed by this sandbox
	removeDir          bool
	sharedControlPlane bool
	logFile            *os.File
}

// CloudConfig is the --cloud-config JSON the sandbox writes.
type CloudConfig struct {
	ClusterID string `json:"cluster_id"`
	TokenFile string `json:"token_file"`
	URL       string `json:"url"`
}

// Start brings the sandbox up; on error everything started is stopped again.
func Start(opts Options) (sb *Sandbox, err error) {
	begin := time.Now()
	s := &Sandbox{Dir: opts.Dir, ClusterID: opts.ClusterID}
	if s.Dir == "" {
		dir, err := os.MkdirTemp("", "doks-sandbox-")
		if err != nil {
			return nil, err
		}
		s.Dir, s.removeDir = dir, true
	} else if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.ClusterID == "" {
		s.ClusterID = string(uuid.NewUUID())
	}
	logOut := opts.LogOutput
	if logOut == nil && opts.ControlPlane == nil {
		s.LogPath = filepath.Join(s.Dir, "sandbox.log")
		if s.logFile, err = os.Create(s.LogPath); err != nil {
			return s, err
		}
		logOut = s.logFile
	}

	if opts.ControlPlane != nil {
		s.ControlPlane, s.sharedControlPlane = opts.ControlPlane, true
	} else {
		s.ControlPlane, err = controlplane.Start(controlplane.Options{
			Dir: filepath.Join(s.Dir, "controlplane"), ExtraTokens: opts.ExtraTokens, LogOutput: logOut,
		})
		if err != nil {
			return s, err
		}
	}
	s.Kube = s.ControlPlane.Client
	s.KubeconfigPath = filepath.Join(s.Dir, "kubeconfig")
	if err := copyFile(s.ControlPlane.KubeconfigPath, s.KubeconfigPath); err != nil {
		return s, err
	}

	s.doToken = "sandbox-" + string(uuid.NewUUID())
	bootDelay, deleteDelay := opts.BootDelay, opts.DeleteDelay
	if bootDelay == 0 {
		bootDelay = DefaultBootDelay
	}
	if deleteDelay == 0 {
		deleteDelay = DefaultDeleteDelay
	}
	region := opts.Region
	if region == "" {
		region = DefaultRegion
	}
	s.DOKS = doks.NewServer(doks.Options{ClusterID: s.ClusterID, Token: s.doToken, BootDelay: bootDelay, DeleteDelay: deleteDelay, Region: region, DropletLimit: opts.DropletLimit})
	if err := s.DOKS.Start("127.0.0.1:0"); err != nil {
		return s, err
	}
	s.TokenPath = filepath.Join(s.Dir, "do-token")
	if err := os.WriteFile(s.TokenPath, []byte(s.doToken+"\n"), 0o600); err != nil {
		return s, err
	}
	s.CloudConfigPath = filepath.Join(s.Dir, "cloud-config.json")
	cc, _ := json.MarshalIndent(CloudConfig{ClusterID: s.ClusterID, TokenFile: s.TokenPath, URL: s.DOKS.URL()}, "", "  ")
	if err := os.WriteFile(s.CloudConfigPath, append(cc, '\n'), 0o600); err != nil {
		return s, err
	}

	if err := s.installCRDs(); err != nil {
		return s, err
	}
	if err := s.installDeviceClasses(opts.Agent.DRADrivers); err != nil {
		return s, err
	}
	agentOpts := opts.Agent
	agentOpts.Region = region
	s.Agent = nodeagent.New(s.Kube, s.DOKS, agentOpts)
	if err := s.Agent.Start(); err != nil {
		return s, err
	}
	for _, p := range opts.Pools {
		if _, err := s.CreatePool(p); err != nil {
			return s, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range opts.Pools {
		if err := s.WaitForNodes(ctx, p.Name, p.Count); err != nil {
			return s, err
		}
	}
	klog.Infof("sandbox: cluster %s up in %v (control plane %v), simulator at %s", s.ClusterID, time.Since(begin),
		s.ControlPlane.Timings.Total, s.DOKS.URL())
	return s, nil
}

// installCRDs creates deploy/crds' CustomResourceDefinitions (CapacityBuffers)
// and waits until they are served; a shared control plane has them already.
func (s *Sandbox) installCRDs() error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(s.ControlPlane.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, crd := range all {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

// installDeviceClasses creates the DeviceClass of each DRA driver, as its chart does.
func (s *Sandbox) installDeviceClasses(drivers []string) error {
	for _, d := range drivers {
		if d != gpudriver.NVIDIA && d != gpudriver.AMD {
			return fmt.Errorf("DRA driver %q: the sandbox plays %s and %s", d, gpudriver.NVIDIA, gpudriver.AMD)
		}
		_, err := s.Kube.ResourceV1().DeviceClasses().Create(context.Background(), gpudriver.DeviceClass(d), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("DeviceClass %s: %w", d, err)
		}
		s.deviceClasses = append(s.deviceClasses, d)
		klog.Infof("sandbox: DRA driver %s installed (DeviceClass %s)", d, d)
	}
	return nil
}

// uninstallDeviceClasses removes the DeviceClasses this sandbox installed from a shared
// control plane: the next sandbox there may run device plugins instead.
func (s *Sandbox) uninstallDeviceClasses() {
	for _, d := range s.deviceClasses {
		err := s.Kube.ResourceV1().DeviceClasses().Delete(context.Background(), d, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			klog.Warningf("sandbox: deleting DeviceClass %s: %v", d, err)
		}
	}
}

// CreatePool adds a node pool to the simulated cluster; its nodes register shortly after.
func (s *Sandbox) CreatePool(spec doks.PoolSpec) (godo.KubernetesNodePool, error) {
	p, err := s.DOKS.CreatePool(spec)
	if err != nil {
		return p, fmt.Errorf("pool %s: %w", spec.Name, err)
	}
	klog.Infof("sandbox: created pool %s (%s, %d × %s, autoscale %v [%d,%d])", p.Name, p.ID, p.Count, p.Size, p.AutoScale, p.MinNodes, p.MaxNodes)
	return p, nil
}

// Pool returns the simulator's view of the named pool.
func (s *Sandbox) Pool(name string) (godo.KubernetesNodePool, bool) {
	for _, p := range s.DOKS.Pools() {
		if p.Name == name {
			return p, true
		}
	}
	return godo.KubernetesNodePool{}, false
}

// RegisteredNodes counts the Nodes of a pool in the cluster.
func (s *Sandbox) RegisteredNodes(ctx context.Context, pool string) (int, error) {
	l, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeagent.LabelNodePool + "=" + pool})
	if err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

// WaitForNodes waits until the pool has exactly n registered Nodes.
func (s *Sandbox) WaitForNodes(ctx context.Context, pool string, n int) error {
	for {
		got, err := s.RegisteredNodes(ctx, pool)
		if err == nil && got == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool %s: %d nodes registered, want %d: %w", pool, got, n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// GodoClient is a DigitalOcean client for the simulator, for changing pools through the
// API the way a user would (auto_scale, min/max, count).
func (s *Sandbox) GodoClient() *godo.Client {
	hc := oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: s.doToken}))
	c, err := godo.New(hc, godo.SetBaseURL(s.DOKS.URL()), godo.SetUserAgent("doks-sandbox"))
	if err != nil {
		// Only a malformed base URL fails, and the simulator's own URL is well formed.
		panic(err)
	}
	return c
}

// AutoscalerArgs are the flags that point the production binary at this sandbox.
func (s *Sandbox) AutoscalerArgs() []string {
	return []string{
		"--cloud-provider=digitalocean",
		"--cloud-config=" + s.CloudConfigPath,
		"--kubeconfig=" + s.KubeconfigPath,
	}
}

// Stop tears the sandbox down: node agent, simulator, control plane.
func (s *Sandbox) Stop() {
	if s.Agent != nil {
		s.Agent.Stop()
	}
	if s.DOKS != nil {
		_ = s.DOKS.Close()
	}
	if s.ControlPlane != nil {
		if s.sharedControlPlane {
			s.removeNodes()
			s.uninstallDeviceClasses()
		} else {
			s.ControlPlane.Stop()
		}
	}
	if s.logFile != nil {
		_ = s.logFile.Close()
	}
	if s.removeDir {
		_ = os.RemoveAll(s.Dir)
	}
}

// removeNodes deletes the Nodes of this sandbox's pools, and their pods, from a shared
// control plane: with the agent gone nothing else would. The Nodes are found by pool ID
// as well as from the agent, because a registration cut short by Stop can leave a Node
// the agent never recorded.
func (s *Sandbox) removeNodes() {
	if s.Agent == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := map[string]bool{}
	for name := range s.Agent.Registered() {
		names[name] = true
	}
	if s.DOKS != nil {
		var ids []string
		for _, p := range s.DOKS.Pools() {
			ids = append(ids, p.ID)
		}
		if len(ids) > 0 {
			sel := nodeagent.LabelNodePoolID + " in (" + strings.Join(ids, ",") + ")"
			nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				klog.Warningf("sandbox: listing the nodes of its pools: %v", err)
			} else {
				for _, n := range nodes.Items {
					names[n.Name] = true
				}
			}
		}
	}
	zero := int64(0)
	for name := range names {
		if err := s.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			klog.Warningf("sandbox: deleting node %s: %v", name, err)
		}
		pods, err := s.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			klog.Warningf("sandbox: listing pods of node %s: %v", name, err)
			continue
		}
		for _, p := range pods.Items {
			_ = s.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		_ = s.Kube.CoordinationV1().Leases("kube-node-lease").Delete(ctx, name, metav1.DeleteOptions{})
		if len(s.deviceClasses) > 0 {
			_ = s.Kube.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
				metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		}
	}
}

// ParsePools reads pool specs of the form
//
//	name:size:count[:min-max][,name:size:count[:min-max]...]
//
// A pool with a min-max range is autoscaled; one without is not.
func ParsePools(spec string) ([]doks.PoolSpec, error) {
	var out []doks.PoolSpec
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) != 3 && len(parts) != 4 {
			return nil, fmt.Errorf("pool %q: want name:size:count or name:size:count:min-max", item)
		}
		p := doks.PoolSpec{Name: parts[0], Size: parts[1]}
		if p.Name == "" || p.Size == "" {
			return nil, fmt.Errorf("pool %q: name and size are required", item)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("pool %q: name used twice", p.Name)
		}
		seen[p.Name] = true
		if _, _, ok := doks.SizeResources(p.Size); !ok {
			return nil, fmt.Errorf("pool %q: unknown size %q", p.Name, p.Size)
		}
		var err error
		if p.Count, err = strconv.Atoi(parts[2]); err != nil || p.Count < 0 {
			return nil, fmt.Errorf("pool %q: count %q is not a non-negative number", p.Name, parts[2])
		}
		if len(parts) == 4 {
			lo, hi, ok := strings.Cut(parts[3], "-")
			if !ok {
				return nil, fmt.Errorf("pool %q: range %q is not min-max", p.Name, parts[3])
			}
			minN, err1 := strconv.Atoi(lo)
			maxN, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || minN < 0 || maxN < minN {
				return nil, fmt.Errorf("pool %q: range %q is not min-max with 0 <= min <= max", p.Name, parts[3])
			}
			if p.Count < minN || p.Count > maxN {
				return nil, fmt.Errorf("pool %q: count %d is outside %d-%d", p.Name, p.Count, minN, maxN)
			}
			p.AutoScale, p.MinNodes, p.MaxNodes = true, minN, maxN
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pools in %q", spec)
	}
	return out, nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}
