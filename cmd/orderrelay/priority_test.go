package main

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// TestRelayFeed_IsLowPriority checks that the change feed the relay reads
// is the store's LowPriority one, whose reads cosmosstore's gateway tests
// show carry x-ms-cosmos-priority-level: Low (and its other calls none),
// and that the store itself, which also holds the leases, is unchanged.
func TestRelayFeed_IsLowPriority(t *testing.T) {
	cfg := config{CosmosEndpoint: "http://127.0.0.1:1/", CosmosKey: cosmiumtest.Key,
		CosmosDatabase: "orders", CosmosContainer: "orders"}
	orders, leases, err := openStores(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := relayFeed(orders).Priority(); got != azcosmos.PriorityLevelLow {
		t.Errorf("the relay's change feed reads at priority %q, want %q", got, azcosmos.PriorityLevelLow)
	}
	if got := leases.ChangeFeed().Priority(); got != "" {
		t.Errorf("the leases store's own change feed has priority %q, want none: LowPriority must not change the store", got)
	}
}
