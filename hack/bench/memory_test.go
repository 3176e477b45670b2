package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseMemoryStat(t *testing.T) {
	// cgroup v1 (this machine's): the hierarchical total_* fields count the children too.
	v1 := "cache 4096\nrss 8192\nmapped_file 4096\ninactive_anon 0\nactive_anon 8192\ninactive_file 1024\nactive_file 3072\n" +
		"total_cache 31457280\ntotal_rss 41943040\ntotal_inactive_file 20971520\ntotal_active_file 10485760\n"
	if got, want := parseMemoryStat(v1), (cgroupMem{inactiveFile: 20 << 20, activeFile: 10 << 20, anon: 40 << 20}); got != want {
		t.Errorf("v1: %+v, want %+v", got, want)
	}
	v2 := "anon 41943040\nfile 31457280\nkernel 1048576\nactive_anon 41943040\ninactive_anon 0\nactive_file 10485760\ninactive_file 20971520\nworkingset_refault_file 0\n"
	got := parseMemoryStat(v2)
	if want := (cgroupMem{inactiveFile: 20 << 20, activeFile: 10 << 20, anon: 40 << 20}); got != want {
		t.Errorf("v2: %+v, want %+v", got, want)
	}
	got.usage = 75 << 20
	if ws := got.workingSet(); ws != 55<<20 {
		t.Errorf("working set %d, want usage 75 MiB less inactive_file 20 MiB", ws)
	}
	if ws := (cgroupMem{usage: 1 << 20, inactiveFile: 2 << 20}).workingSet(); ws != 0 {
		t.Errorf("working set %d below zero, want 0 (cAdvisor clamps)", ws)
	}
}

func TestParseSmapsRollup(t *testing.T) {
	text := `00400000-7ffd5d5fe000 ---p 00000000 00:00 0                          [rollup]
Rss:               67584 kB
Pss:               66000 kB
Pss_Anon:          40000 kB
Pss_File:          26000 kB
Shared_Clean:       1584 kB
Anonymous:         40960 kB
LazyFree:              0 kB
AnonHugePages:      2048 kB
Swap:                  0 kB
`
	anon, rss := parseSmapsRollup(text)
	if anon != 40<<20 || rss != 66<<20 {
		t.Errorf("anonymous %d, rss %d; want 40 MiB and 66 MiB", anon, rss)
	}
	// This process's own, read as the bench reads the autoscaler's.
	if a := smapsAnon(os.Getpid()); a <= 0 {
		t.Errorf("own anonymous memory %d", a)
	}
}

func TestParseHeapProfileText(t *testing.T) {
	text := `heap profile: 3: 3072 [9: 9216] @ heap/1048576
1: 1024 [1: 1024] @ 0x1 0x2

# runtime.MemStats
# Alloc = 15000000
# TotalAlloc = 900000000
# HeapAlloc = 14680064
# HeapSys = 40000000
# HeapInuse = 20971520
# NumGC = 33
`
	h, err := parseHeapProfileText(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if h.inuse != 20<<20 || h.alloc != 14<<20 {
		t.Errorf("%+v, want HeapInuse 20 MiB and HeapAlloc 14 MiB", h)
	}
	if _, err := parseHeapProfileText(strings.NewReader("heap profile: 0: 0 [0: 0] @ heap/1\n")); err == nil {
		t.Error("a profile without MemStats gave no error")
	}
}

func TestOwnMemoryCgroup(t *testing.T) {
	v1 := "9:name=systemd:/\n4:memory:/process_api/a891\n1:cpu:/\n0::/\n"
	if dir, v2, err := ownMemoryCgroup(v1); err != nil || v2 || dir != "/sys/fs/cgroup/memory/process_api/a891" {
		t.Errorf("v1: %q %v %v", dir, v2, err)
	}
	if dir, v2, err := ownMemoryCgroup("4:cpuacct,memory:/x\n"); err != nil || v2 || dir != "/sys/fs/cgroup/memory/x" {
		t.Errorf("co-mounted v1: %q %v %v", dir, v2, err)
	}
	if dir, v2, err := ownMemoryCgroup("0::/user.slice/bench.scope\n"); err != nil || !v2 || dir != "/sys/fs/cgroup/user.slice/bench.scope" {
		t.Errorf("v2: %q %v %v", dir, v2, err)
	}
	if _, _, err := ownMemoryCgroup("1:cpu:/\n"); err == nil {
		t.Error("no memory line and no v2 line: no error")
	}
}

// The wrapper moves itself into the cgroup and then execs the binary: the same pid.
func TestInCgroup(t *testing.T) {
	dir := t.TempDir()
	g := &memCgroup{dir: dir}
	name, args := inCgroup(g, "/bin/sh", []string{"-c", "echo $$"})
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(procs)) != strings.TrimSpace(string(out)) {
		t.Errorf("cgroup.procs %q, the binary ran as pid %q", procs, out)
	}
	if _, err := strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
		t.Errorf("binary printed %q", out)
	}
}

func TestFreshCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ca")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho ok\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dst, err := freshCopy(src, filepath.Join(t.TempDir(), "copy"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(dst).Output(); err != nil || string(out) != "ok\n" {
		t.Errorf("the copy ran: %q %v", out, err)
	}
}

func TestExtraArgs(t *testing.T) {
	old := *caArgs
	defer func() { *caArgs = old }()
	*caArgs = "--consolidation-enabled  --consolidation-max-disrupted-nodes=3"
	c := config{binary: "/bin/ours", upstream: "/bin/upstream"}
	if got := extraArgs(c); len(got) != 2 || got[0] != "--consolidation-enabled" {
		t.Errorf("ours: %q", got)
	}
	c.binary = c.upstream
	if got := extraArgs(c); got != nil {
		t.Errorf("upstream's run got %q", got)
	}
}

// Where this machine allows it, a process run in a cgroup of the bench's is charged there.
func TestMemCgroupCharges(t *testing.T) {
	g, err := newMemCgroup("test")
	if err != nil {
		t.Skipf("no memory cgroup of the bench's own here: %v", err)
	}
	defer os.Remove(g.dir)
	// 16 MiB of anonymous memory held while the cgroup is read.
	name, args := inCgroup(g, "/bin/sh", []string{"-c", `x=$(head -c 16777216 /dev/zero | tr '\0' a); echo ready; read _`})
	cmd := exec.Command(name, args...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil {
		t.Fatal(err)
	}
	m := g.read()
	stdin.Close()
	cmd.Wait()
	if m.usage < 16<<20 || m.anon < 16<<20 || m.workingSet() < 16<<20 {
		t.Errorf("cgroup %+v: want the 16 MiB the shell holds charged", m)
	}
}
