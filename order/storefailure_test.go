package order_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// refusingStore is a memstore whose writes fail with err: every create, batch
// and replace, as a Cosmos DB that refuses them would. Reads succeed.
type refusingStore struct {
	*memstore.Store
	err error
}

func (s refusingStore) CreateBatch(context.Context, string, []idempotent.Document) ([]string, error) {
	return nil, s.err
}
func (s refusingStore) ReplaceDocument(context.Context, string, idempotent.Document, string) (string, error) {
	return "", s.err
}
func (s refusingStore) PatchDocument(context.Context, string, string, idempotent.Patch) (string, error) {
	return "", s.err
}

// TestStoreRejectionIsDeadLetteredAtOnce: a write the store refuses for the
// message's content (ErrRejected: a 413, a 400 for the content) can never
// succeed, on any of the three write paths, so it is Invalid at once with
// the status in the description; a permanent error that is not the
// message's fault stays a retry the worker's breaker counts.
func TestStoreRejectionIsDeadLetteredAtOnce(t *testing.T) {
	rejected := fmt.Errorf("transactional batch: 413 Request Entity Too Large: %w", idempotent.ErrRejected)
	forbidden := errors.New("403 Forbidden: the identity may not write the container")
	type handler interface {
		Process(context.Context, idempotent.Message) idempotent.Result
	}
	paths := []struct {
		name string
		// setup prepares s (writes succeed there) and returns the handler
		// that writes to r and the message to give it
		run func(s *memstore.Store, r idempotent.DocumentStore, st idempotent.Store) (handler, idempotent.Message)
	}{
		{"order placement", func(s *memstore.Store, r idempotent.DocumentStore, st idempotent.Store) (handler, idempotent.Message) {
			return order.NewProcessor(st, fixedNow), msg(validBody)
		}},
		{"status change", func(s *memstore.Store, r idempotent.DocumentStore, st idempotent.Store) (handler, idempotent.Message) {
			if res := order.NewProcessor(s, fixedNow).Process(context.Background(), msg(validBody)); res.Outcome != idempotent.Created {
				t.Fatalf("setup: %v %s", res.Outcome, res.Description)
			}
			return order.NewProcessor(st, fixedNow, order.WithDocuments(r)), statusMsg(2, "paid")
		}},
		{"inbox consumer", func(s *memstore.Store, r idempotent.DocumentStore, st idempotent.Store) (handler, idempotent.Message) {
			return &order.InboxConsumer{Name: "loyalty", Store: r, MarkerTTL: 35 * 24 * time.Hour, Now: fixedNow}, msg(validBody)
		}},
	}
	for _, p := range paths {
		for _, tt := range []struct {
			err        error
			want       idempotent.Outcome
			wantReason string
			dependency bool
		}{
			{rejected, idempotent.Invalid, idempotent.ReasonStoreRejected, false},
			{forbidden, idempotent.Transient, idempotent.ReasonStoreError, true},
		} {
			t.Run(p.name+"/"+tt.wantReason, func(t *testing.T) {
				s := memstore.New("/orderId")
				r := refusingStore{s, tt.err}
				h, m := p.run(s, r, r)
				res := h.Process(context.Background(), m)
				if res.Outcome != tt.want || res.Reason != tt.wantReason {
					t.Fatalf("Process = %v %q (%s), want %v %q", res.Outcome, res.Reason, res.Description, tt.want, tt.wantReason)
				}
				if res.Key != "ord-1" || !errors.Is(res.Err, tt.err) || !strings.Contains(res.Description, tt.err.Error()[:30]) {
					t.Errorf("result %+v does not carry the order id and the store's error with its status", res)
				}
				if res.DependencyFailed() != tt.dependency {
					t.Errorf("DependencyFailed = %v, want %v", res.DependencyFailed(), tt.dependency)
				}
			})
		}
	}
}
