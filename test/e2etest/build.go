package e2etest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/internal/filelock"
)

// Commands are the module's commands that BuildCommands builds: the
// product's four and the local stack's tools (what scripts/local.sh builds),
// and the simulation.
var Commands = []string{
	"cmd/orderworker", "cmd/orderproducer", "cmd/orderctl", "cmd/orderrelay",
	"test/paymentservice/cmd/paymentservice", "test/sbbroker/cmd/sbbroker", "test/e2etest/cmd/feedproxy",
	"test/simulate",
}

const modulePath = "github.com/idempotent-consumer/sbcosmos/"

// BuildCommands builds every command in Commands (among them orderworker,
// orderproducer, orderctl and orderrelay) as `go build -buildvcs=auto`
// builds them and returns a temporary directory holding them, named as the
// go command names them. The test fails if the build does.
//
// The build is shared: it goes to a directory under the user cache dir kept
// per module directory, where the go command relinks only the binaries whose
// inputs changed (it compares each file's build ID with the one it would
// build), under a lock file, so that parallel test processes build once and
// a warm `go test ./...` links none. The test's directory gets hard links
// (or copies) made under that lock, and the go command replaces a binary it
// rebuilds with a new file, so a test's binaries never change under it.
// Where there is no lock (or no cache dir), it builds into the test's
// directory as before.
func BuildCommands(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := buildShared(tb.Context(), dir); err != nil {
		if err != errNoSharedBuild {
			tb.Fatalf("building the binaries: %v", err)
		}
		if err := goBuild(tb.Context(), dir); err != nil {
			tb.Fatalf("building the binaries: %v", err)
		}
	}
	return dir
}

// errNoSharedBuild reports that this platform or environment has no shared
// build directory; the caller builds on its own.
var errNoSharedBuild = fmt.Errorf("no shared build directory")

// goBuild runs go build -buildvcs=auto -o dir for every command.
func goBuild(ctx context.Context, dir string) error {
	args := []string{"build", "-buildvcs=auto", "-o", dir}
	for _, c := range Commands {
		args = append(args, modulePath+c)
	}
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// buildShared brings the shared build up to date and links its binaries
// into dir, holding the lock throughout.
func buildShared(ctx context.Context, dir string) error {
	cache, err := os.UserCacheDir()
	if err != nil {
		return errNoSharedBuild
	}
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(gomod))))
	shared := filepath.Join(cache, "sbcosmos", "commands", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return errNoSharedBuild
	}
	unlock, err := filelock.Lock(ctx, filepath.Join(shared, ".lock"))
	if err != nil {
		if errors.Is(err, filelock.ErrUnsupported) {
			return errNoSharedBuild
		}
		return fmt.Errorf("lock %s: %w", shared, err)
	}
	defer unlock()
	// ok marks a build that finished: a build killed while the go command
	// wrote a binary may leave a partial file whose build ID still reads as
	// up to date, so without the mark the binaries are built afresh.
	bin, ok := filepath.Join(shared, "bin"), filepath.Join(shared, "ok")
	if _, err := os.Stat(ok); err != nil {
		if err := os.RemoveAll(bin); err != nil {
			return err
		}
	} else if err := os.Remove(ok); err != nil {
		return err
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if err := goBuild(ctx, bin); err != nil {
		return err
	}
	if err := os.WriteFile(ok, nil, 0o644); err != nil {
		return err
	}
	entries, err := os.ReadDir(bin)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := linkOrCopy(filepath.Join(bin, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// linkOrCopy hard-links src to dst, or copies it where it cannot.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
