package memstore_test

import (
	"errors"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// Whatever the body, a batch either stores it unchanged or writes nothing;
// a *StatusError is always a status Cosmos DB answers a refused write with.
func FuzzCreateBatch(f *testing.F) {
	f.Add("a", []byte(`{"id":"a","orderId":"p"}`))
	f.Add("a", []byte(`{"id":"a","orderId":"p","ttl":-1}`))
	f.Add("a", []byte(`{"id":"a","orderId":"p","ttl":0}`))
	f.Add("a#", []byte(`{"id":"a#","orderId":"p"}`))
	f.Add("a", []byte(`{"id":"a","orderId":"q"}`))
	f.Add("a", []byte(`[1]`))
	f.Add("a", []byte(`{"id":"a",`))
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		s := memstore.New("/orderId")
		_, err := s.CreateBatch(t.Context(), "p", []idempotent.Document{{ID: id, Body: body}})
		it, stored := s.Get("p", id)
		if err != nil {
			if len(s.Items()) != 0 {
				t.Fatalf("a failed batch wrote: %v", err)
			}
			var se *memstore.StatusError
			if errors.As(err, &se) && se.StatusCode != 400 && se.StatusCode != 413 {
				t.Fatalf("status %d for a new document: %v", se.StatusCode, err)
			}
			return
		}
		if !stored || string(it.Body) != string(body) {
			t.Fatalf("stored %q (%v), want the body unchanged", it.Body, stored)
		}
	})
}
