package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
)

// The deployment's defaults (cmd/orderworker and the Bicep template): the
// queue's lock and MaxDeliveryCount, the worker's concurrency, the
// breaker's threshold.
const (
	deployedLock        = time.Minute
	deployedConcurrency = 8
	outageLength        = time.Hour
)

// handlerDoer sends a request to a handler in process, without a network,
// so that the payments client runs in a synctest bubble.
type handlerDoer struct{ h http.Handler }

func (d handlerDoer) Do(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// deliveryCounter wraps the order processor and records the highest
// delivery count each message reached.
type deliveryCounter struct {
	next worker.Handler
	mu   sync.Mutex
	max  map[string]int
}

func (c *deliveryCounter) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	c.mu.Lock()
	c.max[m.ID] = max(c.max[m.ID], int(m.DeliveryCount))
	c.mu.Unlock()
	return c.next.Process(ctx, m)
}

// worst returns the highest delivery count any message reached.
func (c *deliveryCounter) worst() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, d := range c.max {
		n = max(n, d)
	}
	return n
}

// orderBody is a valid order placement for id.
func orderBody(id string) []byte {
	return fmt.Appendf(nil, `{"orderId":%q,"customerId":"cust-1","currency":"EUR","lines":[{"sku":"SKU-1","quantity":2,"unitPriceMinor":1999}],"totalMinor":3998,"placedAt":"2026-11-30T10:00:00Z"}`, id)
}

// outageRun is one outage test's world: the orders queue with the
// deployment's lock and MaxDeliveryCount, memstore, the payments service,
// and the real worker running the real order.Processor with the breaker
// cmd/orderworker configures (its threshold, its probe: a point read and a
// delete of a missing item of the store, Probe, and GET /healthz of the
// payments service when it captures).
type outageRun struct {
	q        *sbqueue.Queue
	store    *memstore.Store
	svc      *paymentservice.Service
	b        *breaker.Breaker
	counter  *deliveryCounter
	probes   atomic.Int64
	logs     *workertest.Capture
	stop     func()
	captures bool
}

// startOutageRun starts it; with scheduler the worker has the queue's
// sender for its delayed retries, as cmd/orderworker has on its queue, and
// without one it abandons what it would retry later, as on a
// subscription.
func startOutageRun(t *testing.T, orders int, captures, scheduler bool) *outageRun {
	t.Helper()
	r := &outageRun{captures: captures, logs: workertest.NewCapture(slog.LevelInfo)}
	var err error
	r.q, err = sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("orders", sbqueue.QueueOptions{LockDuration: deployedLock, MaxDeliveryCount: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range orders {
		id := fmt.Sprintf("ord-%03d", i)
		if _, err := r.q.Send(context.Background(), sbqueue.Message{MessageID: id, Body: orderBody(id), Subject: order.SubjectOrderPlaced}); err != nil {
			t.Fatal(err)
		}
	}
	r.store = memstore.New(order.PartitionKeyPath)
	opts := []order.Option{order.WithDocuments(r.store)}
	probe := r.store.Probe
	if captures {
		r.svc = paymentservice.NewService(nil)
		client, err := payments.NewClient("http://payments.invalid/", &payments.ClientOptions{HTTPClient: handlerDoer{r.svc}})
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, order.WithPayments(payments.Gateway{Client: client}, deployedLock, "worker-1"))
		probe = func(ctx context.Context) error { return errors.Join(r.store.Probe(ctx), client.Ping(ctx)) }
	}
	r.counter = &deliveryCounter{next: order.NewProcessor(r.store, nil, opts...), max: make(map[string]int)}
	r.b, err = breaker.New(breaker.Options{Threshold: breakerThreshold, Spread: breakerSpread, TrialLimit: breakerTrialLimit, Probe: func(ctx context.Context) error {
		r.probes.Add(1)
		return probe(ctx)
	}}, slog.New(r.logs))
	if err != nil {
		t.Fatal(err)
	}
	o := worker.Options{
		Concurrency: deployedConcurrency, LockDuration: deployedLock, SummaryInterval: -1, Gate: r.b,
	}
	if scheduler {
		o.Scheduler = r.q.NewSender()
	}
	w, err := worker.New(r.q.NewReceiver(), r.counter, slog.New(r.logs), o)
	if err != nil {
		t.Fatal(err)
	}
	r.stop = run(t, w)
	return r
}

// TestBreakerOutagesOfWhatTheMessagesNeed: outages of an hour that only
// what the messages need meets, on a backlog, with the deployment's
// defaults (lock 1 min, MaxDeliveryCount 10, concurrency 8, threshold 5):
// the store refuses writes and answers reads; the payments service answers
// 503 to captures and 200 to /healthz; one physical partition of four
// fails every call while the others answer. A probe that proves only that
// something answers (a point read, GET /healthz) sees none of them. None
// may dead-letter a message: the store's probe deletes a missing item and
// the payments probe exercises a capture, so the first two open the
// breaker through the probe, at the cost of one delivery of a message;
// the partition, which the probe's key does not fall in, opens it by the
// failures of distinct entities, and its trials cost each message a few
// deliveries over the hour, far fewer than MaxDeliveryCount. Each runs
// with a Scheduler, as on cmd/orderworker's queue (a message failing in a
// trial waits in a scheduled copy), and without, as on a subscription.
// Once the outage ends, every order is created (and with captures,
// charged once, its payment record completed).
func TestBreakerOutagesOfWhatTheMessagesNeed(t *testing.T) {
	for _, tt := range []struct {
		name     string
		orders   int
		captures bool
		all      bool // every order fails
		start    func(r *outageRun) (end func(), failing func(id string) bool)
	}{
		{"store refuses writes", 200, false, true, func(r *outageRun) (func(), func(string) bool) {
			return r.store.SetOutage(memstore.WriteRegionOutage()), func(string) bool { return true }
		}},
		{"payments refuses captures", 100, true, true, func(r *outageRun) (func(), func(string) bool) {
			return r.svc.SetOutage(paymentservice.AcquirerOutage()), func(string) bool { return true }
		}},
		{"one partition of four", 200, false, false, func(r *outageRun) (func(), func(string) bool) {
			// The range the probe's document is not in: the probe answers.
			for i := range 4 {
				keys := memstore.HashRange(i, 4)
				if !keys("memstore-ping") {
					return r.store.SetOutage(memstore.Outage{Ops: memstore.OpAll, PartitionKeys: keys}), keys
				}
			}
			panic("unreachable")
		}},
	} {
		for _, scheduler := range []bool{true, false} {
			name := tt.name + ", on a queue (a Scheduler)"
			if !scheduler {
				name = tt.name + ", on a subscription (no Scheduler)"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := startOutageRun(t, 0, tt.captures, scheduler)
					end, failing := tt.start(r)
					// Orders in the failing partition make up a quarter of those
					// sent, as a hash range of four would hold.
					down, up := 0, 0
					for i := 0; down+up < tt.orders; i++ {
						id := fmt.Sprintf("ord-%03d", i)
						if f := failing(id); f && (tt.all || down < tt.orders/4) {
							down++
						} else if !f && up < tt.orders-tt.orders/4 {
							up++
						} else {
							continue
						}
						if _, err := r.q.Send(context.Background(), sbqueue.Message{MessageID: id, Body: orderBody(id), Subject: order.SubjectOrderPlaced}); err != nil {
							t.Fatal(err)
						}
					}
					time.Sleep(outageLength)
					synctest.Wait()
					during := r.q.Snapshot()
					worst := r.counter.worst()
					end()
					time.Sleep(time.Hour)
					synctest.Wait()
					after := r.q.Snapshot()
					t.Logf("%s, %d orders (%d failing) for %v: %d deliveries, at most %d for one message, %d dead-lettered, %d probes, breaker opened %d times; after it: %d completed, %d dead-lettered in all",
						tt.name, tt.orders, down, outageLength, during.Delivered, worst, during.DeadLettered, r.probes.Load(), r.b.Opened(), after.Completed, after.DeadLettered)
					if during.DeadLettered != 0 || after.DeadLettered != 0 {
						t.Errorf("%d dead-lettered during the outage, %d in all; want none", during.DeadLettered, after.DeadLettered)
					}
					if worst > 5 {
						t.Errorf("a message was delivered %d times during the outage; want at most 5 of MaxDeliveryCount 10", worst)
					}
					if r.b.Opened() == 0 {
						t.Error("the breaker never opened")
					}
					// A scheduled copy's original is completed too.
					if own := after.Completed - after.ScheduledAccepted; own != int64(tt.orders) || r.b.Paused() {
						t.Errorf("after the outage: %d of %d completed (%d copies), breaker paused %v", own, tt.orders, after.ScheduledAccepted, r.b.Paused())
					}
					if tt.captures {
						for _, it := range r.store.Items() {
							if strings.HasPrefix(it.ID, "Payment:") && !strings.Contains(string(it.Body), `"state":"completed"`) {
								t.Errorf("payment record %s left %s", it.ID, it.Body)
							}
						}
						if n := r.svc.Charges(); n != tt.orders {
							t.Errorf("%d charges for %d orders", n, tt.orders)
						}
					}
					r.stop()
				})
			})
		}
	}
}
