package main

import (
	"bytes"
	"debug/elf"
	"fmt"
)

// elfArch names the GOARCH an ELF binary was built for, from its header's
// machine field.
func elfArch(bin []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_S390:
		return "s390x", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	}
	return "", fmt.Errorf("ELF machine %s is not one this tool builds for", f.Machine)
}
