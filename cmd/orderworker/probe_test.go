package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// TestHandlerProbeSeesAStoreThatRefusesWrites: the breaker's probe that
// newHandler returns, for the order writer and for the inbox consumer,
// fails when the store answers reads and refuses writes (a write-region
// outage answers 503, a role cut to Data Reader 403), and passes when the
// store answers both. Cosmium serves the reads, behind a proxy that answers
// every delete with the refusal. A probe that only reads (store.Ping) passed
// those outages, and the breaker never opened on a quiet queue.
func TestHandlerProbeSeesAStoreThatRefusesWrites(t *testing.T) {
	cosmium := cosmiumtest.Start(t)
	refuse := newRefusingProxy(t, strings.TrimSuffix(strings.TrimPrefix(cosmium.Endpoint, "http://"), "/"))
	client, err := cosmosstore.NewClientWithKey(refuse.endpoint(), cosmium.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), client, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	store, err := cosmosstore.New(client, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]config{
		"order writer":   {FactCache: order.DefaultFactCacheSize},
		"inbox consumer": {InboxConsumer: "audit", InboxTTL: 36 * 24 * time.Hour},
	}
	for name, cfg := range handlers {
		_, probe, err := newHandler(cfg, store, true, telemetry.Disabled())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, tt := range []struct {
			name      string
			deletes   int // the status the proxy answers deletes with; 0: forward
			transient bool
		}{
			{"healthy", 0, false},
			{"write-region outage", http.StatusServiceUnavailable, true},
			{"role cut to Data Reader", http.StatusForbidden, false},
		} {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				refuse.deletes.Store(int64(tt.deletes))
				defer refuse.deletes.Store(0)
				if err := store.Ping(t.Context()); err != nil {
					t.Fatalf("Ping = %v: the store answers reads", err)
				}
				// The SDK retries a 503 on its own; a deadline bounds it, as
				// the breaker bounds its probe.
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				err := probe(ctx)
				if (err != nil) != (tt.deletes != 0) {
					t.Errorf("probe = %v, want failing %v", err, tt.deletes != 0)
				}
				if err != nil && idempotent.IsTransient(err) != tt.transient {
					t.Errorf("probe = %v: transient %v, want %v", err, idempotent.IsTransient(err), tt.transient)
				}
			})
		}
	}
}

// refusingProxy forwards every request to cosmium except the document
// deletes, which it answers with the status in deletes when that is set.
type refusingProxy struct {
	srv     *httptest.Server
	deletes atomic.Int64
}

func (p *refusingProxy) endpoint() string { return p.srv.URL + "/" }

func newRefusingProxy(t *testing.T, target string) *refusingProxy {
	t.Helper()
	p := &refusingProxy{}
	rp := accountProxy(target, func() string { return p.srv.Listener.Addr().String() })
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status := int(p.deletes.Load()); status != 0 && r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/docs/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"code":"refused","message":"the test refuses deletes"}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}
