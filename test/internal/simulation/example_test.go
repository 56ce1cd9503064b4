package simulation_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// Run sends orders through the queue model to competing workers, then
// proves the invariants from the final state. On the wall clock it runs at
// the compressed time scale; a test runs it inside a testing/synctest
// bubble instead, with every fault (see TestSeededScenarios).
func ExampleRun() {
	rep, err := simulation.Run(context.Background(), simulation.Config{
		Orders: 300,
		Seed:   1,
		Faults: simulation.FaultRates{ProducerRetry: 0.1, Malformed: 0.05, OutOfOrder: 0.5},
	}.CompressedTimeScale(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("orders:", rep.Orders, "valid:", rep.Valid, "invalid:", rep.Malformed)
	fmt.Println("every message accounted for:", rep.Accounting.Balanced())
	fmt.Println("duplicates all explained:", rep.DuplicateCauses.Unexplained == 0)
	fmt.Println("every stored order charged once:", rep.Payments.Charges == rep.OrderDocuments)
	fmt.Println("inbox consumers:", rep.Inbox[0].Consumer, rep.Inbox[1].Consumer)
	fmt.Println("verdict:", rep.Verdict())
	// Output:
	// orders: 300 valid: 276 invalid: 24
	// every message accounted for: true
	// duplicates all explained: true
	// every stored order charged once: true
	// inbox consumers: loyalty audit
	// verdict: <nil>
}

// Check holds a final state against the producer's ground truth. Here the
// consumer completed a message whose id had been reused for other content,
// instead of dead-lettering it.
func ExampleCheck() {
	placed := order.Order{OrderID: "ord-1", CustomerID: "cust-1", Currency: "EUR",
		Lines: []order.Line{{SKU: "sku-1", Quantity: 1, UnitPriceMinor: 500}}, TotalMinor: 500}
	amended := placed
	amended.Lines = []order.Line{{SKU: "sku-1", Quantity: 2, UnitPriceMinor: 500}}
	amended.TotalMinor = 1000
	s := &simulation.State{
		Sent: []simulation.Sent{
			{MessageID: "ord-1", OrderID: "ord-1", Kind: simulation.Original, RequestHash: placed.RequestHash(), Enqueued: true, Seq: 1},
			{MessageID: "ord-1", OrderID: "ord-1", Kind: simulation.Reuse, RequestHash: amended.RequestHash(), Enqueued: true, Seq: 2},
		},
		Queue: sbqueue.Snapshot{Counters: sbqueue.Counters{Sent: 2}},
	}
	w := order.NewWrite(placed, "ord-1", placed.RequestHash(), time.Unix(0, 0))
	docs, _ := w.Documents()
	for _, d := range docs {
		s.Documents = append(s.Documents, memstore.Item{PartitionKey: "ord-1", ID: d.ID, Body: d.Body, Writes: 1})
	}
	for _, v := range simulation.Check(s) {
		fmt.Println(v)
	}
	// Output:
	// rejects-dead-lettered: order ord-1 (message #2): reuse message completed: silently dropped, want it dead-lettered as OrderIdReused
}
