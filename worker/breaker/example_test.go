package breaker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
)

// ExampleNew runs a worker whose circuit breaker probes the store while it
// is open. Here the store answers, so every message is processed and the
// breaker stays closed; see the package documentation for what happens
// during an outage.
func ExampleNew() {
	q, err := sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("invoices", sbqueue.QueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		if _, err := q.Send(context.Background(), sbqueue.Message{MessageID: id}); err != nil {
			log.Fatal(err)
		}
	}
	ping := func(ctx context.Context) error { return nil } // e.g. a cheap read of the store
	b, err := breaker.New(breaker.Options{
		Threshold:  5,
		Spread:     breaker.SpreadFor(2), // failing entities that open it whatever the probe says
		Probe:      ping,
		MinBackoff: time.Second,
		MaxBackoff: time.Minute,
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var w *worker.Worker
	w, err = worker.New(q.NewReceiver(), worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	}), nil, worker.Options{
		Concurrency:     2,
		SummaryInterval: -1,
		Gate:            b,
		Observe: func(worker.Report) {
			if w.Stats().Outcomes[idempotent.Created] == 3 {
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
	fmt.Println("created:", w.Stats().Outcomes[idempotent.Created], "breaker:", b.State(), "paused:", b.Paused())
	// Output:
	// created: 3 breaker: closed paused: false
}
