package paymentservice

import (
	"github.com/idempotent-consumer/sbcosmos/payments"
	"strconv"
	"time"
)

// FaultKind is what a [Fault] does to one request.
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

// FaultRequest describes the request a [ServiceOptions.Faults] function
// decides on: one POST /payments with a well-formed key and body.
type FaultRequest struct {
	// Key is the request's idempotency key.
	Key string
	// Request is the request's body.
	Request payments.CaptureRequest
	// Attempt counts the well-formed requests with Key the service has seen
	// while it remembered the key, this one included: 1 for the first. It
	// lets a fault function fail, say, the first two attempts of every key,
	// deterministically.
	Attempt int
}
