package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// TestOutageFailsOnlyItsOperationsAndPartitions: an outage fails the
// operations it names on the partitions it selects, with its status and
// before writing anything, and leaves every other call, Ping included
// unless reads fail, as it was; ending it restores every call.
func TestOutageFailsOnlyItsOperationsAndPartitions(t *testing.T) {
	ctx := context.Background()
	doc := func(pk, id string) idempotent.Document {
		return idempotent.Document{ID: id, Body: fmt.Appendf(nil, `{"id":%q,"orderId":%q,"v":1}`, id, pk)}
	}
	inRange := memstore.HashRange(0, 4)
	var hit, miss string // a key in the failing range, one outside it
	for i := 0; hit == "" || miss == ""; i++ {
		k := fmt.Sprintf("ord-%d", i)
		if inRange(k) {
			hit = k
		} else {
			miss = k
		}
	}
	for _, tt := range []struct {
		name      string
		outage    memstore.Outage
		failing   map[string]bool // "create", "replace", "patch", "read" that fail on hit
		onMiss    bool            // whether they fail on miss too
		status    int
		sub       int
		transient bool
		ping      bool // whether Ping fails
	}{
		{"write region", memstore.WriteRegionOutage(), map[string]bool{"create": true, "replace": true, "patch": true}, true, 503, 0, true, false},
		{"read-only role", memstore.ReadOnlyRole(), map[string]bool{"create": true, "replace": true, "patch": true}, true, 403, memstore.SubStatusRBACBlocked, false, false},
		{"storage quota", memstore.StorageQuota(nil), map[string]bool{"create": true}, true, 403, 0, false, false},
		{"partition at its limit", memstore.StorageQuota(inRange), map[string]bool{"create": true}, false, 403, memstore.SubStatusPartitionKeyQuotaExceeded, false, false},
		{"hot partition", memstore.HotPartition(inRange), map[string]bool{"create": true, "replace": true, "patch": true}, false, 429, memstore.SubStatusRUBudgetExceeded, true, false},
		{"patches only", memstore.Outage{Ops: memstore.OpPatch}, map[string]bool{"patch": true}, true, 503, 0, true, false},
		{"everything", memstore.Outage{Ops: memstore.OpAll}, map[string]bool{"create": true, "replace": true, "patch": true, "read": true}, true, 503, 0, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New("/orderId")
			for _, pk := range []string{hit, miss} {
				if _, err := s.CreateBatch(ctx, pk, []idempotent.Document{doc(pk, "a")}); err != nil {
					t.Fatal(err)
				}
			}
			end := s.SetOutage(tt.outage)
			calls := map[string]func(pk string) error{
				"create": func(pk string) error {
					_, err := s.CreateBatch(ctx, pk, []idempotent.Document{doc(pk, "b")})
					return err
				},
				"replace": func(pk string) error { _, err := s.ReplaceDocument(ctx, pk, doc(pk, "a"), ""); return err },
				"patch": func(pk string) error {
					_, err := s.PatchDocument(ctx, pk, "a", idempotent.Patch{Ops: []idempotent.PatchOp{{Op: "set", Path: "/v", Value: 2}}})
					return err
				},
				"read": func(pk string) error { _, _, err := s.ReadDocument(ctx, pk, "a"); return err },
			}
			for name, call := range calls {
				for _, pk := range []string{hit, miss} {
					want := tt.failing[name] && (pk == hit || tt.onMiss)
					err := call(pk)
					var se *memstore.StatusError
					switch {
					case !want && err != nil:
						t.Errorf("%s on %s: %v, want success", name, pk, err)
					case want && (!errors.As(err, &se) || se.StatusCode != tt.status || se.SubStatus != tt.sub):
						t.Errorf("%s on %s: %v, want %d sub-status %d", name, pk, err, tt.status, tt.sub)
					case want && idempotent.IsTransient(err) != tt.transient:
						t.Errorf("%s on %s: transient %v, want %v", name, pk, idempotent.IsTransient(err), tt.transient)
					}
				}
			}
			if _, ok := s.Get(hit, "b"); ok && tt.failing["create"] {
				t.Error("a failed create wrote its document")
			}
			if err := s.Ping(ctx); (err != nil) != tt.ping {
				t.Errorf("Ping = %v, want failing %v", err, tt.ping)
			}
			end()
			for name, call := range calls {
				if name == "create" {
					continue // b exists where the create succeeded
				}
				if err := call(hit); err != nil {
					t.Errorf("after the outage, %s: %v", name, err)
				}
			}
		})
	}
}

// TestHashRangePartitionsTheKeys: the n ranges of HashRange hold every
// key exactly once, each about a quarter of them for n = 4
// (within a tenth), though they differ only in their last characters.
func TestHashRangePartitionsTheKeys(t *testing.T) {
	const n, keys = 4, 4000
	ranges := make([]func(string) bool, n)
	for i := range ranges {
		ranges[i] = memstore.HashRange(i, n)
	}
	counts := make([]int, n)
	for k := range keys {
		in := 0
		for i, r := range ranges {
			if r(fmt.Sprintf("ord-%03d", k)) { // alike keys, as orders' are
				counts[i]++
				in++
			}
		}
		if in != 1 {
			t.Fatalf("ord-%d is in %d ranges, want 1", k, in)
		}
	}
	for i, c := range counts {
		if c < keys/n*9/10 || c > keys/n*11/10 {
			t.Errorf("range %d holds %d of %d keys, want about %d", i, c, keys, keys/n)
		}
	}
}
