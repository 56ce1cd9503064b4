package audit_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
)

// cosmiumStores returns a constructor of fresh containers, each on a
// cosmium server of its own, read through a FeedProxy (cosmium has no
// change feed), with cosmosstore's real adapters: its Store for reads and
// partition queries, its low-priority ChangeFeed for the scan. (A proxied
// response from cosmium is sometimes cut off by a closed connection, cause
// not found, and the SDK retries the request; under -race its retry of a
// query can then be reported as racing with net/http's transport over the
// request body, inside azcore. With one server for every subtest that
// happened in most -race runs, with a server each in about one in three.)
func cosmiumStores(t *testing.T) func(t *testing.T) (store, audit.Feed) {
	if testing.Short() {
		t.Skip("builds and runs cosmium; skipped with -short")
	}
	var n atomic.Int64
	return func(t *testing.T) (store, audit.Feed) {
		srv := cosmiumtest.Start(t)
		coll := fmt.Sprintf("orders%d", n.Add(1))
		proxy := e2etest.StartFeedProxy(t, srv.Endpoint, srv.Key, "orders", coll)
		c, err := cosmosstore.NewClientWithKey(proxy.Endpoint, srv.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), c, "orders", coll); err != nil {
			t.Fatal(err)
		}
		s, err := cosmosstore.New(c, "orders", coll)
		if err != nil {
			t.Fatal(err)
		}
		return s, s.ChangeFeed().LowPriority()
	}
}

// TestAudit_Cosmium_CatchesEveryPlantedViolation is
// TestAudit_Memstore_CatchesEveryPlantedViolation on cosmium through the
// real SDK and cosmosstore: the same healthy world audits clean and every
// planted violation is reported with its ids.
func TestAudit_Cosmium_CatchesEveryPlantedViolation(t *testing.T) {
	testPlants(t, cosmiumStores(t))
}
