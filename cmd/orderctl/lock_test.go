package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// newBrokerStack is newStack without cosmium: resubmit and purge need only
// Service Bus.
func newBrokerStack(t *testing.T) *stack {
	t.Helper()
	clock := sbqueue.NewVirtualClock(time.Now())
	ns := sbqueue.NewNamespace(clock)
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{
		LockDuration: defaultLockDuration, MaxDeliveryCount: 10, RequiresDuplicateDetection: true,
		DuplicateDetectionWindow: defaultDuplicateWindow, DefaultMessageTimeToLive: defaultMessageTTL, DeadLetteringOnMessageExpiration: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	client, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	return &stack{t: t, clock: clock, q: q, broker: broker, client: client, env: map[string]string{
		"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders",
	}}
}

// A resubmit pass that outlives the lock duration (a large dead-letter
// queue: every copy is received and held before the first is sent) must not
// send a copy whose lock lapsed: Service Bus would then refuse its complete,
// leaving the copy in the dead-letter queue as well as its resubmission in
// the queue, and a later pass would resubmit it again. Here the clock jumps
// past the lock duration once the copies are held, before the first send.
func TestResubmitSendsNoCopyWhoseLockLapsed(t *testing.T) {
	s := newBrokerStack(t)
	for _, id := range []string{"lapsed-1", "lapsed-2"} {
		s.deadLetter(id, []byte(`{}`), "MaxDeliveryCountExceeded", "", nil)
	}
	s.clock.Advance(defaultDuplicateWindow + time.Minute)

	var calls atomic.Int32
	now := func() time.Time {
		// act reads the clock once to plan; apply reads it again for each
		// held copy, after lockTargets: the pass took too long.
		if calls.Add(1) == 2 {
			s.clock.Advance(defaultLockDuration + time.Second)
		}
		return s.clock.Now()
	}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := runAt(ctx, []string{"dlq", "resubmit", "-all", "-yes"}, func(k string) string { return s.env[k] }, &out, io.Discard, now)
	if err == nil {
		t.Errorf("a pass whose locks lapsed succeeded:\n%s", out.String())
	}
	if q, d := s.counts(); q != 0 || d != 2 {
		t.Errorf("queue %d, dead-letter queue %d; want 0 and 2 (nothing sent without a lock to complete it):\n%s", q, d, out.String())
	}
	mustContain(t, "resubmit", out.String(), "lock", "resubmitted 0 of 2")
}
