//go:build !linux

package codepages

func release() (int64, error) { return 0, ErrUnsupported }
