package controlplane

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// hostTB lets the kube-apiserver test-server helper, which wants a testing.TB-like
// value, run inside an ordinary program. It never implements testing.TB itself, so the
// helper does not install its own SIGINT handling; cleanups run when Stop is called.
type hostTB struct {
	name string
	out  io.Writer

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	errs     []string
}

// errFatal is the panic value of Fatal/FailNow; startAPIServer recovers it.
type errFatal struct{ msg string }

func newHostTB(name string, out io.Writer) *hostTB {
	if out == nil {
		out = io.Discard
	}
	return &hostTB{name: name, out: out}
}

func (h *hostTB) Attr(key, value string) { h.Logf("attr %s=%s", key, value) }
func (h *hostTB) Chdir(dir string)       { h.Errorf("Chdir(%q) is not supported outside tests", dir) }
func (h *hostTB) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}
func (h *hostTB) Error(args ...any) { h.record(fmt.Sprint(args...)) }
func (h *hostTB) Errorf(format string, args ...any) {
	h.record(fmt.Sprintf(format, args...))
}
func (h *hostTB) Fail() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = true
}
func (h *hostTB) FailNow() { h.Fail(); panic(errFatal{msg: "FailNow"}) }
func (h *hostTB) Failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}
func (h *hostTB) Fatal(args ...any) {
	msg := fmt.Sprint(args...)
	h.record(msg)
	panic(errFatal{msg: msg})
}
func (h *hostTB) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.record(msg)
	panic(errFatal{msg: msg})
}
func (h *hostTB) Helper()         {}
func (h *hostTB) Log(args ...any) { fmt.Fprintln(h.out, args...) }
func (h *hostTB) Logf(f string, args ...any) {
	fmt.Fprintf(h.out, f+"\n", args...)
}
func (h *hostTB) Name() string { return h.name }
func (h *hostTB) Setenv(key, value string) {
	if err := os.Setenv(key, value); err != nil {
		h.Errorf("setenv %s: %v", key, err)
	}
}
func (h *hostTB) Skip(args ...any)                 { h.Fatal(args...) }
func (h *hostTB) Skipf(format string, args ...any) { h.Fatalf(format, args...) }
func (h *hostTB) SkipNow()                         { h.FailNow() }
func (h *hostTB) Skipped() bool                    { return false }
func (h *hostTB) TempDir() string {
	dir, err := os.MkdirTemp("", "sandbox-"+h.name)
	if err != nil {
		h.Fatalf("temp dir: %v", err)
	}
	h.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (h *hostTB) record(msg string) {
	h.mu.Lock()
	h.failed = true
	h.errs = append(h.errs, msg)
	h.mu.Unlock()
	fmt.Fprintln(h.out, "ERROR:", msg)
}

// errors returns the messages passed to Error/Fatal so far.
func (h *hostTB) errors() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.errs...)
}

// runCleanups runs registered cleanups last-in first-out, like testing does.
func (h *hostTB) runCleanups() {
	for {
		h.mu.Lock()
		if len(h.cleanups) == 0 {
			h.mu.Unlock()
			return
		}
		f := h.cleanups[len(h.cleanups)-1]
		h.cleanups = h.cleanups[:len(h.cleanups)-1]
		h.mu.Unlock()
		f()
	}
}
