package main

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestVersionFlag checks that -version prints the version line and returns
// nil with no configuration at all, wherever it stands among the flags.
func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"--version"}, {"-queue", "x", "-version"}} {
		var out strings.Builder
		if err := run(context.Background(), args, func(string) string { return "" }, &out, io.Discard); err != nil {
			t.Fatalf("run %q = %v", args, err)
		}
		// A test binary's main module is this one, built by go test.
		for _, want := range []string{"sbbroker github.com/idempotent-consumer/sbcosmos", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("run %q printed %q, want it to contain %q", args, out.String(), want)
			}
		}
	}
}
