//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filelock

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// Lock takes an exclusive advisory lock on the file at path, creating it
// if needed, and returns the function that releases it. The operating system
// releases the lock if the process dies, so a crashed build never leaves a
// stale lock behind. It polls, so that ctx can end the wait.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}
