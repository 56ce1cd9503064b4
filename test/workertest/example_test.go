package workertest_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// A handler's test runs a worker on the fake receiver and reads back how
// each message settled. In a test, NewWorker, Start and Wait do the
// set-up, the run and the wait with the test's t (see TestKitRunsAWorker).
func Example() {
	r := workertest.NewReceiver("m1", "m2")
	done := workertest.SettledN(r, 2)
	w, err := worker.New(r, handler, nil, worker.Options{SummaryInterval: -1, ReceiveDrain: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	select {
	case <-done:
	case <-ctx.Done():
		fmt.Println("timed out")
	}
	cancel()
	if err := <-errc; err != nil {
		fmt.Println(err)
	}
	fmt.Println(r.Settlements("m1")[0].Kind, r.Settlements("m2")[0].Kind)
	// Output: complete deadletter
}

// handler creates every message but m2, which it finds invalid.
var handler = worker.HandlerFunc(func(_ context.Context, m idempotent.Message) idempotent.Result {
	if m.ID == "m2" {
		return idempotent.Result{Outcome: idempotent.Invalid, Key: m.ID, Reason: "malformed"}
	}
	return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
})

func TestKitRunsAWorker(t *testing.T) {
	r := workertest.NewReceiver("m1", "m2")
	done := workertest.SettledN(r, 2)
	w := workertest.NewWorker(t, r, handler, worker.Options{SummaryInterval: -1})
	stop := workertest.Start(t, w)
	workertest.Wait(t, done, "two settlements")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := [][]workertest.Settlement{r.Settlements("m1"), r.Settlements("m2")}
	if len(got[0]) != 1 || got[0][0].Kind != "complete" || len(got[1]) != 1 || got[1][0].Kind != "deadletter" || got[1][0].Reason != "malformed" {
		t.Errorf("settlements %+v, want m1 completed and m2 dead-lettered as malformed", got)
	}
	if r.Pending() != 0 || r.ReceiveCalls() == 0 {
		t.Errorf("%d messages pending after %d receives, want none", r.Pending(), r.ReceiveCalls())
	}
}

func TestCaptureKeepsRecordsAtItsLevel(t *testing.T) {
	logs := workertest.NewCapture(slog.LevelInfo)
	l := slog.New(logs).With("queue", "q")
	l.Debug("dropped")
	l.Info("kept", slog.Group("g", "k", 1))
	recs := logs.Records()
	if len(recs) != 1 || recs[0].Msg != "kept" || recs[0].Attrs["queue"].String() != "q" || recs[0].Attrs["g.k"].Int64() != 1 {
		t.Fatalf("records %+v, want the INFO one with queue and g.k", recs)
	}
	if n := len(logs.Matching("kep")); n != 1 {
		t.Errorf("Matching found %d records, want 1", n)
	}
}
