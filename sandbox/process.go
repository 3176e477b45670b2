package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a run of the cluster-autoscaler binary against a sandbox.
type Process struct {
	Cmd     *exec.Cmd
	LogPath string
	done    chan struct{}
	err     error
}

// BuildAutoscaler compiles the production binary from the repository at root into out.
func BuildAutoscaler(root, out string) error {
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, b)
	}
	return nil
}

// AutoscalerBinary is the binary the drivers (demo, bench) run: $CA_BINARY
// when set, else one built from the repository in the working directory into
// dir/cluster-autoscaler. announce is called just before building, which
// takes a while on a cold cache.
func AutoscalerBinary(dir string, announce func()) (string, error) {
	if b := os.Getenv("CA_BINARY"); b != "" {
		return b, nil
	}
	b := filepath.Join(dir, "cluster-autoscaler")
	announce()
	if err := BuildAutoscaler(".", b); err != nil {
		return "", err
	}
	return b, nil
}

// RunAutoscaler starts binary with args, its stdout and stderr going to logPath.
func RunAutoscaler(binary string, args []string, logPath string) (*Process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	p := &Process{Cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Err is the exit error once the process has ended (nil for a clean exit).
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Done is closed when the process exits.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill ends the process at once (SIGKILL), as a crash would, and waits for it.
func (p *Process) Kill() {
	if p.Running() {
		_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// Stop asks for a clean shutdown (SIGTERM) and kills the process after timeout.
func (p *Process) Stop(timeout time.Duration) {
	if !p.Running() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
	}
}
