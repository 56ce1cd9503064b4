//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package e2etest

import (
	"context"
	"errors"
)

// errNoLock reports that lockFile cannot lock on this platform.
var errNoLock = errors.New("no file locks on this platform")

// lockFile does not lock on this platform: BuildCommands then builds into
// each test's own directory.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	return nil, errNoLock
}
