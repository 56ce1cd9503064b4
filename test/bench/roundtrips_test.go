package bench_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/internal/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/bench"
)

// countingGateway is a payments gateway that captures every call at once,
// so that only the store's round trips are counted.
type countingGateway struct{ calls atomic.Int64 }

func (g *countingGateway) Capture(_ context.Context, key string, _ order.Capture) (string, error) {
	g.calls.Add(1)
	return "pay-" + key, nil
}

// TestRoundTripsPerPath counts the HTTP requests that each path of the
// processor, and each baseline, sends to Cosmos DB, through a proxy with no
// latency: exactly, since every request is a round trip a network charges
// for. The table it logs is the README's (What it costs). A change of a
// count fails here until the table is updated.
func TestRoundTripsPerPath(t *testing.T) {
	srv := cosmiumtest.Start(t)
	p, err := bench.NewLatencyProxy(srv.Endpoint, bench.ProxyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client, err := cosmosstore.NewClientWithKey(p.Endpoint(), srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := t.Context()
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, benchDatabase, benchContainer); err != nil {
		t.Fatal(err)
	}
	store, err := cosmosstore.New(client, benchDatabase, benchContainer)
	if err != nil {
		t.Fatal(err)
	}
	container, err := client.NewContainer(benchDatabase, benchContainer)
	if err != nil {
		t.Fatal(err)
	}
	c := &cosmos{client: client, container: container, store: store}
	gw := &countingGateway{}
	plain := order.NewProcessor(store, nil, order.WithDocuments(store))
	paying := order.NewProcessor(store, nil, order.WithDocuments(store), order.WithPayments(gw, time.Minute, "bench"))
	process := func(p *order.Processor, want order.Outcome) handler {
		return func(ctx context.Context, m order.Message) (outcome, error) {
			if r := p.Process(ctx, m); r.Outcome != want {
				return 0, fmt.Errorf("outcome %v (%s), want %v", r.Outcome, r.Description, want)
			}
			return created, nil
		}
	}
	gen := ordergen.New(3, "rt")
	sentAt := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	placed := func(o order.Order) order.Message {
		return order.Message{ID: o.OrderID, Body: ordergen.Body(o, sentAt, "t"), DeliveryCount: 1}
	}
	status := func(id string, version int64, s string) order.Message {
		body := fmt.Sprintf(`{"orderId":%q,"status":%q,"version":%d,"changedAt":"2026-12-01T10:00:00Z"}`, id, s, version)
		return order.Message{ID: order.StatusMessageID(id, version), Subject: order.SubjectOrderStatusChanged, Body: []byte(body), DeliveryCount: 1}
	}
	next := 0
	fresh := func() order.Order { next++; return gen.Order(next) }

	// accept processes a message that a path needs processed first.
	accept := func(p *order.Processor) handler {
		return func(ctx context.Context, m order.Message) (outcome, error) {
			switch r := p.Process(ctx, m); r.Outcome {
			case order.Created, order.Applied:
				return created, nil
			default:
				return 0, fmt.Errorf("outcome %v (%s)", r.Outcome, r.Description)
			}
		}
	}
	type path struct {
		name   string
		before []order.Message // processed first with setup, not counted
		setup  handler
		msg    order.Message
		h      handler
		want   int64
	}
	o1, o2, o3, o4, o5, o6, o7, o8 := fresh(), fresh(), fresh(), fresh(), fresh(), fresh(), fresh(), fresh()
	o9, o10, o11, o12, o13 := fresh(), fresh(), fresh(), fresh(), fresh()
	sdk, naive, upsert := sdkHandler(c.container), naiveHandler(c.container), upsertHandler(c.container)
	paths := []path{
		{name: "order, new: created", msg: placed(o1), h: process(plain, order.Created), want: 1},
		{name: "order, copy: duplicate", before: []order.Message{placed(o2)}, setup: accept(plain), msg: placed(o2), h: process(plain, order.Duplicate), want: 2},
		{name: "order, id reused: mismatch", before: []order.Message{placed(o3)}, setup: accept(plain), msg: placed(ordergen.Changed(o3)), h: process(plain, order.Mismatch), want: 2},
		{name: "order, malformed: invalid", msg: order.Message{ID: "rt-bad", Body: ordergen.Malformed("rt-bad", 0), DeliveryCount: 1}, h: process(plain, order.Invalid), want: 0},
		{name: "status change, newer: applied", before: []order.Message{placed(o4)}, setup: accept(plain), msg: status(o4.OrderID, 2, "paid"), h: process(plain, order.Applied), want: 2},
		{name: "status change, copy: stale", before: []order.Message{placed(o5), status(o5.OrderID, 2, "paid")}, setup: accept(plain), msg: status(o5.OrderID, 2, "paid"), h: process(plain, order.Stale), want: 1},
		{name: "status change before its order: retried", msg: status(o6.OrderID, 2, "paid"), h: process(plain, order.Transient), want: 1},
		{name: "order with payment, new: created and captured", msg: placed(o7), h: process(paying, order.Created), want: 5},
		{name: "order with payment, copy: duplicate", before: []order.Message{placed(o8)}, setup: accept(paying), msg: placed(o8), h: process(paying, order.Duplicate), want: 3},
		{name: "raw SDK, new", msg: placed(o9), h: sdk, want: 1},
		{name: "raw SDK, copy", before: []order.Message{placed(o10)}, setup: sdk, msg: placed(o10), h: sdk, want: 2},
		{name: "naive read-then-insert, new", msg: placed(o11), h: naive, want: 2},
		{name: "naive read-then-insert, copy", before: []order.Message{placed(o12)}, setup: naive, msg: placed(o12), h: naive, want: 1},
		{name: "upsert (not idempotent), new or copy", before: []order.Message{placed(o13)}, setup: upsert, msg: placed(o13), h: upsert, want: 1},
	}
	// Warm the client up: its first data-plane call may read the account
	// and the container's properties.
	if _, err := projectHandler(c)(ctx, placed(fresh())); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	table.WriteString("| path | round trips |\n|---|---|\n")
	for _, pa := range paths {
		for _, m := range pa.before {
			if _, err := pa.setup(ctx, m); err != nil {
				t.Fatalf("%s: before: %v", pa.name, err)
			}
		}
		before := p.Requests()
		if _, err := pa.h(ctx, pa.msg); err != nil {
			t.Errorf("%s: %v", pa.name, err)
			continue
		}
		got := p.Requests() - before
		fmt.Fprintf(&table, "| %s | %d |\n", pa.name, got)
		if got != pa.want {
			t.Errorf("%s: %d round trips, want %d", pa.name, got, pa.want)
		}
	}
	t.Logf("Cosmos DB round trips per message:\n%s", table.String())
}
