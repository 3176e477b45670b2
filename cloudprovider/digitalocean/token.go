package digitalocean

import (
	"errors"
	"fmt"
	"io/fs"
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
	// problem is the warning last logged about the file, "" while it is fine.
	problem string
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
		return nil, fmt.Errorf("failed to read token file %s: %v", showPath(path), pathless(statErr))
	}
	s.token, s.info = token, info
	return s, nil
}

// readTokenFile reads and checks the token. Errors show the path only when
// it looks like one (see showPath), never the content.
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("failed to read token file %s: %v", showPath(path), pathless(err))
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", showPath(path))
	}
	if err := checkToken(token); err != nil {
		return "", fmt.Errorf("token file %s: %w", showPath(path), err)
	}
	return token, nil
}

// pathless drops the path an *fs.PathError carries (it may be a token in
// the wrong field); the caller names the file.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// Token implements oauth2.TokenSource. The returned token has no expiry:
// the HTTP transport asks again on every request, which is what makes a
// rotation take effect from the next request.
func (s *fileTokenSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, err := os.Stat(s.path)
	switch {
	case err != nil:
		s.problemLocked(fmt.Sprintf("DigitalOcean token file %s: %v; keeping the token read before", showPath(s.path), pathless(err)))
	case !sameVersion(info, s.info):
		token, rerr := readTokenFile(s.path)
		if rerr != nil {
			s.problemLocked(fmt.Sprintf("DigitalOcean token file changed but cannot be used (%v); keeping the token read before", rerr))
			break
		}
		if token != s.token {
			klog.InfoS("DigitalOcean token file changed: using the new token from the next request", "path", showPath(s.path))
		} else if s.problem != "" {
			klog.InfoS("DigitalOcean token file is usable again", "path", showPath(s.path))
		}
		s.token, s.info, s.problem = token, info, ""
	default:
		if s.problem != "" {
			klog.InfoS("DigitalOcean token file is usable again", "path", showPath(s.path))
			s.problem = ""
		}
	}
	return &oauth2.Token{AccessToken: s.token, TokenType: "Bearer"}, nil
}

// problemLocked logs a problem with the file once, not on every request:
// again only when it changes.
func (s *fileTokenSource) problemLocked(msg string) {
	if msg != s.problem {
		klog.ErrorS(nil, "DigitalOcean token file unusable", "problem", msg)
		s.problem = msg
	}
}

func sameVersion(a, b os.FileInfo) bool {
	return b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
