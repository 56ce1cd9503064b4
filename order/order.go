package order

import (
	"github.com/idempotent-consumer/sbcosmos/order/internal/strictjson"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Limits of the wire contract.
const (
	// MaxBodySize is the largest message body Decode accepts, in bytes.
	MaxBodySize = 64 << 10
	// MaxLines is the largest number of order lines.
	MaxLines = 100
	// MaxIDLength is the longest customer or SKU identifier.
	MaxIDLength = 128
	// MaxMessageIDLength is the longest MessageId Service Bus accepts.
	MaxMessageIDLength = 128
	// MaxOrderIDLength is the longest order id: short enough that the
	// longest MessageId derived from it, the status change
	// StatusMessageID(orderID, math.MaxInt64), is still a legal MessageId.
	MaxOrderIDLength = MaxMessageIDLength - len(statusIDSeparator) - maxVersionDigits
	// MaxQuantity is the largest quantity of one order line.
	MaxQuantity = 10_000
	// MaxSafeInteger is the largest integer a message may carry in a field
	// the worker stores: 2^53-1, JavaScript's Number.MAX_SAFE_INTEGER.
	// cosmium and the JavaScript readers of the store and its change feed
	// keep JSON numbers as float64, which holds no larger integer exactly:
	// 2^53+1 would be stored as 2^53, and math.MaxInt64 comes back as
	// 9223372036854776000, which no int64 decodes. A message with a larger
	// total, price or version is Invalid (ReasonInvalidMessage, the field
	// and this bound in its description).
	MaxSafeInteger = 1<<53 - 1
)

// outOfRange is the error for an integer field above MaxSafeInteger.
func outOfRange(field string, v int64) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf("%d exceeds %d (2^53-1), the largest integer the store and its JavaScript readers keep exactly", v, MaxSafeInteger)}
}

// Order is an order message as the producer sends it. The JSON field names are
// the wire contract documented in the package comment.
type Order struct {
	OrderID    string    `json:"orderId"`
	CustomerID string    `json:"customerId"`
	Currency   string    `json:"currency"`
	Lines      []Line    `json:"lines"`
	TotalMinor int64     `json:"totalMinor"`
	PlacedAt   time.Time `json:"placedAt"`

	// SentAt and TraceID are volatile metadata: a producer retry may change
	// them, so they are not part of the request hash.
	SentAt  *time.Time `json:"sentAt,omitempty"`
	TraceID string     `json:"traceId,omitempty"`
}

// Line is one line of an order.
type Line struct {
	SKU            string `json:"sku"`
	Quantity       int64  `json:"quantity"`
	UnitPriceMinor int64  `json:"unitPriceMinor"`
}

// ErrInvalid is the error every validation and decoding failure matches with
// errors.Is. A message that fails with it can never succeed and must be
// dead-lettered.
var ErrInvalid = errors.New("invalid order message")

// FieldError reports which field of an order message is wrong and why.
type FieldError struct {
	Field   string // JSON path of the field, such as "lines[2].quantity"
	Problem string // what is wrong with it
}

func (e *FieldError) Error() string { return "order: " + e.Field + ": " + e.Problem }

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// SyntaxError reports a body that is not a single well-formed JSON order object.
type SyntaxError struct {
	Err error // the underlying decoding error
}

func (e *SyntaxError) Error() string { return "order: malformed JSON: " + e.Err.Error() }

// Unwrap returns the underlying decoding error.
func (e *SyntaxError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalid.
func (e *SyntaxError) Is(target error) bool { return target == ErrInvalid }

// Decode parses and validates one order message body. Every error it returns
// matches ErrInvalid; a *FieldError names the offending field and a
// *SyntaxError reports malformed JSON.
func Decode(body []byte) (Order, error) {
	o, _, err := decodeOrder(body)
	if err != nil {
		return Order{}, err
	}
	return o, nil
}

// decodeOrder is Decode that, when the body decoded but failed validation,
// still returns the order id if that id itself is valid, so that the
// Invalid result and its log line can name the order.
func decodeOrder(body []byte) (o Order, orderID string, err error) {
	// The plain form every producer of this project sends is decoded,
	// and its keys checked, in one pass; anything else goes to the
	// strict decoder, which names what is wrong.
	if len(body) > MaxBodySize || !decodePlain(body, &o) {
		var strict Order // on the heap (decodeStrict takes an any): only on this path
		if err := decodeStrict(body, &strict, "order"); err != nil {
			return Order{}, "", err
		}
		o = strict
	}
	if checkOrderID("orderId", o.OrderID) == nil {
		orderID = o.OrderID
	}
	return o, orderID, o.Validate()
}

// decodeStrict decodes one JSON object of at most MaxBodySize bytes into v,
// rejecting unknown fields, trailing data, repeated keys and keys spelled
// other than their field's name. Its errors match ErrInvalid.
func decodeStrict(body []byte, v any, what string) error {
	if len(body) > MaxBodySize {
		return &FieldError{Field: "body", Problem: fmt.Sprintf("%d bytes exceeds the limit of %d", len(body), MaxBodySize)}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return &FieldError{Field: ute.Field, Problem: "must be a JSON " + jsonKind(ute.Type.Kind().String())}
		}
		return &SyntaxError{Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &SyntaxError{Err: errors.New("data after the " + what + " object")}
	}
	// encoding/json accepted a repeated key (the last wins) and keys that
	// match a field only case-insensitively: reject both, so that no other
	// JSON reader can see another message in the same bytes.
	if err := strictjson.CheckKeys(body, v); err != nil {
		var ke *strictjson.KeyError
		if errors.As(err, &ke) {
			return &FieldError{Field: ke.Path, Problem: ke.Problem}
		}
		return err
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int64", "int", "uint32":
		return "integer"
	case "slice":
		return "array"
	case "struct", "ptr":
		return "object or RFC 3339 string"
	}
	return goKind
}

// Validate checks every business rule of the wire contract and returns a
// *FieldError for the first field that breaks one.
//
// It accepts no order whose payment capture the payments API would reject
// (package payments tests this for every accepted order): the id, currency
// and total of a valid order make a valid capture. A total of zero is valid
// and has nothing to capture: the payment step skips it. Every integer it
// accepts, the total and so every line's price, is at most MaxSafeInteger.
func (o *Order) Validate() error {
	if err := checkOrderID("orderId", o.OrderID); err != nil {
		return err
	}
	if err := checkID("customerId", o.CustomerID); err != nil {
		return err
	}
	if !isCurrency(o.Currency) {
		return &FieldError{Field: "currency", Problem: fmt.Sprintf("%q is not three upper-case letters (ISO 4217)", o.Currency)}
	}
	if o.TotalMinor > MaxSafeInteger {
		return outOfRange("totalMinor", o.TotalMinor)
	}
	if len(o.Lines) == 0 {
		return &FieldError{Field: "lines", Problem: "must have at least one line"}
	}
	if len(o.Lines) > MaxLines {
		return &FieldError{Field: "lines", Problem: fmt.Sprintf("%d lines exceeds the limit of %d", len(o.Lines), MaxLines)}
	}
	var total int64
	for i, l := range o.Lines {
		// The field's name is built only for an error: a valid order
		// allocates nothing here.
		field := func() string { return "lines[" + strconv.Itoa(i) + "]" }
		if checkID("", l.SKU) != nil {
			return checkID(field()+".sku", l.SKU)
		}
		if l.Quantity < 1 || l.Quantity > MaxQuantity {
			return &FieldError{Field: field() + ".quantity", Problem: fmt.Sprintf("%d is not between 1 and %d", l.Quantity, MaxQuantity)}
		}
		if l.UnitPriceMinor < 0 {
			return &FieldError{Field: field() + ".unitPriceMinor", Problem: fmt.Sprintf("%d is negative", l.UnitPriceMinor)}
		}
		if l.UnitPriceMinor > (MaxSafeInteger-total)/l.Quantity {
			return &FieldError{Field: field() + ".unitPriceMinor", Problem: fmt.Sprintf("the order total exceeds %d (2^53-1), the largest integer the store and its JavaScript readers keep exactly", MaxSafeInteger)}
		}
		total += l.Quantity * l.UnitPriceMinor
	}
	if o.TotalMinor != total {
		return &FieldError{Field: "totalMinor", Problem: fmt.Sprintf("%d does not equal the sum of the lines, %d", o.TotalMinor, total)}
	}
	if o.PlacedAt.IsZero() {
		return &FieldError{Field: "placedAt", Problem: "is required"}
	}
	return nil
}

// ValidateOrderID reports whether id is a legal order id, with an error
// matching ErrInvalid that says why not. A producer that builds order ids
// (from a configured prefix, say) can check them before sending.
//
// An order id has 1 to MaxOrderIDLength characters from [A-Za-z0-9._-].
// These are safe as a Cosmos DB id and partition key value (which forbid
// '/', '\', '?' and '#') and in log lines. The colon is excluded because
// every other id the project derives from an order id contains one: the
// status change MessageIds "<orderId>:v<N>" and the document ids
// "OrderAccepted:<orderId>", "Payment:<orderId>" and "inbox:<consumer>:…".
// So no order placement can share a MessageId with a status change (the
// broker's duplicate detection would silently drop one of them), and no
// order document can share an id with a companion document.
func ValidateOrderID(id string) error { return checkOrderID("orderId", id) }

// checkOrderID is ValidateOrderID for the named field.
func checkOrderID(field, v string) error {
	if len(v) > MaxOrderIDLength {
		return &FieldError{Field: field, Problem: fmt.Sprintf("%d characters exceeds the limit of %d", len(v), MaxOrderIDLength)}
	}
	if err := checkID(field, v); err != nil {
		return err
	}
	if i := strings.IndexByte(v, ':'); i >= 0 {
		return &FieldError{Field: field, Problem: fmt.Sprintf("character ':' at offset %d is not allowed in an order id (it separates the parts of the ids derived from it)", i)}
	}
	return nil
}

// checkID accepts 1 to MaxIDLength characters from [A-Za-z0-9._:-]: safe as a
// Cosmos DB id and partition key value (which forbid '/', '\', '?' and '#')
// and in log lines.
func checkID(field, v string) error {
	if v == "" {
		return &FieldError{Field: field, Problem: "is required"}
	}
	if len(v) > MaxIDLength {
		return &FieldError{Field: field, Problem: fmt.Sprintf("%d characters exceeds the limit of %d", len(v), MaxIDLength)}
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return &FieldError{Field: field, Problem: fmt.Sprintf("character %q at offset %d is not one of A-Z a-z 0-9 . _ : -", c, i)}
		}
	}
	return nil
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}
