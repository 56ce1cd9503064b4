package e2etest_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestCommandsPrintVersion builds the commands as a user does and checks
// that -version exits 0 and shows the module, the Go version and, when
// the go command stamped one (`go version -m` shows it: a build in a git
// checkout, not with GOFLAGS=-buildvcs=false, nor in a git worktree,
// which the go command does not recognise), the VCS revision.
func TestCommandsPrintVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", dir,
		"github.com/idempotent-consumer/sbcosmos/cmd/orderworker", "github.com/idempotent-consumer/sbcosmos/cmd/orderctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"orderworker", "orderctl"} {
		out, err := exec.Command(filepath.Join(dir, name), "-version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -version: %v\n%s", name, err, out)
		}
		for _, want := range []string{name + " github.com/idempotent-consumer/sbcosmos ", runtime.Version()} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s -version printed %q, want %q in it", name, out, want)
			}
		}
		info, err := exec.Command("go", "version", "-m", filepath.Join(dir, name)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`(?m)^\s*build\s+vcs\.revision=(\S+)$`).FindSubmatch(info); m != nil {
			if !strings.Contains(string(out), "revision "+string(m[1])) {
				t.Errorf("%s -version printed %q, want the stamped revision %s", name, out, m[1])
			}
		} else {
			t.Logf("%s: the go command stamped no VCS revision here", name)
		}
	}
}
