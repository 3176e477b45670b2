// Package codepages unmaps the autoscaler's own code and read-only data once
// start-up is over.
//
// The binary's code, read-only data and function tables (43 MiB of the
// 45 MB binary) are mapped from the file and counted in the process's
// resident memory when touched. Start-up touches most of them: 376 package
// initializers, flag parsing, API scheme registration and the caches' first
// lists run code the loop never runs again, and the kernel maps the 64 KiB
// around each page read (fault-around). Unmapping them (MADV_DONTNEED) lets
// the loop map back only what it uses, from the page cache, on its next
// touch: a minor fault, no read from disk while the cache holds the file.
// The pages themselves stay in the page cache, clean and reclaimable. (On a
// private file mapping MADV_DONTNEED drops the process's view, and a later
// fault reads the file again: madvise(2). ld.lld releases its read-only
// input files the same way, LLVM D116366.)
//
// Only the segments no one writes are released: in a position-dependent
// executable (ELF type EXEC, what CGO_ENABLED=0 go build makes on Linux)
// they hold exactly the file's bytes. In a position-independent or
// dynamically linked one the loader may have written relocations into
// read-only data, which unmapping would undo, so Release refuses those.
package codepages

import "errors"

// ErrUnsupported: the executable is not one whose read-only segments can be
// unmapped safely, or the system has no such call.
var ErrUnsupported = errors.New("code pages: not a position-dependent Linux executable")

// Release unmaps the executable's read-only segments (code, read-only data,
// function tables) and returns how many bytes they span. What the process
// uses again is mapped back on its next touch.
func Release() (int64, error) { return release() }
