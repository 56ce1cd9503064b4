//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filelock

import "context"

// Lock cannot lock on this platform: it returns ErrUnsupported.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	return nil, ErrUnsupported
}
