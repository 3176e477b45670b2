package digitalocean

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/oauth2"
	"k8s.io/klog/v2"
)

// fileTokenSource serves the token held in a file and picks up a new one
// when the file changes (a rotated Secret: the kubelet swaps a symlink, an
// operator rewrites the file). Each Token call costs one stat; the file is
// read only when its identity, size or modification time changed. A
// rotation that leaves the file unreadable or empty keeps the previous
// token, with a warning, so a half-written file does not break requests.
type fileTokenSource struct {
	path string

	mu    sync.Mutex
	token string
	info  os.FileInfo
}

func newFileTokenSource(path string) (*fileTokenSource, error) {
	s := &fileTokenSource{path: path}
	// Stat first: a rotation between the two leaves the newer file's stat
	// with the older token, which the next Token call would never replace.
	info, statErr := os.Stat(path)
	token, err := readTokenFile(path)
	if err != nil {
		return nil, err
	}
	if statErr != nil {
		return nil, fmt.Errorf("failed to read token file: %w", statErr)
	}
	s.token, s.info = token, info
	return s, nil
}

func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("failed to read token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("token file %q is empty", path)
	}
	return token, nil
}

// Token implements oauth2.TokenSource. The returned token has no expiry:
// the HTTP transport asks again on every request, which is what makes a
// rotation take effect from the next request.
func (s *fileTokenSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, err := os.Stat(s.path)
	if err != nil {
		klog.Warningf("DigitalOcean token file %s: %v; keeping the token read before", s.path, err)
	} else if !sameVersion(info, s.info) {
		token, rerr := readTokenFile(s.path)
		if rerr != nil {
			klog.Warningf("DigitalOcean token file changed but cannot be used (%v); keeping the token read before", rerr)
		} else {
			if token != s.token {
				klog.Infof("DigitalOcean token file %s changed: using the new token from the next request", s.path)
			}
			s.token = token
			s.info = info
		}
	}
	return &oauth2.Token{AccessToken: s.token, TokenType: "Bearer"}, nil
}

func sameVersion(a, b os.FileInfo) bool {
	return b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
