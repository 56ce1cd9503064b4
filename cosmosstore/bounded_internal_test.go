package cosmosstore

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// goroutineID returns the id of the calling goroutine, from the first line
// of its stack trace ("goroutine 7 [running]:").
func goroutineID() string {
	var buf [64]byte
	s := string(buf[:runtime.Stack(buf[:], false)])
	s = strings.TrimPrefix(s, "goroutine ")
	id, _, _ := strings.Cut(s, " ")
	return id
}

// runOn runs one function on p and returns the goroutine it ran on.
func runOn(p *callPool) string {
	done := make(chan string, 1)
	p.run(func() { done <- goroutineID() })
	return <-done
}

// TestCallPool_ReusesAnIdleGoroutine: calls one after another run on one
// goroutine, whose stack the first call grew; calls at once each get one;
// a goroutine idle for the pool's wait ends.
func TestCallPool_ReusesAnIdleGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newCallPool(time.Minute)
		first := runOn(p)
		synctest.Wait() // the goroutine waits for the next call
		for i := range 10 {
			if g := runOn(p); g != first {
				t.Fatalf("call %d ran on goroutine %s, want the idle %s", i+2, g, first)
			}
			synctest.Wait()
		}

		// Three at once: three goroutines, the idle one among them.
		release := make(chan struct{})
		var mu sync.Mutex
		seen := map[string]bool{}
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			p.run(func() {
				defer wg.Done()
				mu.Lock()
				seen[goroutineID()] = true
				mu.Unlock()
				<-release
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if len(seen) != 3 || !seen[first] {
			t.Errorf("three calls at once ran on %v, want three goroutines, %s among them", seen, first)
		}

		// Idle for longer than the wait: the goroutines end.
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if g := runOn(p); seen[g] {
			t.Errorf("a call after the pool's goroutines idled for over its wait ran on %s, one of them", g)
		}
		// The bubble must end with no goroutine left: let the last one
		// idle out.
		time.Sleep(time.Minute + time.Second)
	})
}

// TestBounded_NoAllocation: a call under a context with a deadline runs on
// the pool's goroutine with no channel or closure of its own: the call's
// state is reused from one call to the next.
func TestBounded_NoAllocation(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector makes sync.Pool drop items: the count is not exact")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := func(context.Context) (int, error) { return 7, nil }
	if v, err := bounded(ctx, f); v != 7 || err != nil {
		t.Fatalf("bounded = %d, %v; want 7, nil", v, err)
	}
	if got := testing.AllocsPerRun(1000, func() { _, _ = bounded(ctx, f) }); got != 0 {
		t.Errorf("bounded allocates %v times per call, want 0", got)
	}
}

// TestBounded_AbandonedCallIsNotReused: a call whose context ended first
// keeps running on its own state; the calls after it get theirs, and
// their results are their own.
func TestBounded_AbandonedCallIsNotReused(t *testing.T) {
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := bounded(ctx, func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned call returned %v, want context.Canceled", err)
	}
	live, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	for i := range 50 {
		if i == 10 {
			close(release) // the abandoned call ends meanwhile
		}
		if v, err := bounded(live, func(context.Context) (int, error) { return 100 + i, nil }); v != 100+i || err != nil {
			t.Fatalf("call %d = %d, %v; want %d, nil", i, v, err, 100+i)
		}
	}
}
