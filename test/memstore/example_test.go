package memstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// The store refuses what Cosmos DB refuses, with its status code: an id with
// a character Cosmos DB does not accept is a 400 that matches
// idempotent.ErrRejected, and the batch writes nothing.
func ExampleStatusError() {
	s := memstore.New("/orderId")
	_, err := s.CreateBatch(context.Background(), "ord-1", []idempotent.Document{
		{ID: "ord-1", Body: []byte(`{"id":"ord-1","orderId":"ord-1"}`)},
		{ID: "inbox:a/b:ord-1", Body: []byte(`{"id":"inbox:a/b:ord-1","orderId":"ord-1"}`)},
	})
	var se *memstore.StatusError
	if errors.As(err, &se) {
		fmt.Println(se.StatusCode, se.Index, errors.Is(err, idempotent.ErrRejected), len(s.Items()))
	}
	// Output: 400 1 true 0
}
