package cli_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func TestVersion(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/m", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "88e5e41abc"}, {Key: "vcs.time", Value: "2026-12-01T09:00:00Z"},
			{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}}
	for _, tt := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"release with VCS", info, true, "orderctl example.com/m v1.2.3 git revision 88e5e41abc+modified (2026-12-01T09:00:00Z) go1.26.0 linux/arm64"},
		{"checkout without VCS", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/m", Version: "(devel)"}}, true,
			"orderctl example.com/m (devel) go1.26.0 " + runtime.GOOS + "/" + runtime.GOARCH},
		{"no build information", nil, false, "orderctl: no build information (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"},
	} {
		if got := cli.Version("orderctl", tt.info, tt.ok); got != tt.want {
			t.Errorf("%s: Version = %q, want %q", tt.name, got, tt.want)
		}
	}
	for args, want := range map[string]bool{"-version": true, "--version": true, "-queue x -version": true, "-- -version": false, "-queue x": false} {
		if got := cli.VersionArg(splitArgs(args)); got != want {
			t.Errorf("VersionArg(%q) = %v", args, got)
		}
	}
}

func splitArgs(s string) []string { return strings.Fields(s) }

// A command's -version line, from the build information the go command
// embeds (debug.ReadBuildInfo in PrintVersion).
func ExampleVersion() {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/idempotent-consumer/sbcosmos", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "6b2bbbb"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"}}}
	fmt.Println(cli.Version("orderworker", info, true))
	// Output: orderworker github.com/idempotent-consumer/sbcosmos v0.3.0 git revision 6b2bbbb go1.26.0 linux/amd64
}
