package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The memory figures beyond VmRSS (issue 44): what the kubelet, metrics-server and the
// VPA read of a container is its memory cgroup's working set (usage less inactive file
// pages), what the OOM killer weighs is anonymous memory, and what the autoscaler's own
// code decides is the Go heap. For each autoscaler process the bench starts
// (startAutoscaler), it reads:
//
//   - anonymous memory: /proc/<pid>/smaps_rollup's Anonymous;
//   - the Go heap after a collection: HeapInuse and HeapAlloc of
//     /debug/pprof/heap?gc=1&debug=1 (every build runs with --profiling), read after the
//     window's CPU and memory, since the collection it forces is not the loop's;
//   - with a memory cgroup of the bench's own (cgroup v1's memory hierarchy, or a v2
//     hierarchy with the memory controller), the working set: the process runs in a
//     child cgroup made for it, from a copy of its binary whose page cache was dropped
//     first, so that the binary's pages it touches are charged to that cgroup as in a
//     container whose image the node has not cached.

var (
	// caArgs: extra flags for this project's autoscaler in the figures, --large and --dra
	// runs (not --upstream-binary's), e.g. --ca-args=--consolidation-enabled.
	caArgs = flag.String("ca-args", "", "extra autoscaler flags, space-separated, for this project's binary (and --also-binary's, not --upstream-binary's) in the figures, --large and --dra runs, e.g. --ca-args=--consolidation-enabled")
	// useCgroup: run each autoscaler in a memory cgroup of its own when the machine allows.
	useCgroup = flag.Bool("memory-cgroup", true, "run each autoscaler of the figures, --large and --dra runs in a memory cgroup of its own (when this machine allows one) and report its working set")
)

// extraArgs are the --ca-args flags, for a build other than upstream's.
func extraArgs(c config) []string {
	if c.upstream != "" && c.binary == c.upstream {
		return nil
	}
	return strings.Fields(*caArgs)
}

// cgroupMem is a memory cgroup's figures, in bytes: usage (v1 memory.usage_in_bytes, v2
// memory.current), its inactive and active file pages and anonymous memory (memory.stat).
type cgroupMem struct {
	usage, inactiveFile, activeFile, anon int64
}

// workingSet is usage less inactive file pages, as cAdvisor computes it for the kubelet.
func (m cgroupMem) workingSet() int64 { return max(0, m.usage-m.inactiveFile) }

// parseMemoryStat reads a memory.stat file: v1's hierarchical total_* fields when present
// (total_rss, total_inactive_file, total_active_file), else v2's (anon, inactive_file,
// active_file).
func parseMemoryStat(text string) cgroupMem {
	v := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			v[f[0]] = n
		}
	}
	if _, ok := v["total_inactive_file"]; ok {
		return cgroupMem{inactiveFile: v["total_inactive_file"], activeFile: v["total_active_file"], anon: v["total_rss"]}
	}
	return cgroupMem{inactiveFile: v["inactive_file"], activeFile: v["active_file"], anon: v["anon"]}
}

// memCgroup is one child memory cgroup made for one autoscaler process.
type memCgroup struct {
	dir string
	v2  bool
}

// read returns the cgroup's figures; zero when it cannot be read.
func (g *memCgroup) read() cgroupMem {
	usageFile := "memory.usage_in_bytes"
	if g.v2 {
		usageFile = "memory.current"
	}
	st, err := os.ReadFile(filepath.Join(g.dir, "memory.stat"))
	if err != nil {
		return cgroupMem{}
	}
	u, err := os.ReadFile(filepath.Join(g.dir, usageFile))
	if err != nil {
		return cgroupMem{}
	}
	m := parseMemoryStat(string(st))
	m.usage, _ = strconv.ParseInt(strings.TrimSpace(string(u)), 10, 64)
	return m
}

// ownMemoryCgroup finds this process's memory cgroup from /proc/self/cgroup's text: the
// directory where children of it are made, and whether it is cgroup v2's.
func ownMemoryCgroup(procCgroup string) (dir string, v2 bool, err error) {
	var unified string
	for _, line := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2]), false, nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	if unified == "" {
		return "", false, errors.New("no memory cgroup in /proc/self/cgroup")
	}
	return filepath.Join("/sys/fs/cgroup", unified), true, nil
}

var (
	cgroupOnce   sync.Once
	cgroupParent string
	cgroupV2     bool
	cgroupErr    error // why the machine allows no memory cgroup of the bench's own
	cgroupsMu    sync.Mutex
	cgroupsByPID = map[int]*memCgroup{}
	cgroupSeq    int
)

// memoryCgroupParent is where the bench makes its cgroups, once checked; err says why
// it cannot.
func memoryCgroupParent() (string, bool, error) {
	cgroupOnce.Do(func() {
		b, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			cgroupErr = err
			return
		}
		cgroupParent, cgroupV2, cgroupErr = ownMemoryCgroup(string(b))
		if cgroupErr != nil || !cgroupV2 {
			return
		}
		// v2: children have memory files only when this cgroup's subtree has the
		// controller; a cgroup that holds processes (this one) cannot enable it
		// (no internal processes), so the parent of this one is tried instead.
		if _, err := os.Stat(filepath.Join(cgroupParent, "memory.current")); err != nil && cgroupParent != "/sys/fs/cgroup" {
			cgroupErr = fmt.Errorf("cgroup v2 without the memory controller at %s", cgroupParent)
			return
		}
		if err := os.WriteFile(filepath.Join(cgroupParent, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
			cgroupErr = fmt.Errorf("cgroup v2: enabling memory for children of %s: %w", cgroupParent, err)
		}
	})
	return cgroupParent, cgroupV2, cgroupErr
}

// newMemCgroup makes a child memory cgroup for one process.
func newMemCgroup(name string) (*memCgroup, error) {
	parent, v2, err := memoryCgroupParent()
	if err != nil {
		return nil, err
	}
	cgroupsMu.Lock()
	cgroupSeq++
	dir := filepath.Join(parent, fmt.Sprintf("ca-bench-%d-%d-%s", os.Getpid(), cgroupSeq, name))
	cgroupsMu.Unlock()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	g := &memCgroup{dir: dir, v2: v2}
	if _, err := os.Stat(filepath.Join(dir, "memory.stat")); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("%s has no memory.stat: %w", dir, err)
	}
	return g, nil
}

// cgroupOf is the memory cgroup the bench made for process pid, nil when none.
func cgroupOf(pid int) *memCgroup {
	cgroupsMu.Lock()
	defer cgroupsMu.Unlock()
	return cgroupsByPID[pid]
}

// freshCopy copies binary into dir and drops the copy's page cache, so that the pages
// the process started from it touches are read again and charged to its cgroup.
func freshCopy(binary, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	in, err := os.Open(binary)
	if err != nil {
		return "", err
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(binary))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return "", err
	}
	const fadvDontNeed = 4 // POSIX_FADV_DONTNEED
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, out.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		out.Close()
		return "", fmt.Errorf("fadvise %s: %w", dst, errno)
	}
	return dst, out.Close()
}

// inCgroup returns the command that runs binary with args inside g: a shell that moves
// itself into g and then execs the binary, so that the process (the same pid) is charged
// there from its first page.
func inCgroup(g *memCgroup, binary string, args []string) (string, []string) {
	return "/bin/sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, g.dir, binary}, args...)
}

// registerCgroup records g as pid's and removes it (and the binary's copy) once done
// is closed.
func registerCgroup(pid int, g *memCgroup, done <-chan struct{}, copyDir string) {
	cgroupsMu.Lock()
	cgroupsByPID[pid] = g
	cgroupsMu.Unlock()
	go func() {
		<-done
		cgroupsMu.Lock()
		delete(cgroupsByPID, pid)
		cgroupsMu.Unlock()
		// An empty cgroup can go; its page cache charges move to the parent.
		for i := 0; i < 50 && os.Remove(g.dir) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		os.RemoveAll(copyDir)
	}()
}

// parseSmapsRollup reads Anonymous (and Rss) from /proc/<pid>/smaps_rollup, in bytes.
func parseSmapsRollup(text string) (anon, rss int64) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Anonymous:":
			anon = kb << 10
		case "Rss:":
			rss = kb << 10
		}
	}
	return anon, rss
}

// smapsAnon is a process's anonymous memory from smaps_rollup; 0 when unreadable.
func smapsAnon(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	anon, _ := parseSmapsRollup(string(b))
	return anon
}

// goHeap is the Go heap as a collection leaves it: HeapInuse (spans holding objects)
// and HeapAlloc (the objects themselves), in bytes.
type goHeap struct{ inuse, alloc int64 }

// parseHeapProfileText reads the runtime.MemStats lines a debug=1 heap profile ends
// with ("# HeapInuse = 123").
func parseHeapProfileText(r io.Reader) (goHeap, error) {
	var h goHeap
	found := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "HeapInuse":
			h.inuse, found = n, found+1
		case "HeapAlloc":
			h.alloc, found = n, found+1
		}
	}
	if err := sc.Err(); err != nil {
		return h, err
	}
	if found < 2 {
		return h, errors.New("no HeapInuse and HeapAlloc in the heap profile")
	}
	return h, nil
}

// heapAfterGC forces a collection in the autoscaler at addr (--profiling) and returns its
// heap right after it.
func heapAfterGC(addr string) (goHeap, error) {
	client := http.Client{Timeout: time.Minute}
	resp, err := client.Get("http://" + addr + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return goHeap{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return goHeap{}, fmt.Errorf("/debug/pprof/heap: %s", resp.Status)
	}
	return parseHeapProfileText(resp.Body)
}

var (
	cgroupNoteMu sync.Mutex
	cgroupWhyNot string
)

// cgroupNote records why an autoscaler runs without a memory cgroup of its own.
func cgroupNote(err error) {
	cgroupNoteMu.Lock()
	defer cgroupNoteMu.Unlock()
	if cgroupWhyNot == "" {
		cgroupWhyNot = err.Error()
		fmt.Fprintln(os.Stderr, "bench: no memory cgroup of the bench's own, so no working set:", err)
	}
}

// cgroupReason is why the working set was not measured ("" when nothing failed).
func cgroupReason() string {
	cgroupNoteMu.Lock()
	defer cgroupNoteMu.Unlock()
	return cgroupWhyNot
}
