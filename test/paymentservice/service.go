package paymentservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"io"
	"maps"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultKeyRetention is how long the service remembers a key after its
// charge unless [ServiceOptions.KeyRetention] says otherwise:
// [payments.DefaultKeyRetention], the retention the API promises.
const DefaultKeyRetention = payments.DefaultKeyRetention

// ServiceOptions configures a [Service]. The zero value is the default.
type ServiceOptions struct {
	// KeyRetention is how long a key is remembered after its charge, on
	// the service's clock (Now); a request with the key after that is a new
	// request and charges again. It should exceed the consumer's redelivery
	// horizon (see the package documentation), and a consumer must never
	// assume more than it. Payments themselves are never forgotten: the
	// ledger that GET /payments?orderId= reads keeps them for ever. Zero
	// means DefaultKeyRetention.
	KeyRetention time.Duration
	// Now returns the current time, for capturedAt and key expiry; nil means
	// time.Now. Tests inject a clock to expire keys without waiting.
	Now func() time.Time
	// Faults, if not nil, is called once for every well-formed
	// POST /payments request, after the service has decided what to do with
	// it and before it does it, and once for every well-formed
	// POST /payments/probe (FaultRequest.Kind tells them apart), and the
	// request suffers the Fault it returns. During an Outage it is not
	// called: the outage answers first. It is called concurrently from the requests' goroutines and may block
	// (a test can hold a first request, and so its key, while others
	// arrive). The service itself draws no random numbers: a deterministic
	// Faults function makes a deterministic run.
	Faults func(FaultRequest) Fault
}

// Service is the reference payment service: an http.Handler that captures
// payments once per Idempotency-Key, with the semantics in the package
// documentation, and answers probes that ask whether a capture would go
// through. Its state (keys, payments, charge counts) lives in memory; a
// probe changes none of it.
//
// A Service is safe for concurrent use. The key check and the claim of a key
// by its first request are one atomic step under a mutex, so any number of
// concurrent requests with one key charge once.
type Service struct {
	retention time.Duration
	now       func() time.Time
	faults    func(FaultRequest) Fault
	mux       *http.ServeMux
	outage    atomic.Pointer[Outage] // the outage in progress (see SetOutage), or nil
	probes    atomic.Int64           // well-formed probes seen: FaultRequest.Attempt of a probe

	mu        sync.Mutex
	keys      map[string]*keyEntry
	payments  map[string]payments.Payment // the ledger, by payment id; never forgotten
	ledger    map[string][]string         // payment ids by order id, in charge order
	byOrder   map[string]int              // charges by order id
	charges   int
	seq       int
	lastSweep time.Time
}

var _ http.Handler = (*Service)(nil)

// keyState is where a key stands.
type keyState int

const (
	keyFree     keyState = iota // seen, but no request with it is in flight or charged
	keyInFlight                 // its first request is being processed
	keyDone                     // charged; its response is stored
)

// keyEntry is what the service remembers of a key.
type keyEntry struct {
	state    keyState
	req      payments.CaptureRequest // the fingerprint, while in flight or done
	attempts int
	status   int
	location string
	body     []byte
	expires  time.Time // when a free or done entry is forgotten
}

// NewService returns a Service with no keys and no payments. o may be nil.
func NewService(o *ServiceOptions) *Service {
	if o == nil {
		o = &ServiceOptions{}
	}
	s := &Service{
		retention: o.KeyRetention,
		now:       o.Now,
		faults:    o.Faults,
		mux:       http.NewServeMux(),
		keys:      make(map[string]*keyEntry),
		payments:  make(map[string]payments.Payment),
		ledger:    make(map[string][]string),
		byOrder:   make(map[string]int),
	}
	if s.retention <= 0 {
		s.retention = DefaultKeyRetention
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.mux.HandleFunc("POST /payments", s.capture)
	s.mux.HandleFunc("POST /payments/probe", s.probe)
	s.mux.HandleFunc("GET /payments", s.listPayments)
	s.mux.HandleFunc("GET /payments/{paymentId}", s.getPayment)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	return s
}

// ServeHTTP serves POST /payments, POST /payments/probe,
// GET /payments?orderId=, GET /payments/{paymentId} and GET /healthz.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Charges returns the number of charges the service has performed: the
// payments it created, not the requests it answered.
func (s *Service) Charges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.charges
}

// ChargesFor returns the number of charges for orderID. Exactly-once capture
// means 1 for every accepted order.
func (s *Service) ChargesFor(orderID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byOrder[orderID]
}

// ChargesByOrder returns a snapshot of the number of charges per order id, for
// checkers that verify every order was charged exactly once and no other.
func (s *Service) ChargesByOrder() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.byOrder)
}

// verdict is what the service decided to do with a well-formed request.
type verdict int

const (
	verdictCharge   verdict = iota // first request: the key is now in flight
	verdictReplay                  // key done, same payload
	verdictInFlight                // key in flight, same payload: 409
	verdictMismatch                // key in flight or done, other payload: 422
)

type decision struct {
	verdict  verdict
	attempt  int
	status   int // verdictReplay
	location string
	body     []byte
}

func (s *Service) capture(w http.ResponseWriter, r *http.Request) {
	if s.failOutage(w) {
		return
	}
	key, err := payments.ParseKey(r.Header.Get(payments.HeaderIdempotencyKey))
	if err != nil {
		writeProblem(w, http.StatusBadRequest, err.Error())
		return
	}
	req, status, err := decodeCapture(w, r)
	if err != nil {
		writeProblem(w, status, err.Error())
		return
	}

	d := s.decide(key, req)
	var fault Fault
	if s.faults != nil {
		fault = s.faults(FaultRequest{Kind: RequestCapture, Key: key, Request: req, Attempt: d.attempt})
	}
	switch fault.Kind {
	case FaultFail:
		if d.verdict == verdictCharge {
			s.release(key)
		}
		failFault(w, fault, "injected fault: failed before charging")
		return
	case FaultDelay:
		if fault.Delay > 0 && !wait(r.Context(), fault.Delay) {
			if d.verdict == verdictCharge {
				s.release(key)
			}
			return // the client is gone: there is no one to answer
		}
	}

	switch d.verdict {
	case verdictCharge:
		d.status, d.location, d.body, err = s.charge(key, req)
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, err.Error())
			return
		}
	case verdictInFlight:
		d.status = http.StatusConflict
	case verdictMismatch:
		d.status = http.StatusUnprocessableEntity
	}

	switch fault.Kind {
	case FaultDrop:
		panic(http.ErrAbortHandler) // closes the connection without a response
	case FaultHang:
		wait(r.Context(), fault.Delay)
		panic(http.ErrAbortHandler)
	}

	switch d.verdict {
	case verdictCharge, verdictReplay:
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", d.location)
		if d.verdict == verdictReplay {
			h.Set(payments.HeaderIdempotentReplayed, "true")
		}
		w.WriteHeader(d.status)
		w.Write(d.body)
	case verdictInFlight:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, d.status, "a request with this idempotency key is still being processed")
	case verdictMismatch:
		writeProblem(w, d.status, "this idempotency key was used for a different request")
	}
}

// probe answers POST /payments/probe: whether a capture would go through
// now. The reference service has no acquirer; the call a capture makes to
// it, as a zero-amount verification, is what an Outage and the Faults
// function strike. A probe fails as a capture would (the outage's status
// and Retry-After, or the fault's), and otherwise answers 204 No Content.
// It reads no key (an Idempotency-Key header is ignored, never claimed),
// takes no body (400 if it has one) and charges or records nothing.
func (s *Service) probe(w http.ResponseWriter, r *http.Request) {
	if s.failOutage(w) {
		return
	}
	if hasBody(r) {
		writeProblem(w, http.StatusBadRequest, "the probe takes no body")
		return
	}
	attempt := s.probes.Add(1)
	var fault Fault
	if s.faults != nil {
		fault = s.faults(FaultRequest{Kind: RequestProbe, Attempt: int(attempt)})
	}
	switch fault.Kind {
	case FaultFail:
		failFault(w, fault, "injected fault: the verification failed")
		return
	case FaultDelay:
		if fault.Delay > 0 && !wait(r.Context(), fault.Delay) {
			return // the client is gone: there is no one to answer
		}
	case FaultDrop:
		panic(http.ErrAbortHandler) // closes the connection without a response
	case FaultHang:
		wait(r.Context(), fault.Delay)
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(http.StatusNoContent)
}

// hasBody reports whether r has a body of at least one byte. r.Body is nil
// for a client's request handed to the service in process, without a
// server, as the simulation and the breaker's tests do.
func hasBody(r *http.Request) bool {
	if r.Body == nil {
		return false
	}
	n, _ := io.ReadFull(r.Body, make([]byte, 1))
	return n > 0
}

// decide looks the key up and, for a first request, claims it: the atomic
// step that makes one key charge once.
func (s *Service) decide(key string, req payments.CaptureRequest) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweepLocked(now)
	e := s.keys[key]
	if e != nil && e.state != keyInFlight && !now.Before(e.expires) {
		e = nil // expired: the key is new again
	}
	if e == nil {
		e = &keyEntry{}
		s.keys[key] = e
	}
	e.attempts++
	d := decision{attempt: e.attempts}
	switch {
	case e.state == keyFree:
		e.state, e.req = keyInFlight, req
		d.verdict = verdictCharge
	case e.req != req:
		d.verdict = verdictMismatch
	case e.state == keyInFlight:
		d.verdict = verdictInFlight
	default:
		d.verdict, d.status, d.location, d.body = verdictReplay, e.status, e.location, e.body
	}
	return d
}

// release frees a key whose first request ended without charging.
func (s *Service) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.keys[key]
	e.state, e.req = keyFree, payments.CaptureRequest{}
	e.expires = s.now().Add(s.retention)
}

// charge performs the charge of the request that holds key, stores its
// response under the key and returns it.
func (s *Service) charge(key string, req payments.CaptureRequest) (status int, location string, body []byte, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e := s.keys[key]
	p := payments.Payment{
		PaymentID:   fmt.Sprintf("pay_%08d", s.seq+1),
		OrderID:     req.OrderID,
		AmountMinor: req.AmountMinor,
		Currency:    req.Currency,
		Status:      payments.StatusCaptured,
		CapturedAt:  now.UTC(),
	}
	body, err = json.Marshal(p)
	if err != nil {
		e.state, e.req, e.expires = keyFree, payments.CaptureRequest{}, now.Add(s.retention)
		return 0, "", nil, fmt.Errorf("encoding the payment: %w", err)
	}
	body = append(body, '\n')
	s.seq++
	s.payments[p.PaymentID] = p
	s.ledger[p.OrderID] = append(s.ledger[p.OrderID], p.PaymentID)
	s.byOrder[p.OrderID]++
	s.charges++
	e.state, e.status, e.location, e.body = keyDone, http.StatusCreated, "/payments/"+p.PaymentID, body
	e.expires = now.Add(s.retention)
	return e.status, e.location, e.body, nil
}

// sweepInterval bounds how often sweepLocked scans every key.
const sweepInterval = time.Minute

// sweepLocked forgets expired keys, at most once per sweepInterval (or per
// retention, if shorter), so that memory follows the keys of the last
// retention period. Expiry itself does not depend on it: decide ignores an
// expired entry it finds.
func (s *Service) sweepLocked(now time.Time) {
	if now.Sub(s.lastSweep) < min(sweepInterval, s.retention) {
		return
	}
	s.lastSweep = now
	for k, e := range s.keys {
		if e.state != keyInFlight && !now.Before(e.expires) {
			delete(s.keys, k)
		}
	}
}

func (s *Service) getPayment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p, ok := s.payments[r.PathValue("paymentId")]
	s.mu.Unlock()
	if !ok {
		writeProblem(w, http.StatusNotFound, "no payment has this id")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(p)
}

// listPayments answers GET /payments?orderId=<id> with every payment the
// ledger holds for the order, oldest first: an empty list means no charge
// for it ever happened. The ledger is never forgotten, unlike idempotency
// keys, so this answer stays true after the key has expired.
func (s *Service) listPayments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if len(q) != 1 || len(q["orderId"]) != 1 {
		writeProblem(w, http.StatusBadRequest, "want exactly one query parameter, orderId")
		return
	}
	orderID := q.Get("orderId")
	if err := payments.CheckOrderID(orderID); err != nil {
		writeProblem(w, http.StatusBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	list := payments.PaymentList{OrderID: orderID, Payments: make([]payments.Payment, 0, len(s.ledger[orderID]))}
	for _, id := range s.ledger[orderID] {
		list.Payments = append(list.Payments, s.payments[id])
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

// decodeCapture reads and validates a capture request body. On failure it
// returns the status code to answer with.
func decodeCapture(w http.ResponseWriter, r *http.Request) (payments.CaptureRequest, int, error) {
	var req payments.CaptureRequest
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return req, http.StatusUnsupportedMediaType, fmt.Errorf("content type %q: want application/json", ct)
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, payments.MaxBodySize))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		err = errors.New("data after the JSON object")
	}
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return req, http.StatusRequestEntityTooLarge, fmt.Errorf("body exceeds %d bytes", mbe.Limit)
		}
		return req, http.StatusBadRequest, fmt.Errorf("body is not a capture request: %w", err)
	}
	if err := req.Validate(); err != nil {
		return req, http.StatusBadRequest, err
	}
	return req, 0, nil
}

// writeProblem answers with an RFC 9457 problem document.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(payments.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
}

// wait waits d, or until ctx ends if d is not positive, and reports whether
// ctx was still live at the end.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		<-ctx.Done()
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
