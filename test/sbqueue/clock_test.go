package sbqueue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

func TestVirtualClock(t *testing.T) {
	c := sbqueue.NewVirtualClock(t0)
	var fired []string
	c.AtFunc(t0.Add(2*time.Second), func() { fired = append(fired, "2s") })
	c.AtFunc(t0.Add(time.Second), func() { fired = append(fired, "1s") })
	stop := c.AtFunc(t0.Add(time.Second), func() { fired = append(fired, "stopped") })
	c.AtFunc(t0.Add(time.Hour), func() { fired = append(fired, "1h") })
	if !stop() {
		t.Error("stop of a pending call reported false")
	}
	if stop() {
		t.Error("second stop reported true")
	}

	c.Advance(time.Second - time.Nanosecond)
	if len(fired) != 0 {
		t.Fatalf("fired %v before their time", fired)
	}
	c.Advance(-time.Hour) // ignored
	if got := c.Now(); !got.Equal(t0.Add(time.Second - time.Nanosecond)) {
		t.Fatalf("Now = %v after a negative Advance", got)
	}
	c.Advance(time.Minute)
	if got, want := fmt.Sprint(fired), "[1s 2s]"; got != want {
		t.Errorf("fired %s, want %s (in time order, stopped call skipped)", got, want)
	}

	done := make(chan struct{})
	c.AtFunc(t0, func() { close(done) }) // already reached: called at once
	<-done
}

func TestRealClock(t *testing.T) {
	c := sbqueue.RealClock()
	before := time.Now()
	if now := c.Now(); now.Before(before) {
		t.Errorf("RealClock().Now() = %v, before time.Now() %v", now, before)
	}
	done := make(chan struct{})
	c.AtFunc(time.Now(), func() { close(done) })
	<-done
	if c.AtFunc(time.Now().Add(time.Hour), func() {})() != true {
		t.Error("stop of a pending real-clock call reported false")
	}
}
