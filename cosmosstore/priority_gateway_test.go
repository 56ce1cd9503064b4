package cosmosstore_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// TestChangeFeed_FakeGateway_LowPriority checks that a LowPriority change
// feed sends x-ms-cosmos-priority-level: Low on every change feed read and
// on nothing else (the account, container and partition key range reads),
// and that the store's default change feed sends no priority at all.
func TestChangeFeed_FakeGateway_LowPriority(t *testing.T) {
	for _, tc := range []struct {
		name string
		feed func(*cosmosstore.Store) *cosmosstore.ChangeFeed
		want string
	}{
		{"default", (*cosmosstore.Store).ChangeFeed, ""},
		{"low", func(s *cosmosstore.Store) *cosmosstore.ChangeFeed { return s.ChangeFeed().LowPriority() }, "Low"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFeedGateway(t)
			s := storeFor(t, g.srv.URL+"/", noRetries())
			f := tc.feed(s)
			if got := f.Priority(); got != azcosmos.PriorityLevel(tc.want) {
				t.Errorf("Priority() = %q, want %q", got, tc.want)
			}
			for i := range 4 {
				g.write(order.EventID(fmt.Sprintf("ord-%d", i)), []string{"10", "90"}[i%2], 1)
			}
			ctx := context.Background()
			ranges, err := f.FeedRanges(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, rg := range ranges {
				docs, next, err := f.ReadChanges(ctx, rg, "", 10)
				if err != nil || len(docs) == 0 {
					t.Fatalf("ReadChanges(%s) = %d docs, %v", rg, len(docs), err)
				}
				if _, _, err := f.ReadChanges(ctx, rg, next, 10); err != nil { // a 304
					t.Fatal(err)
				}
			}
			sent := g.sent()
			if len(sent) < 4 {
				t.Fatalf("%d change feed reads, want at least 4", len(sent))
			}
			for _, r := range sent {
				if r.priority != tc.want {
					t.Errorf("change feed read of range %s (status %d) sent priority %q, want %q", r.rangeID, r.status, r.priority, tc.want)
				}
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, o := range g.others {
				if !strings.HasSuffix(o, ": ") {
					t.Errorf("request %s: want no priority on a request that is not a change feed read", o)
				}
			}
		})
	}
}

// TestStore_FakeGateway_NoPriority checks that the store's calls that the
// worker makes (batches, reads, replaces, patches, creates, deletes) send
// no x-ms-cosmos-priority-level, so that Cosmos DB treats them as High, its
// default, even in a process whose change feed is LowPriority.
func TestStore_FakeGateway_NoPriority(t *testing.T) {
	g := newGateway(t, false)
	g.setBatch(batchReply(http.StatusOK, nil, 201))
	g.setRead(reply{status: http.StatusOK, body: `{"id":"ord-1","orderId":"ord-1"}`})
	g.setReplace(reply{status: http.StatusOK, body: `{}`})
	g.setPatch(reply{status: http.StatusOK, body: `{}`})
	g.createItem = reply{status: http.StatusCreated, body: `{}`}
	g.deleteItem = reply{status: http.StatusNoContent}
	s := storeFor(t, g.endpoint(), noRetries())
	_ = s.ChangeFeed().LowPriority() // a low-priority feed of the same store changes nothing here
	ctx := context.Background()
	doc := idempotent.Document{ID: "ord-1", Body: []byte(`{"id":"ord-1","orderId":"ord-1"}`)}
	if _, err := s.CreateBatch(ctx, "ord-1", []idempotent.Document{doc}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadDocument(ctx, "ord-1", "ord-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReplaceDocument(ctx, "ord-1", doc, `"e1"`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PatchDocument(ctx, "ord-1", "ord-1", idempotent.Patch{Ops: []idempotent.PatchOp{{Op: idempotent.PatchSet, Path: "/status", Value: "Paid"}}}); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.priorities) < 5 {
		t.Fatalf("%d requests, want the account and 4 document requests", len(g.priorities))
	}
	for _, p := range g.priorities {
		if !strings.HasSuffix(p, ": ") {
			t.Errorf("request %s: the worker's requests must carry no priority", p)
		}
	}
}
