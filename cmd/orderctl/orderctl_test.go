package main

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// stack is the test broker on a virtual clock (which orderctl reads too, so
// that a test can step past the duplicate-detection window) with the queue
// as infra/bicep creates it, and cosmium with the orders container.
type stack struct {
	t      *testing.T
	clock  *sbqueue.VirtualClock
	q      *sbqueue.Queue
	broker *sbbroker.Broker
	client *azservicebus.Client
	store  *cosmosstore.Store
	env    map[string]string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	cosmium := cosmiumtest.Start(t)
	cc, err := cosmosstore.NewClientWithKey(cosmium.Endpoint, cosmium.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, cc, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	store, err := cosmosstore.New(cc, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
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
	return &stack{t: t, clock: clock, q: q, broker: broker, client: client, store: store, env: map[string]string{
		"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders",
		"COSMOS_ENDPOINT": cosmium.Endpoint, "COSMOS_KEY": cosmium.Key,
	}}
}

// orderctl runs the command and returns its output and error.
func (s *stack) orderctl(args ...string) (string, error) {
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := runAt(ctx, args, func(k string) string { return s.env[k] }, &out, io.Discard, s.clock.Now)
	return out.String(), err
}

// deadLetter sends a message and dead-letters it as the worker (or the
// broker) would, with the reason and description.
func (s *stack) deadLetter(id string, body []byte, reason, desc string, props map[string]any) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sender, err := s.client.NewSender("orders", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer sender.Close(ctx)
	subject := order.SubjectOrderPlaced
	if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: body, Subject: &subject, ApplicationProperties: props}, nil); err != nil {
		s.t.Fatal(err)
	}
	r, err := s.client.NewReceiverForQueue("orders", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer r.Close(ctx)
	queued, _ := s.counts()
	msgs, err := r.ReceiveMessages(ctx, queued, nil)
	if err != nil || len(msgs) != queued {
		s.t.Fatalf("receive %s: %v %v", id, msgs, err)
	}
	for _, m := range msgs {
		if m.MessageID != id {
			if err := r.AbandonMessage(ctx, m, nil); err != nil {
				s.t.Fatal(err)
			}
			continue
		}
		if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc}); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *stack) counts() (queue, dlq int) {
	return len(s.q.Peek(1 << 20)), len(s.q.DeadLetterQueue().Peek(1 << 20))
}

func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// TestDeadLetterTool runs list, show, resubmit and purge against the test
// broker, with the stored orders in cosmium, through the public SDK only.
func TestDeadLetterTool(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	gen := ordergen.New(7, "dlq")
	now := s.clock.Now()

	// The worker stores order 0, and dead-letters a message that reuses its
	// id for other content, sent after the duplicate-detection window.
	stored := gen.Order(0)
	s.send(stored.OrderID, ordergen.Body(stored, now, ""))
	runWorker(t, s, func(st worker.Stats) bool { return st.Outcomes[idempotent.Created] == 1 })
	s.clock.Advance(defaultDuplicateWindow + time.Minute)
	now = s.clock.Now()
	reused := ordergen.Changed(stored)
	s.send(reused.OrderID, ordergen.Body(reused, now, ""))
	runWorker(t, s, func(st worker.Stats) bool { return st.Outcomes[idempotent.Mismatch] == 1 })
	s.deadLetter("dlq-bad", ordergen.Malformed("dlq-bad", 0), idempotent.ReasonInvalidMessage, "malformed JSON", nil)
	for _, i := range []int{1, 2} {
		s.deadLetter(gen.ID(i), ordergen.Body(gen.Order(i), now, ""), "MaxDeliveryCountExceeded", "Message could not be consumed after 10 delivery attempts.", nil)
	}
	// Order 3 was resubmitted before, 30 days ago: past the horizon.
	old := now.Add(-30 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
	s.deadLetter(gen.ID(3), ordergen.Body(gen.Order(3), now, ""), "MaxDeliveryCountExceeded", "again", map[string]any{PropOriginalEnqueuedTime: old})

	t.Run("resubmit refuses inside the duplicate-detection window", func(t *testing.T) {
		out, err := s.orderctl("dlq", "resubmit", "-reason", "MaxDeliveryCountExceeded", "-yes")
		if err == nil {
			t.Error("resubmit with refusals succeeded")
		}
		mustContain(t, "resubmit", out, "refused dlq-000001", "refused dlq-000002", "inside the duplicate-detection window 10m",
			"past the resubmission horizon", "(-force to send anyway)")
		if q, d := s.counts(); q != 0 || d != 5 {
			t.Errorf("after refusals: queue %d, dead-letter queue %d; want 0 and 5", q, d)
		}
	})

	// A resubmission forced inside the window is dropped by the broker:
	// what the refusal protects from.
	t.Run("forced inside the window, the broker drops it", func(t *testing.T) {
		s.deadLetter("dlq-late", ordergen.Body(gen.Order(9), s.clock.Now(), ""), "MaxDeliveryCountExceeded", "", nil)
		out, err := s.orderctl("dlq", "resubmit", "dlq-late", "-force-window", "-yes")
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "forced resubmit", out, "WARNING dlq-late", "the message is LOST if the broker drops it", "sent dlq-late")
		if d := s.broker.Dropped()["orders"].Duplicates; d != 1 {
			t.Errorf("the broker dropped %d resubmissions, want 1", d)
		}
		if q, d := s.counts(); q != 0 || d != 5 {
			t.Errorf("queue %d, dead-letter queue %d; want 0 and 5", q, d)
		}
	})

	s.clock.Advance(2 * time.Hour) // every message is now 2h old, outside the window

	t.Run("list counts by reason and age", func(t *testing.T) {
		out, err := s.orderctl("dlq", "list")
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "list", out, "orders/$DeadLetterQueue: 5 messages")
		for reason, n := range map[string]string{"MaxDeliveryCountExceeded": "3", order.ReasonOrderIDReused: "1", idempotent.ReasonInvalidMessage: "1"} {
			// COUNT, then <1h, 1h-1d (all are 2h old), 1d-7d, >=7d.
			re := regexp.MustCompile(`(?m)^` + reason + `\s+` + n + `\s+0\s+` + n + `\s+0\s+0\s`)
			if !re.MatchString(out) {
				t.Errorf("list has no line %s with %s messages, all 1h-1d old:\n%s", reason, n, out)
			}
		}
		mustContain(t, "list", out, "dlq-000001 (2h ago)")
	})

	t.Run("show with the diff of a reused id", func(t *testing.T) {
		out, err := s.orderctl("dlq", "show", reused.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`DeadLetterReason:\s+OrderIdReused\n`).MatchString(out) {
			t.Errorf("show lacks the reason:\n%s", out)
		}
		mustContain(t, "show", out, "exists with request hash "+stored.RequestHash(),
			"DeliveryCount:", "EnqueuedTime:", `"orderId": "dlq-000000"`, "stored order dlq-000000: created by message dlq-000000",
			"FIELD", "totalMinor", "lines[0].quantity", stored.RequestHash())
		re := regexp.MustCompile(`lines\[0\]\.quantity\s+` + strconv.FormatInt(stored.Lines[0].Quantity, 10) + `\s+` + strconv.FormatInt(reused.Lines[0].Quantity, 10) + `\n`)
		if !re.MatchString(out) {
			t.Errorf("show does not diff lines[0].quantity %d -> %d:\n%s", stored.Lines[0].Quantity, reused.Lines[0].Quantity, out)
		}
		if strings.Contains(out, "customerId ") {
			t.Errorf("show reports a field that did not change:\n%s", out)
		}
		endpoint := s.env["COSMOS_ENDPOINT"]
		delete(s.env, "COSMOS_ENDPOINT")
		out, err = s.orderctl("dlq", "show", reused.OrderID)
		s.env["COSMOS_ENDPOINT"] = endpoint
		if err != nil || !strings.Contains(out, "set COSMOS_ENDPOINT (-cosmos-endpoint) to compare it with the stored order") || strings.Contains(out, "FIELD") {
			t.Errorf("show without Cosmos DB = %v:\n%s", err, out)
		}
		if _, err := s.orderctl("dlq", "show", "no-such-id"); err == nil {
			t.Error("show of a missing id succeeded")
		}
	})

	t.Run("dry run changes nothing", func(t *testing.T) {
		out, err := s.orderctl("dlq", "resubmit", "-reason", "MaxDeliveryCountExceeded")
		if err == nil {
			t.Error("a dry run with a refusal succeeded")
		}
		mustContain(t, "dry run", out, "dry run (add -yes to act)", "would resubmit dlq-000001", "would resubmit dlq-000002", "refused dlq-000003")
		if strings.Contains(out, "sent ") {
			t.Errorf("a dry run sent:\n%s", out)
		}
		if q, d := s.counts(); q != 0 || d != 5 {
			t.Errorf("queue %d, dead-letter queue %d; want 0 and 5", q, d)
		}
	})

	t.Run("resubmit, and the worker processes it", func(t *testing.T) {
		out, err := s.orderctl("dlq", "resubmit", gen.ID(1), gen.ID(2), "-yes")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		mustContain(t, "resubmit", out, "sent dlq-000001", "to orders: MessageId dlq-000001", `subject "`+order.SubjectOrderPlaced+`"`,
			"OriginalEnqueuedTime=", "ResubmissionCount=1", "completed the dead-letter copy of dlq-000002", "resubmitted 2 of 2")
		if strings.Contains(out, "DeadLetterReason=") {
			t.Errorf("the resubmission carries the dead-letter reason:\n%s", out)
		}
		if q, d := s.counts(); q != 2 || d != 3 {
			t.Errorf("queue %d, dead-letter queue %d; want 2 and 3", q, d)
		}
		for _, m := range s.q.Peek(10) {
			if _, ok := m.ApplicationProperties[propDeadLetterReason]; ok || m.ApplicationProperties[PropOriginalEnqueuedTime] == nil {
				t.Errorf("resubmitted %s has properties %v", m.MessageID, m.ApplicationProperties)
			}
		}
		runWorker(t, s, func(st worker.Stats) bool { return st.Outcomes[idempotent.Created] == 2 })
		for _, id := range []string{gen.ID(1), gen.ID(2)} {
			if _, err := order.ReadOrder(ctx, s.store, id); err != nil {
				t.Errorf("resubmitted order %s: %v", id, err)
			}
		}
	})

	t.Run("resubmit past the horizon with -force", func(t *testing.T) {
		out, err := s.orderctl("dlq", "resubmit", gen.ID(3), "-force", "-yes")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		mustContain(t, "forced", out, "WARNING dlq-000003", "-force: sending anyway", "sent dlq-000003", "OriginalEnqueuedTime="+old, "ResubmissionCount=1")
	})

	t.Run("two copies of one id: the second is refused", func(t *testing.T) {
		for range 2 {
			s.deadLetter("dlq-twice", ordergen.Body(gen.Order(20), s.clock.Now(), ""), "MaxDeliveryCountExceeded", "", nil)
			s.clock.Advance(defaultDuplicateWindow + time.Minute)
		}
		out, err := s.orderctl("dlq", "resubmit", "dlq-twice", "-yes")
		if err == nil {
			t.Error("resubmit with a refusal succeeded")
		}
		mustContain(t, "two copies", out, "another copy of this MessageId is resubmitted in this pass", "resubmitted 1 of 1")
		if n := strings.Count(out, "sent dlq-twice"); n != 1 {
			t.Errorf("sent %d copies of dlq-twice, want 1:\n%s", n, out)
		}
	})

	t.Run("purge", func(t *testing.T) {
		out, err := s.orderctl("dlq", "purge", "-older-than", "3h")
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "purge -older-than", out, "0 of 3 messages selected")
		out, err = s.orderctl("dlq", "purge", "-reason", idempotent.ReasonInvalidMessage)
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "purge dry run", out, "would purge dlq-bad")
		if _, d := s.counts(); d != 3 {
			t.Errorf("a dry-run purge removed messages: %d left", d)
		}
		out, err = s.orderctl("dlq", "purge", "-reason", idempotent.ReasonInvalidMessage, "-yes")
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "purge", out, "purged dlq-bad", "purged 1 of 1")
		out, err = s.orderctl("dlq", "purge", "-all", "-yes")
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "purge -all", out, "purged dlq-000000", "purged dlq-twice", "purged 2 of 2")
		if _, d := s.counts(); d != 0 {
			t.Errorf("%d messages left after purge -all", d)
		}
		out, _ = s.orderctl("dlq", "list")
		mustContain(t, "list after purge", out, "0 messages")
	})
}

// runWorker runs the real worker on the queue until its counts satisfy
// done.
func runWorker(t *testing.T, s *stack, done func(worker.Stats) bool) {
	t.Helper()
	r, err := s.client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	w, err := worker.New(r, order.NewProcessor(s.store, nil, order.WithDocuments(s.store)), slog.New(slog.DiscardHandler), worker.Options{SummaryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !done(w.Stats()) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the worker did not get there: stats %+v", w.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// send sends one message to the queue.
func (s *stack) send(id string, body []byte) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sender, err := s.client.NewSender("orders", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer sender.Close(ctx)
	subject := order.SubjectOrderPlaced
	if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: body, Subject: &subject}, nil); err != nil {
		s.t.Fatal(err)
	}
}
