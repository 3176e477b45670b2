package codepages

import (
	"debug/elf"
	"fmt"
	"os"
	"syscall"
)

func release() (int64, error) {
	segs, err := readOnlySegments("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	var total int64
	for _, s := range segs {
		// The addresses are the process's own mappings, not Go memory: the
		// raw call takes them as they are.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, s.start, s.end-s.start, syscall.MADV_DONTNEED); errno != 0 {
			return total, fmt.Errorf("code pages: madvise %#x-%#x: %w", s.start, s.end, errno)
		}
		total += int64(s.end - s.start)
	}
	return total, nil
}

// segment is a page-aligned address range.
type segment struct{ start, end uintptr }

// readOnlySegments lists the whole pages of the loadable segments of the
// executable at path that are not writable, when it is a position-dependent
// executable (see the package doc).
func readOnlySegments(path string) ([]segment, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("code pages: %w", err)
	}
	defer f.Close()
	return segmentsOf(f, uintptr(os.Getpagesize()))
}

func segmentsOf(f *elf.File, page uintptr) ([]segment, error) {
	if f.Type != elf.ET_EXEC {
		return nil, fmt.Errorf("%w (ELF type %s)", ErrUnsupported, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return nil, fmt.Errorf("%w (dynamically linked)", ErrUnsupported)
		}
	}
	var out []segment
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_W != 0 || p.Memsz == 0 {
			continue
		}
		// Inward, so that no page shared with a writable segment is
		// released (Go's linker starts each segment on a page of its own).
		start := (uintptr(p.Vaddr) + page - 1) &^ (page - 1)
		end := uintptr(p.Vaddr+p.Memsz) &^ (page - 1)
		if end > start {
			out = append(out, segment{start: start, end: end})
		}
	}
	return out, nil
}
