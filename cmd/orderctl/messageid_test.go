package main

import (
	"context"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestResubmitRefusesAMessageIDOverTheLimit: a dead-letter copy whose
// MessageId is over Service Bus's 128 characters (it can come only from a
// broker that accepted it) is refused by resubmit, with the limit and the
// id, instead of being sent: Service Bus would refuse the send, and the
// SDK would report only "context deadline exceeded" after its retries.
func TestResubmitRefusesAMessageIDOverTheLimit(t *testing.T) {
	s := newStack(t)
	long := strings.Repeat("x", 129)
	// The test broker refuses such an id, as Service Bus does, so the copy
	// is put into the queue model directly.
	body := ordergen.Body(ordergen.New(1, "long").Order(0), s.clock.Now(), "")
	if _, err := s.q.Send(context.Background(), sbqueue.Message{MessageID: long, Body: body, Subject: order.SubjectOrderPlaced}); err != nil {
		t.Fatal(err)
	}
	got := s.q.TryReceive(1)
	if len(got) != 1 {
		t.Fatalf("received %d messages", len(got))
	}
	if err := s.q.DeadLetter(got[0].LockToken, "MaxDeliveryCountExceeded", "", nil); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(defaultDuplicateWindow + 1)

	for _, args := range [][]string{{"dlq", "resubmit", "-all"}, {"dlq", "resubmit", "-all", "-yes"}} {
		out, err := s.orderctl(args...)
		if err == nil {
			t.Errorf("%q succeeded:\n%s", args, out)
		}
		mustContain(t, strings.Join(args, " "), out, "refused "+long, "has 129 characters; Service Bus accepts at most 128", "orderctl dlq purge")
		if strings.Contains(out, "FAILED to send") || strings.Contains(out, "would resubmit") {
			t.Errorf("%q tried to send it:\n%s", args, out)
		}
	}
	if queue, dlq := s.counts(); queue != 0 || dlq != 1 {
		t.Errorf("queue %d, dead-letter queue %d; want the copy kept in the dead-letter queue", queue, dlq)
	}
}
