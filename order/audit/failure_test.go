package audit_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/order/audit"
)

// failingPartitions is an orders container whose partition reads fail from
// the failAt-th on, as Cosmos DB's do during an outage or at a 429 that
// outlasts the SDK's retries.
type failingPartitions struct {
	audit.Container
	failAt int64
	n      atomic.Int64
}

var errReadFailed = errors.New("injected: the partition read failed")

func (f *failingPartitions) ReadPartition(ctx context.Context, pk string) ([][]byte, error) {
	if f.n.Add(1) >= f.failAt {
		return nil, errReadFailed
	}
	return f.Container.ReadPartition(ctx, pk)
}

// TestAudit_AFailedReadStopsWithAContinuation: a read that fails in the
// middle of the scan ends the audit with the error, the report so far and
// a continuation; resumed on a store that answers, from that continuation,
// it finds every violation the whole audit finds and ends clean of errors.
// (orderctl prints such a report as incomplete and exits 2.)
func TestAudit_AFailedReadStopsWithAContinuation(t *testing.T) {
	cfg := plantedMemstore(t)
	whole := run(t, cfg)
	if whole.Violations() == 0 {
		t.Fatal("the planted world audits clean")
	}

	failing := cfg
	failing.Orders = &failingPartitions{Container: cfg.Orders, failAt: 4}
	partial, err := audit.Run(context.Background(), failing, "")
	if !errors.Is(err, errReadFailed) {
		t.Fatalf("Run with a failing read: %v, want the read's error", err)
	}
	if partial == nil || partial.Continuation == "" {
		t.Fatalf("Run with a failing read returned %+v: want the report so far and a continuation", partial)
	}
	rest, err := audit.Run(context.Background(), cfg, partial.Continuation)
	if err != nil {
		t.Fatalf("resumed: %v", err)
	}
	if rest.Continuation != "" {
		t.Fatalf("resumed audit stopped again at %q", rest.Continuation)
	}
	// The page that failed is read again when resumed, so a violation on it
	// may be in both reports: compare the sets of ids.
	for _, r := range whole.Invariants {
		got := append(ids(partial, r.Name), ids(rest, r.Name)...)
		slices.Sort(got)
		got = slices.Compact(got)
		if want := slices.Compact(ids(whole, r.Name)); !slices.Equal(got, want) {
			t.Errorf("%s: the interrupted and resumed audits found %q, the whole audit %q", r.Name, got, want)
		}
	}
}
