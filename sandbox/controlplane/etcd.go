package controlplane

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type etcdServer struct {
	e         *embed.Etcd
	clientURL string
	dir       string
}

// startEtcd runs a single-member etcd on two free loopback ports with data in dir.
// The ports are found by binding :0 and releasing them, so another process could take
// one in between; a few attempts cover that race.
func startEtcd(dir string, logOut io.Writer) (*etcdServer, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := tryStartEtcd(dir, logOut)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func tryStartEtcd(dir string, logOut io.Writer) (*etcdServer, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "sandbox"
	cfg.Dir = dir
	// A throwaway single-member store: durability is not worth the fsync latency.
	cfg.UnsafeNoFsync = true
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ListenMetricsUrls = nil
	// Errors only: etcd is chatty, and its shutdown reports closed listeners as errors.
	var sink zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	if logOut != nil {
		sink = zapcore.AddSync(logOut)
	}
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), sink, zapcore.ErrorLevel))
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger.Named("sandbox-etcd"))

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd failed while starting: %v", err)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcd did not become ready within 60s")
	}
	return &etcdServer{e: e, clientURL: clientURL.String(), dir: dir}, nil
}

func (s *etcdServer) stop() {
	s.e.Close()
	_ = os.RemoveAll(s.dir)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
