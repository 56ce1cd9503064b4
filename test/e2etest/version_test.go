package e2etest_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
)

// TestCommandsPrintVersion builds the commands as a user does (go build
// -buildvcs=auto, through e2etest.BuildCommands) and checks
// that -version exits 0 and shows the module, the Go version and, when
// the go command stamped one (`go version -m` shows it: a build in a git
// checkout, not with GOFLAGS=-buildvcs=false, nor in a git worktree,
// which the go command does not recognise), the VCS revision.
func TestCommandsPrintVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	// Every command of the module, the production ones and the local
	// stack's tools: -version needs no configuration in any of them.
	commands := []string{"cmd/orderworker", "cmd/orderproducer", "cmd/orderrelay", "cmd/orderctl",
		"test/paymentservice/cmd/paymentservice", "test/sbbroker/cmd/sbbroker", "test/simulate"}
	for _, c := range commands {
		if !slices.Contains(e2etest.Commands, c) {
			t.Fatalf("e2etest.Commands does not build %s", c)
		}
	}
	// go build -buildvcs=auto of every command, shared with the other
	// tests that run the binaries.
	dir := e2etest.BuildCommands(t)
	for _, c := range commands {
		name := filepath.Base(c)
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
