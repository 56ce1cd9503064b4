package memstore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// TestPatchDocument: a conditional patch applies all its operations when
// every condition holds, with a new ETag; a condition that fails (a number
// not below, a field that is missing or not a number) is a 412, a missing
// document a 404, and what Cosmos DB refuses a 400; none of them writes.
func TestPatchDocument(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	const body = `{"id":"a","orderId":"p1","version":3,"name":"x","hashes":{},"count":1}`
	if _, err := s.CreateBatch(ctx, "p1", []idempotent.Document{{ID: "a", Body: []byte(body)}}); err != nil {
		t.Fatal(err)
	}
	set := func(path string, v any) idempotent.PatchOp {
		return idempotent.PatchOp{Op: idempotent.PatchSet, Path: path, Value: v}
	}
	tests := []struct {
		name   string
		id     string
		p      idempotent.Patch
		status int // 0: applied
	}{
		{"version not below", "a", idempotent.Patch{If: []idempotent.Below{{Path: "/version", Value: 3}}, Ops: []idempotent.PatchOp{set("/name", "y")}}, http.StatusPreconditionFailed},
		{"missing field", "a", idempotent.Patch{If: []idempotent.Below{{Path: "/absent", Value: 3}}, Ops: []idempotent.PatchOp{set("/name", "y")}}, http.StatusPreconditionFailed},
		{"not a number", "a", idempotent.Patch{If: []idempotent.Below{{Path: "/name", Value: 3}}, Ops: []idempotent.PatchOp{set("/name", "y")}}, http.StatusPreconditionFailed},
		{"missing document", "b", idempotent.Patch{Ops: []idempotent.PatchOp{set("/name", "y")}}, http.StatusNotFound},
		{"missing parent", "a", idempotent.Patch{Ops: []idempotent.PatchOp{set("/nothing/k", "y")}}, http.StatusBadRequest},
		{"the id", "a", idempotent.Patch{Ops: []idempotent.PatchOp{set("/id", "b")}}, http.StatusBadRequest},
		{"the partition key", "a", idempotent.Patch{Ops: []idempotent.PatchOp{set("/orderId", "p2")}}, http.StatusBadRequest},
		{"increment a string", "a", idempotent.Patch{Ops: []idempotent.PatchOp{{Op: idempotent.PatchIncrement, Path: "/name", Value: int64(1)}}}, http.StatusBadRequest},
		{"too many operations", "a", idempotent.Patch{Ops: make([]idempotent.PatchOp, idempotent.MaxPatchOps+1)}, http.StatusBadRequest},
		{"applied", "a", idempotent.Patch{If: []idempotent.Below{{Path: "/version", Value: 4}, {Path: "/count", Value: 2}}, Ops: []idempotent.PatchOp{
			set("/version", 4), set("/hashes/4", "h4"), {Op: idempotent.PatchIncrement, Path: "/count", Value: int64(1)}, {Op: idempotent.PatchIncrement, Path: "/new", Value: int64(5)},
		}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := s.Get("p1", "a")
			etag, err := s.PatchDocument(ctx, "p1", tt.id, tt.p)
			after, _ := s.Get("p1", "a")
			if tt.status != 0 {
				var se *memstore.StatusError
				if !errors.As(err, &se) || se.StatusCode != tt.status {
					t.Fatalf("PatchDocument = %v, want a %d", err, tt.status)
				}
				if after.ETag != before.ETag || string(after.Body) != string(before.Body) {
					t.Errorf("a failed patch wrote %s", after.Body)
				}
				return
			}
			if err != nil || etag == "" || etag == before.ETag || etag != after.ETag {
				t.Fatalf("PatchDocument = %q, %v; ETag before %q, after %q", etag, err, before.ETag, after.ETag)
			}
			const want = `{"count":2,"hashes":{"4":"h4"},"id":"a","name":"x","new":5,"orderId":"p1","version":4}`
			if string(after.Body) != want {
				t.Errorf("patched body = %s, want %s", after.Body, want)
			}
		})
	}
	if !errors.Is(func() error {
		_, err := s.PatchDocument(ctx, "p1", "a", idempotent.Patch{If: []idempotent.Below{{Path: "/version", Value: 1}}, Ops: []idempotent.PatchOp{set("/name", "z")}})
		return err
	}(), idempotent.ErrPreconditionFailed) {
		t.Error("a 412 does not match idempotent.ErrPreconditionFailed")
	}
}

// TestPatchDocument_PartitionKeyOfTheContainer: the field a patch may not
// change is the one the store's partition key path names, not the orders
// container's: in a container partitioned on /tenantId, /tenantId is
// refused and an orderId field is an ordinary field.
func TestPatchDocument_PartitionKeyOfTheContainer(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/tenantId")
	const body = `{"id":"a","tenantId":"t1","orderId":"o1"}`
	if _, err := s.CreateBatch(ctx, "t1", []idempotent.Document{{ID: "a", Body: []byte(body)}}); err != nil {
		t.Fatal(err)
	}
	set := func(path string, v any) idempotent.Patch {
		return idempotent.Patch{Ops: []idempotent.PatchOp{{Op: idempotent.PatchSet, Path: path, Value: v}}}
	}
	var se *memstore.StatusError
	if _, err := s.PatchDocument(ctx, "t1", "a", set("/tenantId", "t2")); !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest {
		t.Errorf("patch of the partition key /tenantId = %v, want a 400", err)
	}
	if _, err := s.PatchDocument(ctx, "t1", "a", set("/orderId", "o2")); err != nil {
		t.Fatalf("patch of an ordinary field /orderId = %v", err)
	}
	got, _ := s.Get("t1", "a")
	if want := `{"id":"a","orderId":"o2","tenantId":"t1"}`; string(got.Body) != want {
		t.Errorf("patched body = %s, want %s", got.Body, want)
	}
}
