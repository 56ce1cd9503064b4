package cosmosstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// azcosmos v1.5.0 fetches the account's properties under
// context.WithoutCancel, for up to 60 s: every store call must still return
// when its context ends, not when the SDK's own timeout does.
func TestStore_AccountRequestHangs_CallsReturnWhenTheirContextEnds(t *testing.T) {
	calls := map[string]func(context.Context, *cosmosstore.Store) error{
		"Ping":  func(ctx context.Context, s *cosmosstore.Store) error { return s.Ping(ctx) },
		"Probe": func(ctx context.Context, s *cosmosstore.Store) error { return s.Probe(ctx) },
		"ReadDocument": func(ctx context.Context, s *cosmosstore.Store) error {
			_, _, err := s.ReadDocument(ctx, "p", "a")
			return err
		},
		"ReadOrder": func(ctx context.Context, s *cosmosstore.Store) error {
			_, err := order.ReadOrder(ctx, s, "a")
			return err
		},
		"CreateBatch, an order": func(ctx context.Context, s *cosmosstore.Store) error {
			return writeOrder(ctx, s, newWrite("ord-1", "cust-1"))
		},
		"CreateBatch, one document": func(ctx context.Context, s *cosmosstore.Store) error {
			_, err := s.CreateBatch(ctx, "p", []idempotent.Document{{ID: "a", Body: []byte(`{"id":"a","orderId":"p"}`)}})
			return err
		},
		"ReplaceDocument": func(ctx context.Context, s *cosmosstore.Store) error {
			_, err := s.ReplaceDocument(ctx, "p", idempotent.Document{ID: "a", Body: []byte(`{"id":"a","orderId":"p"}`)}, "")
			return err
		},
		"Check": func(ctx context.Context, s *cosmosstore.Store) error { _, err := s.Check(ctx); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			g := newGateway(t, false)
			g.hangAccount, g.accountRequested = make(chan struct{}), make(chan struct{})
			s := storeFor(t, g.endpoint(), noRetries())
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- call(ctx, s) }()
			<-g.accountRequested
			cancel()
			err := <-errc
			g.mu.Lock()
			disconnected := g.accountDisconnected
			g.mu.Unlock()
			close(g.hangAccount) // let the SDK's abandoned request finish
			if !errors.Is(err, context.Canceled) || disconnected {
				t.Errorf("%s returned %v after the SDK gave up its account request (%v); want context.Canceled while it still waits", name, err, disconnected)
			}
		})
	}
}
