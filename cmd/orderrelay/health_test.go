package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// metricNames is a fake OTLP/HTTP collector that keeps the names of the
// metrics it receives.
type metricNames struct {
	mu    sync.Mutex
	names map[string]bool
}

func (c *metricNames) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/metrics" {
		w.Header().Set("Content-Type", "application/x-protobuf") // traces: accepted, not kept
		return
	}
	var req collmetrics.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rm := range req.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				c.names[m.Name] = true
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// TestRunServesHealthAndExportsMetrics runs the command itself against
// cosmium (behind the change-feed proxy, as on the local stack) and the
// test broker with the topic, with RELAY_HEALTH_ADDR, Prometheus, an OTLP
// collector and the leases in a container of their own
// (COSMOS_LEASES_CONTAINER, as in Azure): /startupz and /readyz pass once it runs (owning the
// leases, both services reachable), /livez passes, an order written is
// published and counted on /metrics, and when run returns the collector
// has received the relay's metrics and the lease documents are in the
// leases container, none in the orders container.
func TestRunServesHealthAndExportsMetrics(t *testing.T) {
	cosmium := cosmiumtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := cosmosstore.NewClientWithKey(cosmium.Endpoint, cosmium.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"orders", "leases"} {
		if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, "orders", c, order.PartitionKeyPath); err != nil {
			t.Fatal(err)
		}
	}
	store, err := cosmosstore.New(client, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	feed := e2etest.StartFeedProxy(t, cosmium.Endpoint, cosmium.Key, "orders", "orders")
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	tp, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := tp.CreateSubscription("loyalty", sbqueue.SubscriptionOptions{LockDuration: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	col := &metricNames{names: map[string]bool{}}
	collector := httptest.NewServer(col)
	defer collector.Close()

	healthAddr := freeAddr(t)
	env := map[string]string{
		"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(),
		"COSMOS_ENDPOINT":              feed.Endpoint, "COSMOS_KEY": cosmium.Key, "LOG_FORMAT": "json",
		"RELAY_POLL_INTERVAL": "50ms", "RELAY_HEALTH_ADDR": healthAddr, "RELAY_METRICS_PROMETHEUS": "true",
		"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "COSMOS_LEASES_CONTAINER": "leases",
	}
	sigs := make(chan os.Signal, 2)
	runCtx, stop := cli.Stages(ctx, sigs)
	defer stop()
	var logs syncWriter
	var logBuf strings.Builder
	logs.w = &logBuf
	done := make(chan error, 1)
	go func() { done <- run(runCtx, nil, envOf(env), io.Discard, &logs) }()
	t.Cleanup(func() {
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("relay logs:\n%s", logBuf.String())
			logs.mu.Unlock()
		}
	})

	probe := func(path string) (int, string) {
		resp, err := http.Get("http://" + healthAddr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case err := <-done:
				t.Fatalf("run returned while waiting for %s: %v", what, err)
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	var ready string
	waitFor("ready", func() bool {
		c, b := probe("/readyz")
		ready = b
		return c == http.StatusOK
	})
	for _, want := range []string{"ok started", "ok leases", "ok cosmos", "ok servicebus"} {
		if !strings.Contains(ready, want) {
			t.Errorf("/readyz does not say %q:\n%s", want, ready)
		}
	}
	for _, path := range []string{"/startupz", "/livez"} {
		if c, b := probe(path); c != http.StatusOK {
			t.Errorf("%s = %d %q", path, c, b)
		}
	}

	o := order.Order{OrderID: "ord-health", CustomerID: "c", Currency: "EUR", Lines: []order.Line{{SKU: "S", Quantity: 1, UnitPriceMinor: 100}},
		TotalMinor: 100, PlacedAt: time.Now()}
	e2etest.WriteOrder(t, store, order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now()))
	waitFor("the event published", func() bool { return sub.Snapshot().Counters.Sent == 1 })
	var scraped string
	waitFor("the publish counted on /metrics", func() bool {
		_, scraped = probe("/metrics")
		return strings.Contains(scraped, `messaging_client_sent_messages_total{messaging_destination_name="order-events",messaging_operation_name="send"`)
	})
	for _, want := range []string{"orderrelay_leases_owned", "orderrelay_feed_lag_seconds"} {
		if !strings.Contains(scraped, want) {
			t.Errorf("/metrics has no %s:\n%s", want, scraped)
		}
	}

	sigs <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := net.Dial("tcp", healthAddr); err == nil {
		t.Error("the health listener is still open after run returned")
	}
	// The leases are in their own container, none in the orders container.
	leases, err := cosmosstore.New(client, "orders", "leases", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	id := relay.ManifestID("orderrelay")
	if _, _, err := leases.ReadDocument(ctx, id, id); err != nil {
		t.Errorf("manifest in the leases container: %v", err)
	}
	if _, _, err := store.ReadDocument(ctx, id, id); !errors.Is(err, idempotent.ErrNotFound) {
		t.Errorf("manifest in the orders container: %v, want not found", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, name := range []string{MetricSent, MetricLeasesOwned, MetricFeedLag} {
		if !col.names[name] {
			t.Errorf("the collector received no %s; it received %v", name, col.names)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
