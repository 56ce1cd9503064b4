package payments

import (
	"github.com/idempotent-consumer/sbcosmos/order"

	"errors"
	"fmt"
	"strings"
	"time"
)

// Header names of the idempotency contract.
const (
	// HeaderIdempotencyKey carries the key that identifies one logical
	// request across its retries.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderIdempotentReplayed is "true" on a response replayed from the
	// service's store rather than produced by processing the request.
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

// Limits of the wire contract.
const (
	// MaxKeyLength is the longest idempotency key, in bytes.
	MaxKeyLength = 255
	// MaxOrderIDLength is the longest order id, in bytes.
	MaxOrderIDLength = 128
	// MaxBodySize is the largest capture request body, in bytes.
	MaxBodySize = 64 << 10
)

// DefaultKeyRetention is how long the reference payments service
// (test/paymentservice) remembers an idempotency key after its charge
// unless told otherwise: 30 days, the upper end of what payment providers
// keep (24 hours to 30 days). It is that service's setting, not what a
// client may assume of a real provider: the order worker assumes
// order.DefaultPaymentKeyRetention, 24 hours, unless its
// PAYMENTS_KEY_RETENTION says the service keeps keys longer, and resolves a
// claim older than what it assumes by looking the payment up
// (GET /payments?orderId=), never by a blind retry.
const DefaultKeyRetention = 30 * 24 * time.Hour

// StatusCaptured is the status of a payment whose amount has been charged.
const StatusCaptured = "captured"

// KeyFor returns the idempotency key of the payment capture of an order,
// order.PaymentKey. It depends on the order id alone, so it is the same on
// every attempt, every redelivery of the order message and every worker
// instance.
func KeyFor(orderID string) string { return order.PaymentKey(orderID) }

// CaptureRequest is the body of POST /payments: charge AmountMinor in Currency
// for OrderID. Its three fields are the request's fingerprint: a retry with
// the same key must carry the same values.
type CaptureRequest struct {
	// OrderID is the merchant's reference: 1 to MaxOrderIDLength printable
	// ASCII characters. The ledger is indexed by it, so that
	// GET /payments?orderId= finds the payments of an order.
	OrderID string `json:"orderId"`
	// AmountMinor is the positive amount in the currency's minor unit (cents).
	AmountMinor int64 `json:"amountMinor"`
	// Currency is an ISO 4217 code: three upper-case letters.
	Currency string `json:"currency"`
}

// Validate reports the first field of r that breaks the wire contract.
func (r CaptureRequest) Validate() error {
	if err := CheckOrderID(r.OrderID); err != nil {
		return err
	}
	switch {
	case r.AmountMinor <= 0:
		return fmt.Errorf("amountMinor: %d is not a positive amount", r.AmountMinor)
	case !isCurrency(r.Currency):
		return fmt.Errorf("currency: %q is not three upper-case letters (ISO 4217)", r.Currency)
	}
	return nil
}

// CheckOrderID validates the merchant's order reference of a capture or a
// lookup.
func CheckOrderID(id string) error {
	switch {
	case id == "":
		return errors.New("orderId is required")
	case len(id) > MaxOrderIDLength:
		return fmt.Errorf("orderId: %d bytes exceeds the limit of %d", len(id), MaxOrderIDLength)
	case !isPrintableASCII(id, ' '):
		return errors.New("orderId: only printable ASCII characters are allowed")
	}
	return nil
}

// PaymentList is the body of GET /payments?orderId=<id>: every payment the
// service's ledger holds for the order, oldest first. The ledger keeps
// payments for ever, after their idempotency keys are forgotten, so an empty
// list means that no charge for the order ever happened.
type PaymentList struct {
	OrderID  string    `json:"orderId"`
	Payments []Payment `json:"payments"`
}

// Payment is a captured payment, the body of a 201 Created answer to
// POST /payments and of GET /payments/{paymentId}.
type Payment struct {
	// PaymentID is the service's id of the charge, "pay_" and digits.
	PaymentID   string    `json:"paymentId"`
	OrderID     string    `json:"orderId"`
	AmountMinor int64     `json:"amountMinor"`
	Currency    string    `json:"currency"`
	Status      string    `json:"status"`
	CapturedAt  time.Time `json:"capturedAt"`

	// Replayed reports that the service answered from its idempotency store
	// (Idempotent-Replayed: true): the charge happened on an earlier attempt.
	// The client sets it from the response header; it is not in the body.
	Replayed bool `json:"-"`
}

// Problem is an RFC 9457 problem document (application/problem+json), the
// body of every error response of the service.
type Problem struct {
	// Type identifies the problem type; "about:blank" means the status code
	// says it all.
	Type string `json:"type,omitempty"`
	// Title is the status code's reason phrase.
	Title string `json:"title,omitempty"`
	// Status repeats the HTTP status code.
	Status int `json:"status,omitempty"`
	// Detail explains this occurrence, for humans.
	Detail string `json:"detail,omitempty"`
}

// ParseKey returns the idempotency key in an Idempotency-Key header value,
// as a server of the payments API reads it.
// The value is either a bare token of visible ASCII characters, as payment
// providers use it, or the IETF draft's Structured Field String (a quoted
// string with \" and \\ escapes); both forms of one key are the same key.
func ParseKey(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		inner := v[1 : len(v)-1]
		var b strings.Builder
		for i := 0; i < len(inner); i++ {
			c := inner[i]
			switch {
			case c == '\\':
				i++
				if i == len(inner) || inner[i] != '"' && inner[i] != '\\' {
					return "", errors.New("idempotency key: invalid escape in quoted string")
				}
				b.WriteByte(inner[i])
			case c == '"':
				return "", errors.New("idempotency key: unescaped quote in quoted string")
			default:
				b.WriteByte(c)
			}
		}
		v = b.String()
		if !isPrintableASCII(v, ' ') {
			return "", errors.New("idempotency key: only printable ASCII characters are allowed")
		}
	} else if !isPrintableASCII(v, '!') {
		return "", errors.New("idempotency key: only visible ASCII characters are allowed")
	}
	if err := checkKeyLength(v); err != nil {
		return "", err
	}
	return v, nil
}

// checkKey validates a key the client is about to send bare.
func checkKey(key string) error {
	if err := checkKeyLength(key); err != nil {
		return err
	}
	if !isPrintableASCII(key, '!') {
		return errors.New("idempotency key: only visible ASCII characters are allowed")
	}
	return nil
}

func checkKeyLength(key string) error {
	switch {
	case key == "":
		return errors.New("idempotency key is required")
	case len(key) > MaxKeyLength:
		return fmt.Errorf("idempotency key: %d bytes exceeds the limit of %d", len(key), MaxKeyLength)
	}
	return nil
}

// isPrintableASCII reports whether every byte of s is between lowest and '~'.
func isPrintableASCII(s string, lowest byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < lowest || s[i] > '~' {
			return false
		}
	}
	return true
}

func isCurrency(s string) bool {
	return len(s) == 3 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z' && s[2] >= 'A' && s[2] <= 'Z'
}
