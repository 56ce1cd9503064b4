package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
)

func docs(ids ...string) []order.Document {
	var out []order.Document
	for _, id := range ids {
		out = append(out, order.Document{ID: id, Body: []byte(`{"id":"` + id + `"}`)})
	}
	return out
}

func TestCreateBatch(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	if err := s.CreateBatch(ctx, "p1", docs("a", "b")); err != nil {
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
			err := s.CreateBatch(ctx, tt.pk, docs(tt.ids...))
			if tt.wantIndex < 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var be *memstore.BatchError
			if !errors.As(err, &be) || be.Index != tt.wantIndex || be.StatusCode != 409 || !errors.Is(err, order.ErrAlreadyExists) {
				t.Fatalf("err = %v, want a 409 on operation %d", err, tt.wantIndex)
			}
			if after := len(s.Items()); after != before {
				t.Errorf("a failed batch wrote %d documents", after-before)
			}
		})
	}
}

func TestCopiesAreIsolated(t *testing.T) {
	s := memstore.New()
	d := docs("a")
	if err := s.CreateBatch(context.Background(), "p", d); err != nil {
		t.Fatal(err)
	}
	d[0].Body[0] = 'X'
	it, _ := s.Get("p", "a")
	it.Body[1] = 'Y'
	if got, _ := s.Get("p", "a"); string(got.Body) != `{"id":"a"}` {
		t.Errorf("stored body changed through a caller's slice: %s", got.Body)
	}
}

func TestCancelledContextWritesNothing(t *testing.T) {
	s := memstore.New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.CreateBatch(ctx, "p", docs("a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if len(s.Items()) != 0 {
		t.Error("wrote with a cancelled context")
	}
}

func TestConcurrentCreatesHaveOneWinner(t *testing.T) {
	s := memstore.New()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.CreateBatch(context.Background(), "p", docs("x", fmt.Sprint("y", i%2)))
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
