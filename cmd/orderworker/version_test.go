package main

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"--version"}, {"-queue", "x", "-version"}} {
		var out strings.Builder
		// No configuration at all: -version needs none, and exits 0.
		if err := run(context.Background(), args, envOf(nil), &out, io.Discard); err != nil {
			t.Fatalf("run %q = %v", args, err)
		}
		// A test binary's main module is this one, built by go test.
		for _, want := range []string{"orderworker github.com/idempotent-consumer/sbcosmos", runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("run %q printed %q, want it to contain %q", args, out.String(), want)
			}
		}
	}
}
