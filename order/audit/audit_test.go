package audit_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

func newMemstore(t *testing.T) (store, audit.Feed) {
	s := memstore.New("/orderId")
	return s, s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 2, Seed: 1})
}

// TestAudit_Memstore_CatchesEveryPlantedViolation: a healthy world audits
// clean, with every invariant checked; each broken pattern planted in it
// is reported under its invariant with exactly the ids at fault.
func TestAudit_Memstore_CatchesEveryPlantedViolation(t *testing.T) {
	testPlants(t, newMemstore)
}

// TestAudit_Memstore_ResumesFromItsContinuation: an audit of one document a
// page, stopped after every few pages and resumed from the continuation it
// printed, reports the same violations and checks as one uninterrupted
// audit.
func TestAudit_Memstore_ResumesFromItsContinuation(t *testing.T) {
	cfg := plantedMemstore(t)
	cfg.PageSize = 100
	whole := run(t, cfg)
	if whole.Violations() == 0 {
		t.Fatal("the planted world audits clean")
	}
	cfg.PageSize, cfg.MaxPages = 1, 3
	checked := map[string]int{}
	got := map[string][]string{}
	continuation, runs := "", 0
	for {
		rep, err := audit.Run(context.Background(), cfg, continuation)
		if err != nil {
			t.Fatal(err)
		}
		runs++
		for _, r := range rep.Invariants {
			checked[r.Name] += r.Checked
			got[r.Name] = append(got[r.Name], ids(rep, r.Name)...)
		}
		if continuation = rep.Continuation; continuation == "" {
			break
		}
		if runs > 1000 {
			t.Fatal("the audit does not end")
		}
	}
	if runs < 3 {
		t.Fatalf("%d runs: the page limit did not stop the audit", runs)
	}
	for _, r := range whole.Invariants {
		g := got[r.Name]
		slices.Sort(g)
		if want := ids(whole, r.Name); !slices.Equal(g, want) || checked[r.Name] != r.Checked {
			t.Errorf("%s: resumed audits checked %d and found %q; the whole audit checked %d and found %q", r.Name, checked[r.Name], g, r.Checked, want)
		}
	}
	t.Logf("%d runs; checks %v", runs, maps.Collect(maps.All(checked)))
}

// TestAudit_RefusesAForeignContinuation: a continuation the audit did not
// print is an error, not a silent start from the beginning.
func TestAudit_RefusesAForeignContinuation(t *testing.T) {
	s, feed := newMemstore(t)
	_, err := audit.Run(context.Background(), audit.Config{Orders: s, Feed: feed}, "not-a-continuation")
	if err == nil {
		t.Fatal("a foreign continuation was accepted")
	}
	if _, err := audit.Run(context.Background(), audit.Config{}, ""); !errors.Is(err, audit.ErrConfig) {
		t.Fatalf("an empty configuration: %v, want ErrConfig", err)
	}
}

// TestAudit_NotCheckedSaysWhy: without a ledger, consumers or relays the
// report says that their invariants were not checked.
func TestAudit_NotCheckedSaysWhy(t *testing.T) {
	w := newWorld(t, newMemstore)
	cfg := w.config()
	cfg.Ledger, cfg.Consumers, cfg.Relays = nil, nil, nil
	rep := run(t, cfg)
	for _, n := range []string{audit.PaymentLedger, audit.Inbox, audit.MarkerTTL, audit.RelayLag, audit.RelayLease} {
		if r := rep.Result(n); r.NotChecked == "" || r.Checked != 0 {
			t.Errorf("%s: checked %d, not checked %q; want a reason and no checks", n, r.Checked, r.NotChecked)
		}
	}
	if rep.Violations() != 0 {
		t.Errorf("%d violations", rep.Violations())
	}
}
