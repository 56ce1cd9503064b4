package bench_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/bench"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
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
// for. The table it logs is docs/cost.md's (round trips per path). A change of a
// count fails here until the table is updated.
func TestRoundTripsPerPath(t *testing.T) {
	p, client, store := countedStore(t)
	ctx := t.Context()
	container, err := client.NewContainer(benchDatabase, benchContainer)
	if err != nil {
		t.Fatal(err)
	}
	c := &cosmos{client: client, container: container, store: store, proc: order.NewProcessor(store, nil, order.WithDocuments(store))}
	gw := &countingGateway{}
	// Each path runs its setup on one processor and its counted message on
	// the same one ("this worker": whatever the processor remembers helps)
	// or on a new one ("another worker": nothing remembered, as when the
	// original went to another worker or before a restart).
	plain := func() *order.Processor { return order.NewProcessor(store, nil, order.WithDocuments(store)) }
	paying := func() *order.Processor {
		return order.NewProcessor(store, nil, order.WithDocuments(store), order.WithPayments(gw, time.Minute, "bench"))
	}
	process := func(p *order.Processor, want ...idempotent.Outcome) handler {
		return func(ctx context.Context, m idempotent.Message) (outcome, error) {
			r := p.Process(ctx, m)
			for _, w := range want {
				if r.Outcome == w {
					return created, nil
				}
			}
			return 0, fmt.Errorf("outcome %v (%s), want %v", r.Outcome, r.Description, want)
		}
	}
	gen := ordergen.New(3, "rt")
	sentAt := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	placed := func(o order.Order) idempotent.Message {
		return idempotent.Message{ID: o.OrderID, Body: ordergen.Body(o, sentAt, "t"), DeliveryCount: 1}
	}
	status := func(id string, version int64, s string) idempotent.Message {
		body := fmt.Sprintf(`{"orderId":%q,"status":%q,"version":%d,"changedAt":"2026-12-01T10:00:00Z"}`, id, s, version)
		return idempotent.Message{ID: order.StatusMessageID(id, version), Subject: order.SubjectOrderStatusChanged, Body: []byte(body), DeliveryCount: 1}
	}
	redelivered := func(m idempotent.Message) idempotent.Message { m.DeliveryCount = 2; return m }
	next := 0
	fresh := func() order.Order { next++; return gen.Order(next) }

	type path struct {
		name   string
		before []idempotent.Message // processed first with setup, not counted
		setup  handler
		msg    idempotent.Message
		h      handler
		want   int64
	}
	// A path on the processor: setup on p, the counted message on q.
	on := func(name string, p, q *order.Processor, before []idempotent.Message, msg idempotent.Message, want int64, outcomes ...idempotent.Outcome) path {
		return path{name: name, before: before, setup: process(p, idempotent.Created, idempotent.Applied), msg: msg, h: process(q, outcomes...), want: want}
	}
	o := make([]order.Order, 20)
	for i := range o {
		o[i] = fresh()
	}
	same := func(p *order.Processor) (*order.Processor, *order.Processor) { return p, p }
	other := func(mk func() *order.Processor) (*order.Processor, *order.Processor) { return mk(), mk() }
	var paths []path
	add := func(name string, pq func() (*order.Processor, *order.Processor), before []idempotent.Message, msg idempotent.Message, want int64, outcomes ...idempotent.Outcome) {
		p, q := pq()
		paths = append(paths, on(name, p, q, before, msg, want, outcomes...))
	}
	pl := func() (*order.Processor, *order.Processor) { return other(plain) }
	plSame := func() (*order.Processor, *order.Processor) { return same(plain()) }
	pay := func() (*order.Processor, *order.Processor) { return other(paying) }
	paySame := func() (*order.Processor, *order.Processor) { return same(paying()) }
	one := func(m ...idempotent.Message) []idempotent.Message { return m }
	add("order, new: created", pl, nil, placed(o[0]), 1, idempotent.Created)
	add("order, copy, another worker: duplicate", pl, one(placed(o[1])), placed(o[1]), 2, idempotent.Duplicate)
	add("order, redelivery, another worker: duplicate", pl, one(placed(o[2])), redelivered(placed(o[2])), 1, idempotent.Duplicate)
	add("order, copy, same worker: duplicate", plSame, one(placed(o[3])), placed(o[3]), 0, idempotent.Duplicate)
	add("order, id reused, another worker: mismatch", pl, one(placed(o[4])), placed(ordergen.Changed(o[4])), 2, idempotent.Mismatch)
	add("order, id reused, same worker: mismatch", plSame, one(placed(o[5])), placed(ordergen.Changed(o[5])), 0, idempotent.Mismatch)
	add("order, malformed: invalid", pl, nil, idempotent.Message{ID: "rt-bad", Body: ordergen.Malformed("rt-bad", 0), DeliveryCount: 1}, 0, idempotent.Invalid)
	add("status change, newer: applied", pl, one(placed(o[6])), status(o[6].OrderID, 2, "paid"), 1, idempotent.Applied)
	add("status change, redelivery: stale", pl, one(placed(o[7]), status(o[7].OrderID, 2, "paid")), redelivered(status(o[7].OrderID, 2, "paid")), 1, idempotent.Stale)
	add("status change before its order: retried", pl, nil, status(o[8].OrderID, 2, "paid"), 1, idempotent.Transient)
	add("order with payment, new: created and captured", pay, nil, placed(o[9]), 2, idempotent.Created)
	add("order with payment, copy, another worker: duplicate", pay, one(placed(o[10])), placed(o[10]), 2, idempotent.Duplicate)
	add("order with payment, copy, same worker: duplicate", paySame, one(placed(o[11])), placed(o[11]), 0, idempotent.Duplicate)
	// After a run of copies of orders that other workers stored, a
	// processor reads first on a first delivery too (see
	// order.WithAdaptiveReadFirst): a copy costs the read, a new order the
	// read that misses and the create.
	warmed := func() (*order.Processor, *order.Processor) {
		seeder, q := plain(), plain()
		for range 30 {
			m := placed(fresh())
			if r := seeder.Process(ctx, m); r.Outcome != idempotent.Created {
				t.Fatalf("warm: %v %s", r.Outcome, r.Description)
			}
			if r := q.Process(ctx, m); r.Outcome != idempotent.Duplicate {
				t.Fatalf("warm: %v %s", r.Outcome, r.Description)
			}
		}
		return seeder, q
	}
	add("order, copy, another worker, after a run of copies: duplicate (read first)", warmed, one(placed(o[17])), placed(o[17]), 1, idempotent.Duplicate)
	add("order, new, after a run of copies: created (read first)", warmed, nil, placed(o[18]), 2, idempotent.Created)
	sdk, naive, upsert := sdkHandler(c.container), naiveHandler(c.container), upsertHandler(c.container)
	paths = append(paths,
		path{name: "raw SDK, new", msg: placed(o[12]), h: sdk, want: 1},
		path{name: "raw SDK, copy", before: one(placed(o[13])), setup: sdk, msg: placed(o[13]), h: sdk, want: 2},
		path{name: "naive read-then-insert, new", msg: placed(o[14]), h: naive, want: 2},
		path{name: "naive read-then-insert, copy", before: one(placed(o[15])), setup: naive, msg: placed(o[15]), h: naive, want: 1},
		path{name: "upsert (not idempotent), new or copy", before: one(placed(o[16])), setup: upsert, msg: placed(o[16]), h: upsert, want: 1},
	)
	// Warm the client up: its first data-plane call may read the account
	// and the container's properties.
	if _, err := projectHandler(c)(ctx, placed(o[19])); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	table.WriteString("| path | round trips |\n|---|---|\n")
	measured := map[string]int64{} // by path name, for the capacity model (capacity_test.go)
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
		measured[pa.name] = got
		fmt.Fprintf(&table, "| %s | %d |\n", pa.name, got)
		if got != pa.want {
			t.Errorf("%s: %d round trips, want %d", pa.name, got, pa.want)
		}
	}
	t.Logf("Cosmos DB round trips per message:\n%s", table.String())
	checkCapacityModel(t, measured, processorPaths)
}

// countedStore starts a cosmium and returns a counting proxy in front of
// it, a client through the proxy and a store of a new container on that
// client; the test's cleanup closes them.
func countedStore(t *testing.T) (*bench.LatencyProxy, *azcosmos.Client, *cosmosstore.Store) {
	t.Helper()
	srv := cosmiumtest.Start(t)
	p, err := bench.NewLatencyProxy(srv.Endpoint, bench.ProxyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	client, err := cosmosstore.NewClientWithKey(p.Endpoint(), srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), client, benchDatabase, benchContainer, order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	store, err := cosmosstore.New(client, benchDatabase, benchContainer, order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	return p, client, store
}
