package cosmiumtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/internal/filelock"
)

// BinaryEnv names the environment variable that, when set, gives the path of
// a prebuilt cosmium binary to use instead of building one.
const BinaryEnv = "COSMIUM_BIN"

// toolsPackage is the command the tools module builds: cosmium's server,
// listening only on the address -Host names (see tools/cmd/cosmium).
const toolsPackage = "./cmd/cosmium"

// buildName names the build in the cache; it changes whenever the command
// does, so that no older build (such as cosmium's own server, which listens
// on every interface) is reused.
const buildName = "cosmium-" + Version + "-bound"

var (
	binaryMu   sync.Mutex
	binaryPath string // set once a binary has been found or built
)

// Binary returns the path of a cosmium binary, building it on first use.
//
// If COSMIUM_BIN is set, Binary returns its value after checking that the file
// exists; it must be a build of tools/cmd/cosmium (cosmium's own server
// listens on every interface). Otherwise it returns
// <user cache dir>/sbcosmos/cosmium-<Version>-bound/cosmium, building it
// there with the go command from the tools module beside this package's
// source: once per machine and cosmium version, in tens of seconds
// (about 25 s on two busy cores, up to a minute with a cold Go build cache),
// plus downloads where the modules were never fetched. Builds are serialised across processes by a
// lock file, so parallel test binaries build once, and the binary is moved
// into place atomically, so no process ever runs a partial file. ctx bounds
// the wait for the lock and the build.
//
// Binary is safe for concurrent use.
func Binary(ctx context.Context) (string, error) {
	p, _, err := binary(ctx)
	return p, err
}

// binary is Binary, also reporting how long this call spent building: zero
// when the binary was already there.
func binary(ctx context.Context) (path string, built time.Duration, err error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", 0, fmt.Errorf("%s=%s: %w", BinaryEnv, p, err)
		}
		return p, 0, nil
	}
	binaryMu.Lock()
	defer binaryMu.Unlock()
	if binaryPath != "" {
		return binaryPath, 0, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", 0, fmt.Errorf("locate the cache for the cosmium binary (or set %s): %w", BinaryEnv, err)
	}
	dir := filepath.Join(cache, "sbcosmos", buildName)
	bin := filepath.Join(dir, "cosmium"+exeSuffix())
	if !isFile(bin) {
		if built, err = lockedBuild(ctx, dir, bin); err != nil {
			return "", 0, err
		}
	}
	binaryPath = bin
	return bin, built, nil
}

// lockedBuild builds bin under a lock file in dir, unless another process
// built it while this one waited for the lock.
func lockedBuild(ctx context.Context, dir, bin string) (time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("create the cosmium cache: %w", err)
	}
	// Without file locks builds stay correct, because each builds into its
	// own directory and renames the result into place, but parallel test
	// processes may each build once.
	unlock, err := filelock.Lock(ctx, filepath.Join(dir, ".lock"))
	if errors.Is(err, filelock.ErrUnsupported) {
		unlock, err = func() {}, nil
	}
	if err != nil {
		return 0, fmt.Errorf("lock the cosmium cache: %w", err)
	}
	defer unlock()
	if isFile(bin) {
		return 0, nil
	}
	started := time.Now()
	if err := build(ctx, dir, bin); err != nil {
		return 0, err
	}
	return time.Since(started), nil
}

// build builds cosmium into a fresh temporary directory beside bin and renames
// it into place.
func build(ctx context.Context, dir, bin string) error {
	tools, err := toolsDir()
	if err != nil {
		return err
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building cosmium needs the go command on PATH (or set %s to a prebuilt cosmium %s): %w", BinaryEnv, Version, err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return fmt.Errorf("build cosmium: %w", err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, filepath.Base(bin))
	cmd := exec.CommandContext(ctx, goCmd, "-C", tools, "build", "-o", out, toolsPackage)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build cosmium %s in %s: %w\n%s", Version, tools, err, output)
	}
	if err := os.Rename(out, bin); err != nil && !isFile(bin) {
		return fmt.Errorf("install the cosmium build: %w", err)
	}
	return nil
}

// toolsDir returns the tools module's directory, found from this source
// file's path so that it works from any package's tests.
func toolsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("cannot locate the cosmiumtest tools module (was the test built with -trimpath?); set %s to a prebuilt cosmium %s", BinaryEnv, Version)
	}
	dir := filepath.Join(filepath.Dir(file), "tools")
	if !isFile(filepath.Join(dir, "go.mod")) {
		return "", fmt.Errorf("cosmiumtest tools module not found at %s; set %s to a prebuilt cosmium %s", dir, BinaryEnv, Version)
	}
	return dir, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}
