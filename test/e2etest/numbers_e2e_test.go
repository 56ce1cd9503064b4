package e2etest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestEndToEndNumbersBeyond2To53 runs the real orderworker and
// orderproducer against the test broker and cosmium, which keeps JSON
// numbers as float64 (as JavaScript readers do). An order with a total of
// 2^53+1 and a status change to version math.MaxInt64 are dead-lettered
// InvalidMessage at their first delivery, nothing stored. An order whose
// document holds a version cosmium rounded (what a worker without the
// bound left: math.MaxInt64 stored as 9223372036854776000, which no int64
// decodes) dead-letters each of its 8 status changes at the first delivery
// (none is abandoned for a retry) as StoredDocumentUnreadable, naming the document, while 100 healthy
// orders sent at the same time are all created: nothing is retried as a
// store error, nothing reaches MaxDeliveryCount, and the circuit breaker
// never opens.
func TestEndToEndNumbersBeyond2To53(t *testing.T) {
	e := newRelayEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A queue of its own with a lock of 30 seconds, so that no delivery on
	// a loaded machine runs past its deadline (80% of the lock) and is
	// retried: every retry here would be a defect.
	const lock = 30 * time.Second
	q, err := e.ns.CreateQueue("numbers", sbqueue.QueueOptions{LockDuration: lock})
	if err != nil {
		t.Fatal(err)
	}
	e.queue = q
	e.baseEnv = append(e.baseEnv, "SERVICEBUS_QUEUE=numbers", "SERVICEBUS_LOCK_DURATION="+lock.String())
	cosmos := e.container(t)
	w := e.start(t, "order worker", "orderworker", "-concurrency", "8")
	e2etest.Until(t, ctx, "the container", func() bool {
		_, err := cosmos.Read(ctx, nil)
		return err == nil
	})
	send := func(m sbqueue.Message) {
		t.Helper()
		if _, err := e.queue.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	statusChange := func(orderID string, version int64) sbqueue.Message {
		b, err := json.Marshal(order.StatusChange{OrderID: orderID, Status: "shipped", Version: version, ChangedAt: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		return sbqueue.Message{MessageID: order.StatusMessageID(orderID, version), Subject: order.SubjectOrderStatusChanged, Body: b}
	}

	// Two orders created as usual; then the document of the first is
	// rewritten with version math.MaxInt64, which cosmium rounds.
	gen := ordergen.New(7, "num")
	rounded, plain := gen.Order(0), gen.Order(1)
	for _, o := range []order.Order{rounded, plain} {
		send(sbqueue.Message{MessageID: o.OrderID, Body: ordergen.Body(o, time.Now(), "")})
	}
	e2etest.Until(t, ctx, "the two orders created", func() bool { return e.queue.Snapshot().Counters.Completed >= 2 })
	setVersion(t, ctx, cosmos, rounded.OrderID, math.MaxInt64)

	big := order.Order{OrderID: "num-big", CustomerID: "cust-1", Currency: "EUR",
		Lines: []order.Line{{SKU: "SKU-1", Quantity: 1, UnitPriceMinor: order.MaxSafeInteger + 2}}, TotalMinor: order.MaxSafeInteger + 2,
		PlacedAt: time.Now().UTC()}
	bigBody, err := json.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	send(sbqueue.Message{MessageID: big.OrderID, Body: bigBody})
	send(statusChange(plain.OrderID, math.MaxInt64))
	const changes = 8
	for v := int64(2); v < 2+changes; v++ {
		send(statusChange(rounded.OrderID, v))
	}
	const healthy = 100
	pc := e2etest.RunProducer(t, ctx, e.baseEnv, e.bin, "-count", fmt.Sprint(healthy), "-seed", "5", "-id-prefix", "healthy")
	if pc.Orders != healthy || pc.Sent != healthy {
		t.Fatalf("producer sent %d messages, %d orders; want %d", pc.Sent, pc.Orders, healthy)
	}
	total := int64(2 + 2 + changes + healthy)
	e2etest.Until(t, ctx, "the queue settled", func() bool {
		s := e.queue.Snapshot()
		return len(s.Active) == 0 && len(s.Locked) == 0 && s.Counters.Completed+int64(len(s.DeadLetters)) >= total
	})
	w.Cmd.Process.Signal(syscall.SIGTERM)
	if err := w.Wait(ctx); err != nil {
		t.Errorf("orderworker after SIGTERM: %v", err)
	}

	s := e.queue.Snapshot()
	byReason := map[string]int{}
	for _, m := range s.DeadLetters {
		byReason[m.DeadLetterReason]++
		switch {
		case m.MessageID == big.OrderID:
			if m.DeadLetterReason != "InvalidMessage" || !strings.Contains(m.DeadLetterErrorDescription, "totalMinor") || !strings.Contains(m.DeadLetterErrorDescription, "9007199254740991") {
				t.Errorf("order with total 2^53+1: %s %q, want InvalidMessage naming totalMinor and the bound", m.DeadLetterReason, m.DeadLetterErrorDescription)
			}
		case m.MessageID == order.StatusMessageID(plain.OrderID, math.MaxInt64):
			if m.DeadLetterReason != "InvalidMessage" || !strings.Contains(m.DeadLetterErrorDescription, "version") {
				t.Errorf("status change to version math.MaxInt64: %s %q, want InvalidMessage naming the version", m.DeadLetterReason, m.DeadLetterErrorDescription)
			}
		case strings.HasPrefix(m.MessageID, rounded.OrderID+":"):
			if m.DeadLetterReason != order.ReasonStoredDocumentUnreadable || !strings.Contains(m.DeadLetterErrorDescription, fmt.Sprintf("%q", rounded.OrderID)) ||
				!strings.Contains(m.DeadLetterErrorDescription, "orderctl dlq resubmit") {
				t.Errorf("status change %s: %s %q, want %s naming the document and what to do", m.MessageID, m.DeadLetterReason, m.DeadLetterErrorDescription, order.ReasonStoredDocumentUnreadable)
			}
		default:
			t.Errorf("%s dead-lettered %s: %s", m.MessageID, m.DeadLetterReason, m.DeadLetterErrorDescription)
		}
	}
	t.Logf("dead-lettered by reason: %v; %d messages, %d deliveries, %d completed, %d abandoned", byReason, total, s.Counters.Delivered, s.Counters.Completed, s.Counters.Abandoned)
	// Each message was settled at its first delivery: none was abandoned
	// for a retry (a lapsed lock, which a loaded machine may cause, would
	// redeliver without an abandon).
	if s.Counters.Abandoned != 0 || s.Counters.Delivered < total {
		t.Errorf("%d deliveries of %d messages, %d abandoned: want every message settled at its first delivery", s.Counters.Delivered, total, s.Counters.Abandoned)
	}
	if byReason[order.ReasonStoredDocumentUnreadable] != changes || byReason["InvalidMessage"] != 2 || len(s.DeadLetters) != changes+2 {
		t.Errorf("dead-lettered %v, want %d %s and 2 InvalidMessage", byReason, changes, order.ReasonStoredDocumentUnreadable)
	}
	if s.Counters.Completed != 2+healthy {
		t.Errorf("%d messages completed, want %d (the two orders and the healthy ones)", s.Counters.Completed, 2+healthy)
	}
	og := ordergen.New(5, "healthy")
	for i := range healthy {
		if _, ok := e2etest.ReadOrder(t, ctx, cosmos, og.Order(i).OrderID); !ok {
			t.Errorf("healthy order %s was not created", og.Order(i).OrderID)
		}
	}
	if _, ok := e2etest.ReadOrder(t, ctx, cosmos, big.OrderID); ok {
		t.Errorf("order %s with total 2^53+1 was stored", big.OrderID)
	}
	if doc, ok := e2etest.ReadOrder(t, ctx, cosmos, plain.OrderID); !ok || doc.Version != 1 {
		t.Errorf("order %s is at version %d (found %v), want 1: the change to math.MaxInt64 was applied", plain.OrderID, doc.Version, ok)
	}
	if out := w.Output(); strings.Contains(out, "circuit breaker open") || strings.Contains(out, `"reason":"StoreError"`) {
		t.Errorf("the worker retried as a store failure or opened its circuit breaker:\n%s", out)
	}
}

// setVersion rewrites the stored order document of id with the given
// version, as an older worker would have written it.
func setVersion(t *testing.T, ctx context.Context, c *azcosmos.ContainerClient, id string, version int64) {
	t.Helper()
	pk := azcosmos.NewPartitionKeyString(id)
	resp, err := c.ReadItem(ctx, pk, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(resp.Value, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"_rid", "_self", "_etag", "_attachments", "_ts"} {
		delete(doc, k)
	}
	doc["version"] = json.Number(fmt.Sprint(version))
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReplaceItem(ctx, pk, id, b, nil); err != nil {
		t.Fatal(err)
	}
	resp, err = c.ReadItem(ctx, pk, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Value), "9223372036854776000") {
		t.Fatalf("cosmium stored %s: it no longer rounds math.MaxInt64, and this test shows nothing", resp.Value)
	}
}
