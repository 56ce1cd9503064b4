package main

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
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

// A handler call that outlives its deadline by the margin makes /livez
// fail; a call within it, or one that returned, does not.
func TestHandlerTrackerReportsWedgedCalls(t *testing.T) {
	now := time.Unix(0, 0)
	tr := newHandlerTracker(time.Minute, func() time.Time { return now })
	done1 := tr.begin()
	now = now.Add(30 * time.Second)
	done2 := tr.begin()
	if err := tr.check(context.Background()); err != nil {
		t.Fatalf("check within the limit = %v", err)
	}
	now = now.Add(45 * time.Second) // call 1 runs 75s, call 2 45s
	err := tr.check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "1 handler call(s) running for up to 1m15s") {
		t.Fatalf("check = %v, want one wedged call", err)
	}
	done1()
	if err := tr.check(context.Background()); err != nil {
		t.Errorf("check after the call returned = %v", err)
	}
	done2()
}
