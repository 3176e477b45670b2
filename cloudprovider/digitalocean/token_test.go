package digitalocean

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFileTokenSourceFollowsChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first\n")
	src, err := newFileTokenSource(path)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		write string // "" = leave the file alone; "-" = remove it
		want  string
	}{
		{"", "first"},
		{"second-token", "second-token"}, // rewritten in place, other size
		{"second-tokem", "second-tokem"}, // same size, newer mtime
		{"   \n", "second-tokem"},        // emptied: keep the last good token
		{"-", "second-tokem"},            // removed: keep it too
		{"third\n", "third"},
	}
	for i, s := range steps {
		switch s.write {
		case "":
		case "-":
			os.Remove(path)
		default:
			write(s.write)
			// Make the change visible even on file systems with coarse mtimes.
			future := time.Now().Add(time.Duration(i+1) * time.Second)
			os.Chtimes(path, future, future)
		}
		tok, err := src.Token()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if tok.AccessToken != s.want {
			t.Errorf("step %d: token %q, want %q", i, tok.AccessToken, s.want)
		}
		if !tok.Expiry.IsZero() {
			t.Errorf("step %d: token has an expiry", i)
		}
	}
}
