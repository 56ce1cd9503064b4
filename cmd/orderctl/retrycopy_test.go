package main

import (
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/worker"
)

// A dead-lettered delayed-retry copy is resubmitted as its original
// message: under the original's MessageId, without the worker's retry
// properties, which would make the worker take it for the same copy of an
// old message with its retry budget spent (no delayed retry), and with
// OriginalEnqueuedTime the original's enqueue time, which the resubmission
// horizon counts from. It is selected by its own id or its original's.
func TestResubmitRetryCopyAsOriginal(t *testing.T) {
	for _, sel := range []string{"copy id", "original id"} {
		t.Run(sel, func(t *testing.T) {
			s := newBrokerStack(t)
			const original = "ord-000042"
			since := s.clock.Now().Add(-59 * time.Minute).Truncate(time.Millisecond)
			copyID := worker.RetryMessageID(original, since, 10)
			s.deadLetter(copyID, []byte(`{}`), "MaxDeliveryCountExceeded", "", map[string]any{
				worker.PropertyOriginalMessageID: original,
				worker.PropertyRetryAttempt:      int64(10),
				worker.PropertyRetrySince:        since.UnixMilli(),
				"Tenant":                         "kept",
			})
			s.clock.Advance(defaultDuplicateWindow + time.Minute)
			arg := copyID
			if sel == "original id" {
				arg = original
			}
			out, err := s.orderctl("dlq", "resubmit", arg, "-yes")
			if err != nil {
				t.Fatalf("resubmit: %v\n%s", err, out)
			}
			mustContain(t, "resubmit", out, "delayed-retry copy 10 of "+original, "MessageId "+original+",", "resubmitted 1 of 1")
			msgs := s.q.Peek(10)
			if len(msgs) != 1 {
				t.Fatalf("queue holds %d messages, want 1:\n%s", len(msgs), out)
			}
			m := msgs[0]
			if m.MessageID != original {
				t.Errorf("resubmitted as %q, want the original's id %q", m.MessageID, original)
			}
			for _, k := range []string{worker.PropertyOriginalMessageID, worker.PropertyRetryAttempt, worker.PropertyRetrySince} {
				if v, ok := m.ApplicationProperties[k]; ok {
					t.Errorf("resubmission keeps the retry property %s=%v", k, v)
				}
			}
			if got := m.ApplicationProperties["Tenant"]; got != "kept" {
				t.Errorf("property Tenant = %v, want kept", got)
			}
			if got, want := m.ApplicationProperties[PropOriginalEnqueuedTime], since.UTC().Format(time.RFC3339Nano); got != want {
				t.Errorf("OriginalEnqueuedTime = %v, want the original's enqueue %s", got, want)
			}
		})
	}
}
