package filelock_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/internal/filelock"
)

// A held lock keeps a second Lock waiting until its context ends, and is
// free again once released.
func TestLockExcludesUntilUnlocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock")
	unlock, err := filelock.Lock(t.Context(), path)
	if errors.Is(err, filelock.ErrUnsupported) {
		t.Skip("no file locks on this platform")
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the held lock must make the second Lock wait, and so see ctx end
	if u2, err := filelock.Lock(ctx, path); !errors.Is(err, context.Canceled) {
		if u2 != nil {
			u2()
		}
		t.Fatalf("second Lock while held: %v, want context.Canceled", err)
	}
	unlock()
	u3, err := filelock.Lock(t.Context(), path)
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	u3()
}
