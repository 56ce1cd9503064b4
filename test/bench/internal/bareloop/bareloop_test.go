package bareloop_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/test/bench/internal/bareloop"
)

// fakeReceiver hands out a backlog; an empty backlog blocks until ctx ends.
type fakeReceiver struct {
	mu                   sync.Mutex
	backlog              []*azservicebus.ReceivedMessage
	maxAsked             int
	completed, abandoned int
	settledAll           chan struct{} // closed when want settlements happened
	want                 int
}

func (r *fakeReceiver) ReceiveMessages(ctx context.Context, n int, _ *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	r.mu.Lock()
	r.maxAsked = max(r.maxAsked, n)
	k := min(n, len(r.backlog))
	ms := r.backlog[:k]
	r.backlog = r.backlog[k:]
	r.mu.Unlock()
	if k > 0 {
		return ms, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (r *fakeReceiver) settle(abandon bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if abandon {
		r.abandoned++
	} else {
		r.completed++
	}
	if r.completed+r.abandoned == r.want {
		close(r.settledAll)
	}
}

func (r *fakeReceiver) CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error {
	r.settle(false)
	return nil
}

func (r *fakeReceiver) AbandonMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.AbandonMessageOptions) error {
	r.settle(true)
	return nil
}

// TestRunBoundsAndSettles checks that Run handles at most concurrency
// messages at once, never asks for more, completes what the handler
// stored, abandons what it failed, and counts each.
func TestRunBoundsAndSettles(t *testing.T) {
	const n, conc = 60, 4
	r := &fakeReceiver{settledAll: make(chan struct{}), want: n}
	for i := range n {
		r.backlog = append(r.backlog, &azservicebus.ReceivedMessage{MessageID: fmt.Sprint(i)})
	}
	var inFlight, peak atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-r.settledAll
		cancel()
	}()
	counts, err := bareloop.Run(ctx, r, conc, func(_ context.Context, m *azservicebus.ReceivedMessage) (bool, error) {
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
		}
		var i int
		fmt.Sscan(m.MessageID, &i)
		switch i % 3 {
		case 0:
			return false, nil
		case 1:
			return true, nil
		}
		return false, errors.New("transient")
	})
	if err != nil {
		t.Fatalf("Run = %v, want nil after its context ended", err)
	}
	if want := (bareloop.Counts{Created: n / 3, Duplicate: n / 3, Failed: n / 3}); counts != want {
		t.Errorf("counts = %+v, want %+v", counts, want)
	}
	if r.completed != 2*n/3 || r.abandoned != n/3 {
		t.Errorf("completed %d, abandoned %d, want %d and %d", r.completed, r.abandoned, 2*n/3, n/3)
	}
	if p := peak.Load(); p > conc {
		t.Errorf("%d messages handled at once, want at most %d", p, conc)
	}
	if r.maxAsked > conc || r.maxAsked < 1 {
		t.Errorf("asked for up to %d messages at once, want 1 to %d", r.maxAsked, conc)
	}
}
