package paymentservice

import (
	"net/http"
	"strconv"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
)

// FaultKind is what a [Fault] does to one request. What a kind says of a
// capture holds for a probe (POST /payments/probe), which has nothing to
// charge: FaultFail answers the failure, FaultDelay delays the 204, and
// FaultDrop and FaultHang withhold it.
type FaultKind int

const (
	// FaultNone processes the request normally.
	FaultNone FaultKind = iota
	// FaultFail answers Fault.Status (503 Service Unavailable if zero) with a
	// problem document before doing anything else: nothing is charged or
	// replayed, and a first request leaves its key free.
	FaultFail
	// FaultDelay waits Fault.Delay, then processes the request normally. A
	// first request holds its key while it waits, so concurrent requests with
	// the key get 409 Conflict. If the client goes away during the wait,
	// nothing is charged and the key is freed.
	FaultDelay
	// FaultDrop processes the request (a first request charges), then closes
	// the connection without answering: the client sees a connection error
	// although the charge happened.
	FaultDrop
	// FaultHang processes the request (a first request charges), then
	// withholds the answer until the client gives up (or, if Fault.Delay is
	// positive, until it elapses) and closes the connection: the client sees
	// its own timeout although the charge happened.
	FaultHang
)

// String returns the name of the constant.
func (k FaultKind) String() string {
	switch k {
	case FaultNone:
		return "FaultNone"
	case FaultFail:
		return "FaultFail"
	case FaultDelay:
		return "FaultDelay"
	case FaultDrop:
		return "FaultDrop"
	case FaultHang:
		return "FaultHang"
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is an injected failure of one request, returned by
// [ServiceOptions.Faults]. The zero Fault is no fault.
type Fault struct {
	// Kind is what happens to the request.
	Kind FaultKind
	// Status is the error status code of FaultFail: 500, 503 (the default)
	// or 429, for instance.
	Status int
	// RetryAfter, if positive, sets a Retry-After header (in seconds, rounded
	// up) on the FaultFail answer.
	RetryAfter time.Duration
	// Delay is how long FaultDelay waits, and the longest FaultHang withholds
	// its answer (zero: until the client gives up).
	Delay time.Duration
}

// RequestKind tells the requests a [ServiceOptions.Faults] function sees
// apart.
type RequestKind int

const (
	// RequestCapture is a capture, POST /payments: the zero RequestKind.
	RequestCapture RequestKind = iota
	// RequestProbe is a probe, POST /payments/probe: the verification a
	// capture's call to the acquirer stands for, with no key, no body and
	// nothing to charge.
	RequestProbe
)

// String returns the name of the constant.
func (k RequestKind) String() string {
	switch k {
	case RequestCapture:
		return "RequestCapture"
	case RequestProbe:
		return "RequestProbe"
	}
	return "RequestKind(" + strconv.Itoa(int(k)) + ")"
}

// FaultRequest describes the request a [ServiceOptions.Faults] function
// decides on: one POST /payments with a well-formed key and body, or one
// well-formed POST /payments/probe.
//
// A function that models a failure of what captures need (the acquirer)
// strikes probes as it strikes captures, whatever their Kind, so that a
// probe sees what a capture would meet; one that models a failure of one
// order or one key looks at Kind and leaves probes alone.
type FaultRequest struct {
	// Kind is RequestCapture or RequestProbe.
	Kind RequestKind
	// Key is a capture's idempotency key; empty for a probe, which claims
	// none.
	Key string
	// Request is a capture's body; the zero CaptureRequest for a probe.
	Request payments.CaptureRequest
	// Attempt counts, for a capture, the well-formed requests with Key the
	// service has seen while it remembered the key, this one included: 1
	// for the first. It lets a fault function fail, say, the first two
	// attempts of every key, deterministically. For a probe it counts the
	// well-formed probes the service has seen, this one included, so that
	// the same function fails the first two probes.
	Attempt int
}

// Outage is a failure of the payments service that lasts until it is
// ended, unlike a [Fault], which a [ServiceOptions.Faults] function decides
// request by request: every POST /payments answers Status with a problem
// document before the service looks at its key, so nothing is charged or
// replayed and no key is claimed, and so does every POST /payments/probe,
// which asks whether a capture would go through. GET /healthz, the lookup
// (GET /payments?orderId=) and GET /payments/{paymentId} go on answering:
// they read the service's own ledger. Set it with [Service.SetOutage].
type Outage struct {
	// Status is the answer to every capture; zero means 503 Service
	// Unavailable.
	Status int
	// RetryAfter, if positive, sets a Retry-After header (in seconds,
	// rounded up) on the answers.
	RetryAfter time.Duration
}

// AcquirerOutage stands for an outage of the acquirer (the processor or
// card network) behind the payments service: the service's own process
// runs, so its health endpoint (GET /healthz) answers 200, while every
// capture, which needs the acquirer, answers 503. A circuit breaker that
// probes the service with payments.Client.Ping sees it: the probe
// (POST /payments/probe) makes the call a capture makes, and answers 503
// too.
func AcquirerOutage() Outage { return Outage{Status: http.StatusServiceUnavailable} }

// SetOutage starts o, replacing the outage in progress if there is one,
// and returns the function that ends it. Requests already past their check
// are not affected. It is safe for concurrent use.
func (s *Service) SetOutage(o Outage) (end func()) {
	if o.Status == 0 {
		o.Status = http.StatusServiceUnavailable
	}
	p := &o
	s.outage.Store(p)
	return func() { s.outage.CompareAndSwap(p, nil) }
}

// EndOutage ends the outage in progress, if there is one. It is safe for
// concurrent use.
func (s *Service) EndOutage() { s.outage.Store(nil) }

// failOutage answers a capture or a probe during an outage and reports
// whether it did.
func (s *Service) failOutage(w http.ResponseWriter) bool {
	o := s.outage.Load()
	if o == nil {
		return false
	}
	setRetryAfter(w, o.RetryAfter)
	writeProblem(w, o.Status, "outage: the service cannot capture payments now")
	return true
}

// failFault answers a request with a FaultFail: f.Status (503 if zero) and
// f.RetryAfter.
func failFault(w http.ResponseWriter, f Fault, detail string) {
	status := f.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	setRetryAfter(w, f.RetryAfter)
	writeProblem(w, status, detail)
}

// setRetryAfter sets a Retry-After header of d in seconds, rounded up, if d
// is positive.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
}
