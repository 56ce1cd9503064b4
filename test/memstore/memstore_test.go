package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// doc returns a document of partition pk, as the order package writes them:
// its orderId field is the partition key value.
func doc(pk, id string) idempotent.Document {
	b, err := json.Marshal(map[string]string{"id": id, "orderId": pk})
	if err != nil {
		panic(err)
	}
	return idempotent.Document{ID: id, Body: b}
}

func docs(pk string, ids ...string) []idempotent.Document {
	var out []idempotent.Document
	for _, id := range ids {
		out = append(out, doc(pk, id))
	}
	return out
}

func TestCreateBatch(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	if _, err := s.CreateBatch(ctx, "p1", docs("p1", "a", "b")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		pk        string
		ids       []string
		wantIndex int // -1: success
	}{
		{"same ids in another partition", "p2", []string{"a", "b"}, -1},
		{"conflict on the first operation", "p1", []string{"a", "c"}, 0},
		{"conflict on a later operation", "p1", []string{"c", "b"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(s.Items())
			_, err := s.CreateBatch(ctx, tt.pk, docs(tt.pk, tt.ids...))
			if tt.wantIndex < 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var be *memstore.BatchError
			if !errors.As(err, &be) || be.Index != tt.wantIndex || be.StatusCode != 409 || !errors.Is(err, idempotent.ErrAlreadyExists) {
				t.Fatalf("err = %v, want a 409 on operation %d", err, tt.wantIndex)
			}
			if after := len(s.Items()); after != before {
				t.Errorf("a failed batch wrote %d documents", after-before)
			}
		})
	}
}

func TestCopiesAreIsolated(t *testing.T) {
	s := memstore.New("/orderId")
	d := docs("p", "a")
	want := string(d[0].Body)
	if _, err := s.CreateBatch(context.Background(), "p", d); err != nil {
		t.Fatal(err)
	}
	d[0].Body[0] = 'X'
	it, _ := s.Get("p", "a")
	it.Body[1] = 'Y'
	if got, _ := s.Get("p", "a"); string(got.Body) != want {
		t.Errorf("stored body changed through a caller's slice: %s", got.Body)
	}
}

func TestCancelledContextWritesNothing(t *testing.T) {
	s := memstore.New("/orderId")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.CreateBatch(ctx, "p", docs("p", "a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if len(s.Items()) != 0 {
		t.Error("wrote with a cancelled context")
	}
}

func TestConcurrentCreatesHaveOneWinner(t *testing.T) {
	s := memstore.New("/orderId")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateBatch(context.Background(), "p", docs("p", "x", fmt.Sprint("y", i%2)))
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 || len(s.Items()) != 2 {
		t.Errorf("%d winners, %d documents; want 1 and 2", wins, len(s.Items()))
	}
}

func TestReplaceIsETagConditioned(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	if _, err := s.CreateBatch(ctx, "p", docs("p", "a")); err != nil {
		t.Fatal(err)
	}
	_, etag, err := s.ReadDocument(ctx, "p", "a")
	if err != nil {
		t.Fatal(err)
	}
	newTag, err := s.ReplaceDocument(ctx, "p", idempotent.Document{ID: "a", Body: []byte(`{"id":"a","orderId":"p","v":2}`)}, etag)
	if err != nil || newTag == etag {
		t.Fatalf("replace with the current ETag: %q, %v", newTag, err)
	}
	if _, err := s.ReplaceDocument(ctx, "p", idempotent.Document{ID: "a", Body: []byte(`{"id":"a","orderId":"p","v":3}`)}, etag); !errors.Is(err, idempotent.ErrPreconditionFailed) {
		t.Errorf("replace with a stale ETag = %v, want ErrPreconditionFailed", err)
	}
	if _, err := s.ReplaceDocument(ctx, "p", doc("p", "zz"), ""); !errors.Is(err, idempotent.ErrNotFound) {
		t.Errorf("replace of a missing document = %v, want ErrNotFound", err)
	}
	if it, _ := s.Get("p", "a"); string(it.Body) != `{"id":"a","orderId":"p","v":2}` || it.Writes != 2 {
		t.Errorf("document = %s after %d writes", it.Body, it.Writes)
	}
}

func TestTimeToLive(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memstore.NewWithClock("/orderId", func() time.Time { return now })
	marker := []idempotent.Document{{ID: "m", Body: []byte(`{"id":"m","orderId":"p","ttl":60}`)}, doc("p", "keep")}
	if _, err := s.CreateBatch(ctx, "p", marker); err != nil {
		t.Fatal(err)
	}
	now = now.Add(59 * time.Second)
	if _, _, err := s.ReadDocument(ctx, "p", "m"); err != nil {
		t.Fatalf("marker gone before its TTL: %v", err)
	}
	now = now.Add(time.Second)
	if _, _, err := s.ReadDocument(ctx, "p", "m"); !errors.Is(err, idempotent.ErrNotFound) {
		t.Fatalf("marker still there at its TTL: %v", err)
	}
	if len(s.Items()) != 1 {
		t.Errorf("items = %+v, want only the document without a TTL", s.Items())
	}
	if _, err := s.CreateBatch(ctx, "p", marker[:1]); err != nil {
		t.Errorf("re-creating an expired marker: %v", err)
	}
}
