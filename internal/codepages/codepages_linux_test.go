package codepages

import (
	"debug/elf"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestSegmentsOf(t *testing.T) {
	const page = 0x1000
	load := func(flags elf.ProgFlag, vaddr, memsz uint64) *elf.Prog {
		return &elf.Prog{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: flags, Vaddr: vaddr, Memsz: memsz}}
	}
	goBinary := []*elf.Prog{ // the layout of this project's binary
		{ProgHeader: elf.ProgHeader{Type: elf.PT_PHDR, Flags: elf.PF_R, Vaddr: 0x400040, Memsz: 0x150}},
		load(elf.PF_R|elf.PF_X, 0x400000, 0x1408cb1),
		load(elf.PF_R, 0x1809000, 0x16ecc48),
		load(elf.PF_R|elf.PF_W, 0x2ef6000, 0x20faa40),
	}
	for _, tc := range []struct {
		name  string
		typ   elf.Type
		progs []*elf.Prog
		want  []segment
		err   bool
	}{
		{name: "static executable: code and read-only data, whole pages, not the writable data",
			typ: elf.ET_EXEC, progs: goBinary,
			want: []segment{{0x400000, 0x1808000}, {0x1809000, 0x2ef5000}}},
		{name: "a segment within one page releases nothing", typ: elf.ET_EXEC,
			progs: []*elf.Prog{load(elf.PF_R, 0x1000100, 0x200)}},
		{name: "position-independent: relocations may sit in read-only data", typ: elf.ET_DYN, progs: goBinary, err: true},
		{name: "dynamically linked", typ: elf.ET_EXEC, err: true, progs: append([]*elf.Prog{
			{ProgHeader: elf.ProgHeader{Type: elf.PT_INTERP, Flags: elf.PF_R}}}, goBinary...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &elf.File{FileHeader: elf.FileHeader{Type: tc.typ}, Progs: tc.progs}
			got, err := segmentsOf(f, page)
			if tc.err {
				if !errors.Is(err, ErrUnsupported) {
					t.Fatalf("segments %x, error %v; want ErrUnsupported", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("segments %x, want %x", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("segment %d %x, want %x", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// rssFile is the process's resident file-backed memory (RssFile), in KiB.
func rssFile(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssFile:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// The test binary is released as the autoscaler is: its resident file pages
// fall, and it goes on running code and reading constants it had unmapped.
func TestReleaseOwnBinary(t *testing.T) {
	before := rssFile(t)
	n, err := Release()
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("this test binary cannot be released: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if n <= 0 || after >= before {
		t.Errorf("released %d bytes: RssFile %d KiB before, %d KiB after; want it lower", n, before, after)
	}
	t.Logf("released %d MiB of segments: RssFile %d KiB before, %d KiB after", n>>20, before, after)
	if re := regexp.MustCompile(`^v(\d+)\.(\d+)$`); re.FindStringSubmatch("v1.36")[2] != "36" {
		t.Error("code and data read after the release gave a wrong answer")
	}
}
