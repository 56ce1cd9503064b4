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

// cosmiumStores returns a constructor of fresh containers on one cosmium
// server, each read through a FeedProxy (cosmium has no change feed), with
// cosmosstore's real adapters: its Store for reads and partition queries,
// its low-priority ChangeFeed for the scan.
func cosmiumStores(t *testing.T) func(t *testing.T) (store, audit.Feed) {
	if testing.Short() {
		t.Skip("builds and runs cosmium; skipped with -short")
	}
	srv := cosmiumtest.Start(t)
	var n atomic.Int64
	return func(t *testing.T) (store, audit.Feed) {
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
