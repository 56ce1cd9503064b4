package audit_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
)

// cosmiumStores returns a constructor of fresh containers, each on a
// cosmium server of its own, with cosmosstore's real adapters: its Store
// for reads and partition queries, straight to cosmium, and its
// low-priority ChangeFeed for the scan, through a FeedProxy (cosmium has no
// change feed). Only the feed goes through the proxy, which forwards
// everything else unchanged: the store's calls go straight to cosmium.
// (They were kept off the proxy while it cut off a few answers to POSTs
// in a thousand, which the SDK retried; see the proxy's bufferBody.)
func cosmiumStores(t *testing.T) func(t *testing.T) (store, audit.Feed) {
	if testing.Short() {
		t.Skip("builds and runs cosmium; skipped with -short")
	}
	var n atomic.Int64
	return func(t *testing.T) (store, audit.Feed) {
		srv := cosmiumtest.Start(t)
		coll := fmt.Sprintf("orders%d", n.Add(1))
		proxy := e2etest.StartFeedProxy(t, srv.Endpoint, srv.Key, "orders", coll)
		direct, err := cosmosstore.NewClientWithKey(srv.Endpoint, srv.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(direct.Close)
		proxied, err := cosmosstore.NewClientWithKey(proxy.Endpoint, srv.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxied.Close)
		if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), direct, "orders", coll, order.PartitionKeyPath); err != nil {
			t.Fatal(err)
		}
		s, err := cosmosstore.New(direct, "orders", coll, order.PartitionKeyPath)
		if err != nil {
			t.Fatal(err)
		}
		feed, err := cosmosstore.New(proxied, "orders", coll, order.PartitionKeyPath)
		if err != nil {
			t.Fatal(err)
		}
		return s, feed.ChangeFeed().LowPriority()
	}
}

// TestAudit_Cosmium_CatchesEveryPlantedViolation is
// TestAudit_Memstore_CatchesEveryPlantedViolation on cosmium through the
// real SDK and cosmosstore: the same healthy world audits clean and every
// planted violation is reported with its ids.
func TestAudit_Cosmium_CatchesEveryPlantedViolation(t *testing.T) {
	testPlants(t, cosmiumStores(t))
}
