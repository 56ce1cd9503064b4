package main

import (
	"testing"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// TestHandlerFactCache: the order writer newHandler builds keeps a fact
// cache of WORKER_FACT_CACHE orders, none with 0. Building it sends no
// request, so the store needs no endpoint that answers.
func TestHandlerFactCache(t *testing.T) {
	client, err := cosmosstore.NewClientWithKey("https://127.0.0.1:1/", "bm90LWEta2V5" /* base64 of not-a-key: nothing is signed */, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := cosmosstore.New(client, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{order.DefaultFactCacheSize, 7, 0} {
		cfg := config{FactCache: size}
		h, _, err := newHandler(cfg, store, true, telemetry.Disabled())
		if err != nil {
			t.Fatal(err)
		}
		p, ok := h.(*order.Processor)
		if !ok {
			t.Fatalf("handler %T, want the order writer", h)
		}
		if got := p.CacheStats().Capacity; got != size {
			t.Errorf("WORKER_FACT_CACHE %d: the cache holds up to %d orders", size, got)
		}
	}
}
