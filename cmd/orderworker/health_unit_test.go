package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

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

// After a failed receive the receiver check peeks: not connected while the
// peek fails, connected once it succeeds, and no more peeks until the next
// failed receive.
func TestReceiverCheckPeeksAfterAFailedReceive(t *testing.T) {
	var failed int64
	peeks := 0
	var peekErr error
	rc := &receiverCheck{failed: func() int64 { return failed }, sem: make(chan struct{}, 1),
		peek: func(context.Context) error { peeks++; return peekErr }}
	ctx := context.Background()
	if err := rc.check(ctx); err != nil || peeks != 0 {
		t.Fatalf("no failed receive: check = %v after %d peeks", err, peeks)
	}
	failed, peekErr = 2, errors.New("connection refused")
	if err := rc.check(ctx); err == nil || !strings.Contains(err.Error(), "2 failed receives") || peeks != 1 {
		t.Fatalf("failing peek: check = %v after %d peeks", err, peeks)
	}
	peekErr = nil
	if err := rc.check(ctx); err != nil || peeks != 2 {
		t.Fatalf("good peek: check = %v after %d peeks", err, peeks)
	}
	if err := rc.check(ctx); err != nil || peeks != 2 {
		t.Fatalf("nothing new: check = %v after %d peeks", err, peeks)
	}
}
