package worker_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Example wires a worker: a receiver (here the test kit's queue model; in
// production an *azservicebus.Receiver in PeekLock mode), a handler (here a
// function; in production an *idempotent.Consumer), a logger and options,
// then Run until the context ends. Every message is settled by what its
// outcome means: created ones completed, the invalid one dead-lettered.
func Example() {
	q, err := sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("invoices", sbqueue.QueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"i-1", "i-2", "bad"} {
		if _, err := q.Send(context.Background(), sbqueue.Message{MessageID: id}); err != nil {
			log.Fatal(err)
		}
	}
	handler := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		if m.ID == "bad" {
			return idempotent.Result{Outcome: idempotent.Invalid, Reason: idempotent.ReasonInvalidMessage, Description: "not an invoice"}
		}
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var w *worker.Worker
	w, err = worker.New(q.NewReceiver(), handler, slog.New(slog.DiscardHandler), worker.Options{
		Concurrency:     4,
		SummaryInterval: -1,
		KeyAttr:         "invoice_id",
		Observe: func(worker.Report) {
			if w.Stats().Processed() == 3 {
				cancel()
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	s := w.Stats()
	fmt.Println("created:", s.Outcomes[idempotent.Created], "dead-lettered:", s.DeadLettered)
	snap := q.Snapshot()
	fmt.Println("queue: completed", snap.Completed, "dead-lettered", snap.DeadLettered)
	// Output:
	// created: 2 dead-lettered: 1
	// queue: completed 2 dead-lettered 1
}
