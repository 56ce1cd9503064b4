package bench_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/bench"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// The contestants of the matrix (see the package documentation). Each one
// consumes a stream of order messages, some of them duplicates of orders it
// has already stored, and must leave every order stored once.

const (
	benchDatabase  = "bench"
	benchContainer = "orders"
)

// cosmos is one way to reach cosmium: directly or through a latency proxy.
type cosmos struct {
	latency   time.Duration
	client    *azcosmos.Client
	container *azcosmos.ContainerClient
	store     *cosmosstore.Store
	// proc is the processor of the project and worker contestants, one
	// for the life of the client as a worker has one for its life: what it
	// remembers of earlier messages helps later ones, as in production.
	// Orders that copies duplicate are stored with another processor.
	proc  *order.Processor
	proxy *bench.LatencyProxy // nil without latency
}

// newCosmos returns a client of srv, through a LatencyProxy when latency is
// positive, with the database and container created.
func newCosmos(tb testing.TB, srv *cosmiumtest.Server, latency time.Duration) *cosmos {
	tb.Helper()
	c := &cosmos{latency: latency}
	endpoint := srv.Endpoint
	if latency > 0 {
		p, err := bench.NewLatencyProxy(srv.Endpoint, bench.ProxyOptions{Latency: latency})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { p.Close() })
		c.proxy, endpoint = p, p.Endpoint()
	}
	client, err := cosmosstore.NewClientWithKey(endpoint, srv.Key, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(client.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, benchDatabase, benchContainer, order.PartitionKeyPath); err != nil {
		tb.Fatal(err)
	}
	c.client = client
	if c.container, err = client.NewContainer(benchDatabase, benchContainer); err != nil {
		tb.Fatal(err)
	}
	if c.store, err = cosmosstore.New(client, benchDatabase, benchContainer, order.PartitionKeyPath); err != nil {
		tb.Fatal(err)
	}
	c.proc = newProcessor(c.store)
	return c
}

// outcome is what a contestant did with one message.
type outcome int

const (
	created   outcome = iota + 1 // stored the order
	duplicate                    // found it stored: nothing written
	raced                        // naive only: the insert after the read conflicted
	upserted                     // upsert only: wrote, whether or not it existed
)

// tally counts outcomes; it is safe for concurrent use.
type tally struct{ created, duplicate, raced, upserted atomic.Int64 }

func (t *tally) add(o outcome) {
	switch o {
	case created:
		t.created.Add(1)
	case duplicate:
		t.duplicate.Add(1)
	case raced:
		t.raced.Add(1)
	case upserted:
		t.upserted.Add(1)
	}
}

// handler handles one message; it is called concurrently.
type handler func(ctx context.Context, m idempotent.Message) (outcome, error)

// contestant is one way of consuming the stream.
type contestant struct {
	name string
	// handler returns the contestant's per-message function on c, for
	// the ones driven message by message, and for bare the function its
	// loop calls (with which its orders are seeded too); nil for the
	// worker.
	handler func(c *cosmos) handler
	// queue, for the worker and bare, puts msgs on a queue and returns the
	// step that consumes them with conc handlers and how long that took.
	queue func(ctx context.Context, c *cosmos, conc int, msgs []idempotent.Message, t *tally) (consume func() (time.Duration, error), err error)
}

var contestants = []contestant{
	{name: "project", handler: projectHandler},
	{name: "worker", queue: queueForWorker},
	{name: "sdk", handler: func(c *cosmos) handler { return sdkHandler(c.container) }},
	{name: "bare", handler: func(c *cosmos) handler { return sdkHandler(c.container) }, queue: queueForBare},
	{name: "upsert", handler: func(c *cosmos) handler { return upsertHandler(c.container) }},
	{name: "naive", handler: func(c *cosmos) handler { return naiveHandler(c.container) }},
}

// prepare makes everything ready to consume msgs with conc concurrent
// handlers and returns the step that does it and reports how long it took,
// and the tally it counts the outcomes in.
func (k contestant) prepare(ctx context.Context, c *cosmos, conc int, msgs []idempotent.Message) (func() (time.Duration, error), *tally, error) {
	t := &tally{}
	if k.queue != nil {
		consume, err := k.queue(ctx, c, conc, msgs, t)
		return consume, t, err
	}
	h := k.handler(c)
	return func() (time.Duration, error) {
		start := time.Now()
		err := drive(ctx, conc, msgs, h, t)
		return time.Since(start), err
	}, t, nil
}

// run consumes msgs with conc concurrent handlers and counts the outcomes.
func (k contestant) run(ctx context.Context, c *cosmos, conc int, msgs []idempotent.Message) (*tally, error) {
	consume, t, err := k.prepare(ctx, c, conc, msgs)
	if err != nil {
		return nil, err
	}
	_, err = consume()
	return t, err
}

// seed stores the orders of msgs the way the contestant stores them, so
// that their copies are duplicates. The project's and the worker's orders
// are stored by a processor of their own, which the contestant's does not
// share: what a processor remembers of the orders it stored does not help
// the contestant with their copies.
func (k contestant) seed(ctx context.Context, c *cosmos, conc int, msgs []idempotent.Message) error {
	h := processorHandler(newProcessor(c.store))
	if k.handler != nil && k.name != "project" {
		h = k.handler(c)
	}
	return drive(ctx, conc, msgs, h, &tally{})
}

// drive hands msgs to h from conc goroutines and returns when all are done,
// with the first error.
func drive(ctx context.Context, conc int, msgs []idempotent.Message, h handler, t *tally) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var errOnce sync.Once
	var first error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(msgs) || ctx.Err() != nil {
					return
				}
				o, err := h(ctx, msgs[i])
				if err != nil {
					errOnce.Do(func() { first = fmt.Errorf("message %s: %w", msgs[i].ID, err); cancel() })
					return
				}
				t.add(o)
			}
		})
	}
	wg.Wait()
	return first
}

// newProcessor returns the project's processor on store, configured as
// orderworker configures it without a payments service.
func newProcessor(store *cosmosstore.Store) *order.Processor {
	return order.NewProcessor(store, nil, order.WithDocuments(store))
}

// projectHandler is the project's decision path: the client's processor
// (order.Processor on cosmosstore.Store).
func projectHandler(c *cosmos) handler { return processorHandler(c.proc) }

// processorHandler is p's decision, which must be Created or Duplicate.
func processorHandler(p *order.Processor) handler {
	return func(ctx context.Context, m idempotent.Message) (outcome, error) {
		r := p.Process(ctx, m)
		switch r.Outcome {
		case idempotent.Created:
			return created, nil
		case idempotent.Duplicate:
			return duplicate, nil
		}
		return 0, fmt.Errorf("outcome %v: %s", r.Outcome, r.Description)
	}
}

// newQueue returns an in-process Service Bus queue holding msgs.
func newQueue(ctx context.Context, msgs []idempotent.Message) (*sbqueue.Queue, error) {
	q, err := sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("orders", sbqueue.QueueOptions{LockDuration: time.Minute})
	if err != nil {
		return nil, err
	}
	batch := make([]sbqueue.Message, len(msgs))
	for i, m := range msgs {
		batch[i] = sbqueue.Message{MessageID: m.ID, Body: m.Body}
	}
	if _, err := q.SendBatch(ctx, batch); err != nil {
		return nil, err
	}
	return q, nil
}

// queueForBare puts msgs on an in-process Service Bus queue for the bare
// loop (bareLoop: receive as many as there are free handlers, the sdk
// contestant's calls, complete), the floor for a consumer that receives
// from a queue: the worker's own baseline, as sdk is the processor's.
func queueForBare(ctx context.Context, c *cosmos, conc int, msgs []idempotent.Message, t *tally) (func() (time.Duration, error), error) {
	q, err := newQueue(ctx, msgs)
	if err != nil {
		return nil, err
	}
	h := sdkHandler(c.container)
	counted := func(ctx context.Context, m idempotent.Message) (outcome, error) {
		o, err := h(ctx, m)
		t.add(o)
		return o, err
	}
	return func() (time.Duration, error) {
		start := time.Now()
		err := bareLoop(ctx, q.NewReceiver(), conc, len(msgs), counted, func() {})
		return time.Since(start), err
	}, nil
}

// queueForWorker puts msgs on an in-process Service Bus queue for the whole
// worker (worker.Worker around the project's processor, logging JSON as
// orderworker does, to io.Discard), which consumes them until it has
// settled all of them. The queue model locks, counts and completes each
// delivery as Service Bus does (see test/sbqueue).
func queueForWorker(ctx context.Context, c *cosmos, conc int, msgs []idempotent.Message, t *tally) (func() (time.Duration, error), error) {
	q, err := newQueue(ctx, msgs)
	if err != nil {
		return nil, err
	}
	return func() (time.Duration, error) {
		return runWorker(ctx, q.NewReceiver(), c.proc, c.store, conc, len(msgs), t, nil)
	}, nil
}

// runWorker runs a worker with processor p on r until it has settled n
// deliveries, calling settled (if set) after each, then stops it. It
// returns the time from the worker's start to the n-th settlement. Every
// delivery must be created or a duplicate, and settled.
func runWorker(ctx context.Context, r worker.Receiver, p *order.Processor, store *cosmosstore.Store, conc, n int, t *tally, settled func()) (time.Duration, error) {
	logger, err := cli.NewLogger(io.Discard, "json", "info")
	if err != nil {
		return 0, err
	}
	var count atomic.Int64
	var bad atomic.Pointer[worker.Report]
	var doneAt time.Time
	done := make(chan struct{})
	w, err := worker.New(r, p, logger, worker.Options{
		Concurrency:     conc,
		LockDuration:    time.Minute,
		SummaryInterval: -1,
		RequestCharge:   store.RequestCharge,
		Observe: func(rep worker.Report) {
			switch rep.Result.Outcome {
			case idempotent.Created:
				t.add(created)
			case idempotent.Duplicate:
				t.add(duplicate)
			default:
				bad.CompareAndSwap(nil, &rep)
			}
			if rep.SettleErr != nil || rep.LockLost {
				bad.CompareAndSwap(nil, &rep)
			}
			if settled != nil {
				settled()
			}
			if count.Add(1) == int64(n) {
				doneAt = time.Now()
				close(done)
			}
		},
	})
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- w.Run(runCtx) }()
	select {
	case <-done:
	case err := <-ran:
		return 0, fmt.Errorf("the worker stopped after %d of %d deliveries: %v", count.Load(), n, err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	elapsed := doneAt.Sub(start)
	stop()
	if err := <-ran; err != nil {
		return 0, err
	}
	if rep := bad.Load(); rep != nil {
		return 0, fmt.Errorf("delivery of %s: outcome %v (%s), lock lost %v, settlement %v",
			rep.MessageID, rep.Result.Outcome, rep.Result.Description, rep.LockLost, rep.SettleErr)
	}
	return elapsed, nil
}

// sdkDocs are what the bare SDK contestants write for one message: the
// order document and its OrderAccepted event, the project's document shapes
// marshalled directly, with a SHA-256 of the body as the request hash (no
// validation, no canonical encoding: the cheapest consumer that writes the
// same documents).
type sdkDocs struct {
	orderID     string
	hash        string
	order, uvnt []byte
}

func newSDKDocs(m idempotent.Message) (sdkDocs, error) {
	var o order.Order
	if err := json.Unmarshal(m.Body, &o); err != nil {
		return sdkDocs{}, err
	}
	sum := sha256.Sum256(m.Body)
	hash := hex.EncodeToString(sum[:])
	now := time.Now().UTC()
	doc, err := json.Marshal(order.OrderDocument{
		ID: o.OrderID, OrderID: o.OrderID, Type: order.TypeOrder, CustomerID: o.CustomerID, Currency: o.Currency,
		Lines: o.Lines, TotalMinor: o.TotalMinor, PlacedAt: o.PlacedAt, Status: "accepted", Version: 1,
		RequestHash: hash, MessageID: m.ID, ProcessedAt: now,
	})
	if err != nil {
		return sdkDocs{}, err
	}
	ev, err := json.Marshal(order.AcceptedEvent{
		ID: order.EventID(o.OrderID), OrderID: o.OrderID, Type: order.TypeEvent, EventType: order.EventOrderAccepted,
		CustomerID: o.CustomerID, Currency: o.Currency, TotalMinor: o.TotalMinor, RequestHash: hash, OccurredAt: now,
	})
	if err != nil {
		return sdkDocs{}, err
	}
	return sdkDocs{orderID: o.OrderID, hash: hash, order: doc, uvnt: ev}, nil
}

// createBoth writes the documents in one transactional batch and reports
// whether it conflicted. Cosmos DB answers a conflicting batch with
// Success false and the 409 on the operation; cosmium says Success with the
// 409 inside, so the operations' codes decide.
func createBoth(ctx context.Context, c *azcosmos.ContainerClient, d sdkDocs) (conflict bool, err error) {
	b := c.NewTransactionalBatch(azcosmos.NewPartitionKeyString(d.orderID))
	b.CreateItem(d.order, nil)
	b.CreateItem(d.uvnt, nil)
	resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil {
		return false, err
	}
	for _, r := range resp.OperationResults {
		if r.StatusCode == http.StatusConflict {
			return true, nil
		}
	}
	if !resp.Success {
		return false, fmt.Errorf("batch failed: %+v", resp.OperationResults)
	}
	return false, nil
}

// sdkHandler makes the project's calls directly with azcosmos: one
// transactional batch; on a conflict, a point read and a compare of the
// stored request hash.
func sdkHandler(c *azcosmos.ContainerClient) handler {
	return func(ctx context.Context, m idempotent.Message) (outcome, error) {
		d, err := newSDKDocs(m)
		if err != nil {
			return 0, err
		}
		conflict, err := createBoth(ctx, c, d)
		if err != nil || !conflict {
			return created, err
		}
		resp, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(d.orderID), d.orderID, nil)
		if err != nil {
			return 0, err
		}
		var stored struct {
			RequestHash string `json:"requestHash"`
		}
		if err := json.Unmarshal(resp.Value, &stored); err != nil {
			return 0, err
		}
		if stored.RequestHash != d.hash {
			return 0, fmt.Errorf("order %s exists with another request hash", d.orderID)
		}
		return duplicate, nil
	}
}

// upsertHandler is the non-idempotent baseline: both documents upserted in
// one transactional batch, whether or not the order exists.
func upsertHandler(c *azcosmos.ContainerClient) handler {
	return func(ctx context.Context, m idempotent.Message) (outcome, error) {
		d, err := newSDKDocs(m)
		if err != nil {
			return 0, err
		}
		b := c.NewTransactionalBatch(azcosmos.NewPartitionKeyString(d.orderID))
		b.UpsertItem(d.order, nil)
		b.UpsertItem(d.uvnt, nil)
		resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
		if err != nil {
			return 0, err
		}
		if !resp.Success {
			return 0, fmt.Errorf("upsert batch failed: %+v", resp.OperationResults)
		}
		return upserted, nil
	}
}

// naiveHandler is the naive read-then-insert recipe: look the idempotency key up in the
// database; if it is there the message is a duplicate and is dropped, else
// process it and store the key with the business data in one transaction
// (here: the batch that writes the order and its event). The recipe's
// first step, a look-up in a Redis cache in front of the database, is left
// out: it needs a second store, and its miss costs the same database read.
// The read and the insert are separate steps: a concurrent copy can insert
// in between, and the recipe has no answer to the conflict (counted as
// raced).
func naiveHandler(c *azcosmos.ContainerClient) handler {
	return func(ctx context.Context, m idempotent.Message) (outcome, error) {
		d, err := newSDKDocs(m)
		if err != nil {
			return 0, err
		}
		_, err = c.ReadItem(ctx, azcosmos.NewPartitionKeyString(d.orderID), d.orderID, nil)
		var re *azcore.ResponseError
		switch {
		case err == nil:
			return duplicate, nil
		case !errors.As(err, &re) || re.StatusCode != http.StatusNotFound:
			return 0, err
		}
		conflict, err := createBoth(ctx, c, d)
		if conflict {
			return raced, err
		}
		return created, err
	}
}

// stream returns n messages under prefix of which the share dup are copies
// of the pool's messages (spread evenly: message i is a copy when
// ⌊(i+1)·dup⌋ > ⌊i·dup⌋) and the rest new orders. Bodies are fixed per order,
// so a copy is byte for byte its original, as a redelivery is.
func stream(prefix string, n int, dup float64, pool []idempotent.Message) []idempotent.Message {
	gen := ordergen.New(1, prefix)
	sentAt := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	out := make([]idempotent.Message, n)
	copies := 0
	for i := range n {
		if len(pool) > 0 && int(float64(i+1)*dup) > int(float64(i)*dup) {
			m := pool[copies%len(pool)]
			copies++
			out[i] = m
			continue
		}
		o := gen.Order(i)
		out[i] = idempotent.Message{ID: o.OrderID, Body: ordergen.Body(o, sentAt, "trace-"+o.OrderID), DeliveryCount: 1}
	}
	return out
}

var runSeq atomic.Int64

// uniquePrefix returns an order-id prefix no earlier call returned.
func uniquePrefix(name string) string {
	return fmt.Sprintf("%s%d", name, runSeq.Add(1))
}
