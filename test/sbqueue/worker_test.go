package sbqueue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// TestWorkerRunsAgainstTheModel runs the real worker loop on a Receiver:
// good messages are completed, a transient failure is abandoned and
// redelivered, a bad message is dead-lettered with the handler's reason.
func TestWorkerRunsAgainstTheModel(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	ids := []string{"ok-1", "ok-2", "flaky-1", "bad-1", "ok-3"}
	for _, id := range ids {
		send(t, q, sbqueue.Message{MessageID: id})
	}
	const wantReports = 6 // every message once, flaky-1 twice

	h := worker.HandlerFunc(func(_ context.Context, m idempotent.Message) idempotent.Result {
		switch {
		case strings.HasPrefix(m.ID, "bad"):
			return idempotent.Result{Outcome: idempotent.Invalid, Key: m.ID, Reason: idempotent.ReasonInvalidMessage, Description: "not JSON"}
		case strings.HasPrefix(m.ID, "flaky") && m.DeliveryCount == 1:
			return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: errors.New("503")}
		default:
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		reports []worker.Report
	)
	w, err := worker.New(q.NewReceiver(), h, nil, worker.Options{
		Concurrency:     3,
		RetryBackoff:    -1,
		SummaryInterval: -1,
		Observe: func(r worker.Report) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, r)
			if len(reports) == wantReports {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}

	for _, r := range reports {
		if r.SettleErr != nil || r.LockLost {
			t.Errorf("report %+v: settlement failed", r)
		}
	}
	s := q.Snapshot()
	if s.Completed != 4 || s.Abandoned != 1 || s.DeadLettered != 1 || len(s.Active)+len(s.Locked) != 0 {
		t.Errorf("queue after the run: %+v", s)
	}
	if len(s.DeadLetters) != 1 || s.DeadLetters[0].MessageID != "bad-1" || s.DeadLetters[0].DeadLetterReason != idempotent.ReasonInvalidMessage {
		t.Errorf("dead letters = %+v", s.DeadLetters)
	}
	if st := w.Stats(); st.Received != wantReports || st.Retried != 1 || st.Outcomes[idempotent.Invalid] != 1 || st.Outcomes[idempotent.Created] != 4 {
		t.Errorf("worker stats = %+v", st)
	}
}
