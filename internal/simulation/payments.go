package simulation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
)

// paymentsURL is the base URL the simulation's payments client uses. No
// request leaves the process: paymentLink hands each one to the service.
const paymentsURL = "http://payments.simulation.invalid"

// newPayments returns the reference payments service, on the virtual clock
// and with the plan's service-side faults, and the consumer's gateway to
// it: a payments.Client over paymentLink, wrapped in a faultGateway.
func newPayments(clock *sbqueue.VirtualClock, p *plan, tr *tracker) (*payments.Service, *faultGateway, error) {
	svc := payments.NewService(&payments.ServiceOptions{Now: clock.Now, Faults: serviceFaults(p, tr)})
	link := &paymentLink{service: svc, plan: p, tr: tr, requests: make(map[string]uint64)}
	client, err := payments.NewClient(paymentsURL, &payments.ClientOptions{
		HTTPClient:  &http.Client{Transport: link},
		MaxAttempts: 2,
		// Backoff is instant, as redeliveries are on the virtual clock.
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		return nil, nil, err
	}
	return svc, &faultGateway{inner: payments.Gateway{Client: client}, plan: p, tr: tr, calls: make(map[string]uint64)}, nil
}

// serviceFaults returns the payments service's fault function: for the
// n-th request with an order's key, PaymentFailure answers 500, 503 or 429
// before charging, and half of PaymentTimeout charges (or replays) and then
// drops the connection. The other half is paymentLink's.
func serviceFaults(p *plan, tr *tracker) func(payments.FaultRequest) payments.Fault {
	return func(r payments.FaultRequest) payments.Fault {
		id, n := r.Request.OrderID, uint64(r.Attempt)
		switch {
		case p.inject(faultPaymentFailure, id, n, 0):
			tr.count(func(c *FaultCounts) { c.PaymentFailure++ })
			return payments.Fault{Kind: payments.FaultFail, Status: [...]int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests}[n%3]}
		case p.inject(faultPaymentDrop, id, n, 0):
			tr.count(func(c *FaultCounts) { c.PaymentDrop++ })
			return payments.Fault{Kind: payments.FaultDrop}
		}
		return payments.Fault{}
	}
}

// paymentLink is the network between the consumer and the payments service:
// an http.RoundTripper that hands each request to the service in process,
// with no socket. The service's FaultDrop aborts its handler, which the
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

	rec := httptest.NewRecorder()
	if aborted := serve(l.service, rec, r); aborted {
		return nil, errConnectionDropped
	}
	res := rec.Result()
	ok := res.StatusCode == http.StatusOK || res.StatusCode == http.StatusCreated
	if ok && id != "" && l.plan.inject(faultPaymentTimeout, id, n, 0) {
		l.tr.count(func(c *FaultCounts) { c.PaymentTimeout++ })
		return nil, errAnswerTimedOut
	}
	if ok && res.Header.Get(payments.HeaderIdempotentReplayed) == "true" {
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
	plan  *plan
	tr    *tracker

	mu    sync.Mutex
	calls map[string]uint64 // capture calls so far, by order id
}

var _ order.PaymentGateway = (*faultGateway)(nil)

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
		return "", err
	}
	if d := deliveryFrom(ctx); d != nil && g.plan.inject(faultPaymentCrash, c.OrderID, n, 0) {
		g.tr.markPaymentCrash(d)
	}
	return id, nil
}

// Ledger is the payments service's view of the run: the ground truth the
// checker holds the payment records against.
type Ledger struct {
	// Charges counts the charges the service made, by order id
	// (payments.Service.ChargesByOrder).
	Charges map[string]int
	// Payments are the payments the stored payment records name, by
	// payment id, as the service reports them; a record naming a payment
	// the service does not know has no entry.
	Payments map[string]payments.Payment
}

// ledger reads svc's charges and looks up, through its API, every payment
// that a payment record among docs names.
func ledger(svc *payments.Service, docs []memstore.Item) (*Ledger, error) {
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
