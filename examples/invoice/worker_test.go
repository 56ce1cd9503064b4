package invoice_test

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// failOnce is a Store whose first create of partition pk fails transiently.
type failOnce struct {
	idempotent.Store
	pk     string
	failed atomic.Bool
}

func (s *failOnce) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	if pk == s.pk && s.failed.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("429 Too Many Requests: %w", idempotent.ErrTransient)
	}
	return s.Store.CreateBatch(ctx, pk, docs)
}

// TestWorker_RunsTheInvoiceConsumer: package worker's PeekLock loop runs the
// invoice consumer unchanged, on the queue model and the in-memory store:
// new invoices are completed, copies completed as duplicates, a transient
// store failure abandoned and created on the redelivery, and an id reused
// or an invalid message dead-lettered with its reason.
func TestWorker_RunsTheInvoiceConsumer(t *testing.T) {
	q, err := sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("invoices", sbqueue.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	var msgs []sbqueue.Message
	for range 2 { // every invoice, then every invoice again (a producer's resend)
		for i := range n {
			id := fmt.Sprintf("inv-w-%02d", i)
			msgs = append(msgs, sbqueue.Message{MessageID: id, Body: []byte(body(id))})
		}
	}
	msgs = append(msgs,
		sbqueue.Message{MessageID: "inv-w-00", Body: []byte(body("inv-w-00", "amountMinor", "2500"))},
		sbqueue.Message{MessageID: "inv-w-bad", Body: []byte(`{"invoiceId":"inv-w-bad"`)},
		sbqueue.Message{MessageID: "inv-w-other", Body: []byte(body("inv-w-01"))},
	)
	for _, m := range msgs {
		if _, err := q.Send(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	store := memstore.New("/invoiceId")
	consumer := invoice.NewConsumer(&failOnce{Store: store, pk: "inv-w-03"})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var settled atomic.Int64
	var w *worker.Worker
	w, err = worker.New(q.NewReceiver(), consumer, nil, worker.Options{
		Concurrency:     1, // one at a time, so that every resend follows its original
		RetryBackoff:    -1,
		SummaryInterval: -1,
		Observe: func(r worker.Report) {
			if r.Result.Outcome != idempotent.Transient && settled.Add(1) == int64(len(msgs)) {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	s := w.Stats()
	if s.Outcomes[idempotent.Created] != n || s.Outcomes[idempotent.Duplicate] != n || s.Outcomes[idempotent.Mismatch] != 1 || s.Outcomes[idempotent.Invalid] != 2 || s.Retried != 1 {
		t.Errorf("stats %+v, want %d created, %d duplicates, 1 mismatch, 2 invalid, 1 retried", s, n, n)
	}
	snap := q.Snapshot()
	var reasons []string
	for _, m := range snap.DeadLetters {
		reasons = append(reasons, m.MessageID+" "+m.DeadLetterReason)
	}
	sort.Strings(reasons)
	want := []string{"inv-w-00 " + invoice.ReasonInvoiceIDReused, "inv-w-bad " + idempotent.ReasonInvalidMessage, "inv-w-other " + idempotent.ReasonMessageIDMismatch}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Errorf("dead letters %v, want %v", reasons, want)
	}
	if len(snap.Active) != 0 || len(snap.Locked) != 0 || snap.Completed != 2*n {
		t.Errorf("queue: %d active, %d locked, %d completed; want 0, 0, %d", len(snap.Active), len(snap.Locked), snap.Completed, 2*n)
	}
	if got := len(store.Items()); got != 2*n {
		t.Errorf("the store holds %d documents, want %d: a marker and an event per invoice", got, 2*n)
	}
}
