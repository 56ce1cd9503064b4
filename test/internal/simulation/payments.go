package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// paymentsURL is the base URL the simulation's payments client uses. No
// request leaves the process: paymentLink hands each one to the service.
const paymentsURL = "http://payments.simulation.invalid"

// newPayments returns the reference payments service, which forgets each
// key retention after its charge, on time.Now and with the plan's
// service-side faults, and the consumer's gateway to it: a payments.Client
// with the options cmd/orderworker uses (the defaults: per-attempt
// timeout, retries with jittered backoff on real timers) over paymentLink,
// wrapped in a faultGateway.
func newPayments(retention, latency time.Duration, p *plan, tr *tracker, h *history, tm *timing, outs *outages) (*paymentservice.Service, *faultGateway, error) {
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{KeyRetention: retention, Now: time.Now, Faults: serviceFaults(p, tr, h, outs)})
	link := &paymentLink{service: svc, plan: p, tr: tr, hist: h, latency: latency, timing: tm, charges: svc.ChargesFor, requests: make(map[string]uint64)}
	client, err := payments.NewClient(paymentsURL, &payments.ClientOptions{HTTPClient: &http.Client{Transport: link}})
	if err != nil {
		return nil, nil, err
	}
	return svc, &faultGateway{inner: payments.Gateway{Client: client}, ping: client.Ping, plan: p, tr: tr, hist: h,
		calls: make(map[string]uint64), charged: make(map[string]time.Time)}, nil
}

// serviceFaults returns the payments service's fault function: for the
// n-th request with an order's key, PaymentFailure answers 500, 503 or 429
// before charging, and half of PaymentTimeout charges (or replays) and then
// drops the connection. The other half is paymentLink's. During an
// OutageCaptures (outage.go) every capture is answered 503 before
// charging, as an acquirer outage behind a healthy API answers, and so is
// every probe (POST /payments/probe, the circuit breaker's, which calls
// the acquirer as a capture does); the service's lookups and health
// check, which the function never sees, answer. The per-order faults
// strike captures only.
func serviceFaults(p *plan, tr *tracker, h *history, outs *outages) func(paymentservice.FaultRequest) paymentservice.Fault {
	return func(r paymentservice.FaultRequest) paymentservice.Fault {
		if r.Kind == paymentservice.RequestProbe {
			if _, down := outs.fails("", OutageCaptures); down {
				return paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusServiceUnavailable}
			}
			return paymentservice.Fault{}
		}
		id, n := r.Request.OrderID, uint64(r.Attempt)
		if _, down := outs.fails(id, OutageCaptures); down {
			h.add(id, "", "fault: payments service answers request %d with 503 before charging: captures are down", n)
			return paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusServiceUnavailable}
		}
		switch {
		case p.inject(faultPaymentFailure, id, n, 0):
			tr.count(func(c *FaultCounts) { c.PaymentFailure++ })
			status := [...]int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests}[n%3]
			h.add(id, "", "fault: payments service answers request %d with %d before charging", n, status)
			return paymentservice.Fault{Kind: paymentservice.FaultFail, Status: status}
		case p.inject(faultPaymentDrop, id, n, 0):
			tr.count(func(c *FaultCounts) { c.PaymentDrop++ })
			h.add(id, "", "fault: payments service drops the connection of request %d after deciding it", n)
			return paymentservice.Fault{Kind: paymentservice.FaultDrop}
		}
		return paymentservice.Fault{}
	}
}

// paymentLink is the network between the consumer and the payments service:
// an http.RoundTripper that hands each request to the service in process,
// with no socket, after a round trip's latency. The service's FaultDrop aborts its handler, which the
// link turns into a connection error, as a dropped connection is. The link
// injects the other half of PaymentTimeout itself: the service answered
// (having charged or replayed), and the answer is lost as the client's
// attempt times out. It counts the answers the service replayed.
//
// A paymentLink is safe for concurrent use.
type paymentLink struct {
	service http.Handler
	plan    *plan
	tr      *tracker
	hist    *history
	latency time.Duration
	timing  *timing          // records a second charge of an order as a breach
	charges func(string) int // the service's charges of an order

	mu       sync.Mutex
	requests map[string]uint64 // requests so far, by order id
}

var _ http.RoundTripper = (*paymentLink)(nil)

// errConnectionDropped and errAnswerTimedOut are the link's failures, as a
// client sees them.
var (
	errConnectionDropped = fmt.Errorf("simulated connection reset: the payments service closed the connection without answering (%w)", io.ErrUnexpectedEOF)
	errAnswerTimedOut    = &timeoutError{}
)

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (*timeoutError) Error() string {
	return "simulated timeout awaiting the payments service's answer (the service had answered; the answer was lost)"
}
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }

// RoundTrip implements http.RoundTripper.
func (l *paymentLink) RoundTrip(r *http.Request) (resp *http.Response, err error) {
	if r.Body != nil {
		defer r.Body.Close()
	}
	id := ""
	if d := deliveryFrom(r.Context()); d != nil {
		id = d.orderID
	}
	l.mu.Lock()
	l.requests[id]++
	n := l.requests[id]
	l.mu.Unlock()
	if l.latency > 0 && sleep(r.Context(), l.latency) != nil { // the round trip, both ways
		return nil, r.Context().Err()
	}
	// As a real transport, the link sends no request whose context has
	// ended; what delays the request after this check is the machine's.
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	checked := time.Now()
	l.timing.at(StallPayment, id)

	capture := r.Method == http.MethodPost && id != ""
	before := 0
	if capture {
		before = l.charges(id)
	}
	rec := httptest.NewRecorder()
	aborted := serve(l.service, rec, r)
	if capture {
		if after := l.charges(id); after > before && after > 1 { // the service had forgotten the key of the first charge
			l.timing.breach(BreachKeyRetention, id, "", checked)
		}
	}
	if aborted {
		return nil, errConnectionDropped
	}
	res := rec.Result()
	ok := res.StatusCode == http.StatusOK || res.StatusCode == http.StatusCreated
	replayed := ok && res.Header.Get(payments.HeaderIdempotentReplayed) == "true"
	l.hist.add(id, "", "payments service: %s %s, key %s: %d%s", r.Method, r.URL.Path, r.Header.Get(payments.HeaderIdempotencyKey), res.StatusCode,
		map[bool]string{true: " (replayed from the key store: no charge)", false: ""}[replayed])
	if ok && id != "" && l.plan.inject(faultPaymentTimeout, id, n, 0) {
		l.tr.count(func(c *FaultCounts) { c.PaymentTimeout++ })
		l.hist.add(id, "", "fault: the answer is lost; the client's attempt times out")
		return nil, errAnswerTimedOut
	}
	if replayed {
		l.tr.countPayment(func(c *paymentCounts) { c.Replays++ })
	}
	return res, nil
}

// serve runs h, and reports whether it aborted with http.ErrAbortHandler,
// which a server turns into a closed connection.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	h.ServeHTTP(w, r)
	return false
}

// faultGateway is the consumer's order.PaymentGateway with the PaymentCrash
// fault: after a capture call that succeeded, the plan may decide that the
// worker dies before it marks the payment record completed. The gateway
// marks the delivery, and faultStore fails its next payment record write
// (the completion) and faultReceiver its settlement, as a crash would: the
// record stays in progress, the message locked until its lock lapses. It
// also counts the consumer's capture calls.
//
// A faultGateway is safe for concurrent use.
type faultGateway struct {
	inner order.PaymentGateway
	ping  func(context.Context) error // the client's probe (payments.Client.Ping)
	plan  *plan
	tr    *tracker
	hist  *history

	mu      sync.Mutex
	calls   map[string]uint64    // capture calls so far, by order id
	charged map[string]time.Time // when a capture call first succeeded, by order id
}

var (
	_ order.PaymentGateway = (*faultGateway)(nil)
	_ order.PaymentLookup  = (*faultGateway)(nil)
)

// Ping is the circuit breaker's probe of the payments service, as
// cmd/orderworker's: payments.Client.Ping (POST /payments/probe), over the
// same link as the captures.
func (g *faultGateway) Ping(ctx context.Context) error { return g.ping(ctx) }

// LookupPayments implements order.PaymentLookup: the payments service's
// ledger, through the same client (and the same transport faults) as the
// captures.
func (g *faultGateway) LookupPayments(ctx context.Context, orderID string) ([]order.CapturedPayment, error) {
	lookup, ok := g.inner.(order.PaymentLookup)
	if !ok {
		return nil, errors.New("simulation: the payments gateway has no lookup")
	}
	ps, err := lookup.LookupPayments(ctx, orderID)
	if err != nil {
		g.hist.add(orderID, "", "payment lookup: %v", err)
		return nil, err
	}
	g.hist.add(orderID, "", "payment lookup: %d payment(s) in the ledger", len(ps))
	return ps, nil
}

// Capture implements order.PaymentGateway.
func (g *faultGateway) Capture(ctx context.Context, key string, c order.Capture) (string, error) {
	g.mu.Lock()
	g.calls[c.OrderID]++
	n := g.calls[c.OrderID]
	g.mu.Unlock()
	id, err := g.inner.Capture(ctx, key, c)
	g.tr.countPayment(func(pc *paymentCounts) {
		pc.Captures++
		if err != nil {
			pc.Failed++
		}
	})
	if err != nil {
		g.hist.add(c.OrderID, "", "capture call %d, key %s: %v", n, key, err)
		return "", err
	}
	g.hist.add(c.OrderID, "", "capture call %d, key %s: payment %s", n, key, id)
	g.mu.Lock()
	if _, ok := g.charged[c.OrderID]; !ok {
		g.charged[c.OrderID] = time.Now()
	}
	g.mu.Unlock()
	if d := deliveryFrom(ctx); d != nil && g.plan.inject(faultPaymentCrash, c.OrderID, n, 0) {
		g.tr.markPaymentCrash(d)
		g.hist.add(c.OrderID, "", "fault: the worker of #%d dies before marking the payment completed", d.seq)
	}
	return id, nil
}

// firstCharge returns when a capture call for order id first succeeded.
func (g *faultGateway) firstCharge(id string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.charged[id]
	return t, ok
}

// Ledger is the payments service's view of the run: the ground truth the
// checker holds the payment records against.
type Ledger struct {
	// Charges counts the charges the service made, by order id
	// (paymentservice.Service.ChargesByOrder).
	Charges map[string]int
	// Payments are the payments the stored payment records name, by
	// payment id, as the service reports them; a record naming a payment
	// the service does not know has no entry.
	Payments map[string]payments.Payment
}

// ledger reads svc's charges and looks up, through its API, every payment
// that a payment record among docs names.
func ledger(svc *paymentservice.Service, docs []memstore.Item) (*Ledger, error) {
	l := &Ledger{Charges: svc.ChargesByOrder(), Payments: make(map[string]payments.Payment)}
	for _, it := range docs {
		var rec order.PaymentRecord
		if json.Unmarshal(it.Body, &rec) != nil || rec.Type != order.TypePayment || rec.PaymentID == "" {
			continue
		}
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/payments/"+url.PathEscape(rec.PaymentID), nil))
		if w.Code == http.StatusNotFound {
			continue
		}
		var p payments.Payment
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &p) != nil {
			return nil, fmt.Errorf("simulation: GET /payments/%s: %d %s", rec.PaymentID, w.Code, w.Body.String())
		}
		l.Payments[p.PaymentID] = p
	}
	return l, nil
}
