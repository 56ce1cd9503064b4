package memstore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// TestProbeSeesTheOutagesWritesMeet: Probe, a point read and a delete of a
// missing document, fails under every outage of deletes of its partition,
// WriteRegionOutage and ReadOnlyRole included, where Ping, the read alone,
// passes; it passes a storage quota (deletes are allowed there), as
// cosmosstore's Probe does.
func TestProbeSeesTheOutagesWritesMeet(t *testing.T) {
	tests := []struct {
		name      string
		outage    *memstore.Outage
		ping      bool // whether Ping fails
		probe     bool // whether Probe fails
		status    int  // Probe's StatusError
		sub       int
		transient bool
	}{
		{name: "no outage"},
		{name: "write region", outage: ptr(memstore.WriteRegionOutage()), probe: true, status: 503, transient: true},
		{name: "read-only role", outage: ptr(memstore.ReadOnlyRole()), probe: true, status: 403, sub: memstore.SubStatusRBACBlocked},
		{name: "every hot partition", outage: ptr(memstore.HotPartition(nil)), probe: true, status: 429, sub: memstore.SubStatusRUBudgetExceeded, transient: true},
		{name: "deletes only", outage: &memstore.Outage{Ops: memstore.OpDelete}, probe: true, status: 503, transient: true},
		{name: "storage quota", outage: ptr(memstore.StorageQuota(nil))},
		{name: "creates, replaces and patches only: Probe cannot see it", outage: &memstore.Outage{Ops: memstore.OpCreate | memstore.OpReplace | memstore.OpPatch}},
		{name: "reads", outage: &memstore.Outage{Ops: memstore.OpRead}, ping: true, probe: true, status: 503, transient: true},
		{name: "everything", outage: &memstore.Outage{Ops: memstore.OpAll}, ping: true, probe: true, status: 503, transient: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New("/orderId")
			if tt.outage != nil {
				defer s.SetOutage(*tt.outage)()
			}
			if err := s.Ping(t.Context()); (err != nil) != tt.ping {
				t.Errorf("Ping = %v, want failing %v", err, tt.ping)
			}
			err := s.Probe(t.Context())
			var se *memstore.StatusError
			switch {
			case !tt.probe && err != nil:
				t.Errorf("Probe = %v, want nil", err)
			case tt.probe && (!errors.As(err, &se) || se.StatusCode != tt.status || se.SubStatus != tt.sub):
				t.Errorf("Probe = %v, want a StatusError %d sub-status %d", err, tt.status, tt.sub)
			case tt.probe && idempotent.IsTransient(err) != tt.transient:
				t.Errorf("Probe = %v: transient %v, want %v", err, idempotent.IsTransient(err), tt.transient)
			}
			if tt.probe && !tt.ping && se != nil && se.Op != "probe delete" {
				t.Errorf("Probe failed in %q, want its delete (\"probe delete\")", se.Op)
			}
			if n := len(s.Items()); n != 0 {
				t.Errorf("the store holds %d documents after Probe, want none", n)
			}
			if n := s.ChangeFeedLen(); n != 0 {
				t.Errorf("the change feed holds %d entries after Probe, want none", n)
			}
		})
	}
}

// TestProbeSeesOnlyItsKeyRange: Probe addresses one partition key value,
// so of the four key ranges of HashRange(i, 4), an outage of writes (or of
// everything) fails Probe in exactly one, the range holding its value, and
// passes it in the three that spare it; Ping fails only when reads fail
// in that range.
func TestProbeSeesOnlyItsKeyRange(t *testing.T) {
	tests := []struct {
		name   string
		outage func(keys func(string) bool) memstore.Outage
		reads  bool
	}{
		{"hot partition", memstore.HotPartition, false},
		{"writes of a key range", func(keys func(string) bool) memstore.Outage {
			return memstore.Outage{Ops: memstore.OpWrites, PartitionKeys: keys}
		}, false},
		{"one partition of four down", func(keys func(string) bool) memstore.Outage {
			return memstore.Outage{Ops: memstore.OpAll, PartitionKeys: keys}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 4
			var probeFails, pingFails []int
			for i := range n {
				s := memstore.New("/orderId")
				end := s.SetOutage(tt.outage(memstore.HashRange(i, n)))
				if err := s.Probe(t.Context()); err != nil {
					probeFails = append(probeFails, i)
				}
				if err := s.Ping(t.Context()); err != nil {
					pingFails = append(pingFails, i)
				}
				end()
			}
			if len(probeFails) != 1 {
				t.Errorf("Probe failed under the outage of ranges %v of %d, want exactly one: the range of its key", probeFails, n)
			}
			wantPing := 0
			if tt.reads {
				wantPing = 1
			}
			if len(pingFails) != wantPing || wantPing == 1 && pingFails[0] != probeFails[0] {
				t.Errorf("Ping failed under the outage of ranges %v, want %d (the range where Probe fails, %v)", pingFails, wantPing, probeFails)
			}
		})
	}
}

// TestProbeEndsWithTheOutageAndTheContext: Probe succeeds again once the
// outage ends, and returns the context's error once it has ended.
func TestProbeEndsWithTheOutageAndTheContext(t *testing.T) {
	s := memstore.New("/orderId")
	end := s.SetOutage(memstore.WriteRegionOutage())
	if err := s.Probe(t.Context()); !errors.Is(err, idempotent.ErrTransient) {
		t.Fatalf("Probe under a write-region outage = %v, want transient", err)
	}
	end()
	if err := s.Probe(t.Context()); err != nil {
		t.Errorf("Probe after the outage = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Probe(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Probe after cancel = %v, want context.Canceled", err)
	}
	var se *memstore.StatusError
	s.SetOutage(memstore.Outage{Ops: memstore.OpDelete, StatusCode: http.StatusForbidden})
	if err := s.Probe(t.Context()); !errors.As(err, &se) || se.StatusCode != http.StatusForbidden || idempotent.IsTransient(err) {
		t.Errorf("Probe under a 403 of deletes = %v, want a permanent 403", err)
	}
}

// TestProbeDeletesItsDocumentIfCreated: a document under Probe's id and
// partition key value, which nothing but a test creates, is deleted by
// Probe, as Cosmos DB deletes it, and Probe succeeds.
func TestProbeDeletesItsDocumentIfCreated(t *testing.T) {
	s := memstore.New("/orderId")
	const ping = "memstore-ping"
	doc := idempotent.Document{ID: ping, Body: []byte(`{"id":"memstore-ping","orderId":"memstore-ping"}`)}
	if _, err := s.CreateBatch(t.Context(), ping, []idempotent.Document{doc}); err != nil {
		t.Fatal(err)
	}
	if err := s.Probe(t.Context()); err != nil {
		t.Errorf("Probe with its document present = %v, want nil", err)
	}
	if _, ok := s.Get(ping, ping); ok {
		t.Error("Probe left its document in place, want it deleted")
	}
}
