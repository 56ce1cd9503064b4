package simulation_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// Under Session consistency, reads without the session token of an order's
// writes may lag behind them (FaultRates.ReplicaLag): a copy whose create
// conflicts then reads no payment record and no order although the order
// exists. No such read may dead-letter the message (OrderDocumentMissing
// for an order that exists loses it); every invariant holds, and the runs
// do reach reads that found no document where one exists.
func TestReplicaLagLosesNoMessage(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rep, err := runSim(t, simulation.Config{Orders: 200, Workers: 3, Concurrency: 4, Seed: seed,
				Faults: simulation.FaultRates{ReplicaLag: 0.5, ProducerRetry: 0.3, RetryOutsideWindow: 0.3, LockExpiry: 0.2, Ambiguous: 0.1}})
			if err != nil {
				t.Fatal(err)
			}
			if err := rep.Verdict(); err != nil {
				var b strings.Builder
				rep.WriteTo(&b)
				t.Fatalf("%v (dead letters %v)\n%s", err, rep.DeadLetters, b.String())
			}
			if rep.Faults.ReplicaLagMissing == 0 {
				t.Errorf("no read lagged into a 404 (%d lagging reads): the fault is not exercised", rep.Faults.ReplicaLag)
			}
			t.Logf("%d reads behind the latest write, %d of them 404 for a document that exists", rep.Faults.ReplicaLag, rep.Faults.ReplicaLagMissing)
		})
	}
}
