// Package invoice is a second, deliberately small domain built on package
// idempotent. It exists to prove that the core is separable from the order
// example: it imports nothing of the project but the core, and nothing in the
// core was changed for it. It is an example to read, not part of the
// product; copy it as the starting point of your own message type.
//
// An invoice message is a JSON object whose MessageId is its invoiceId:
//
//	{"invoiceId": "inv-1", "customerId": "cust-42", "currency": "EUR",
//	 "amountMinor": 1999, "issuedAt": "2026-11-30T10:00:00Z"}
//
// An accepted invoice writes two documents in one transactional batch under
// partition key value invoiceId (container partition key path
// [PartitionKeyPath]): the invoice marker, whose id is the invoice id and
// which records the request hash, and the "InvoiceIssued:<invoiceId>" outbox
// event. A redelivery is a Duplicate; the same invoiceId with other content
// is a Mismatch dead-lettered as "InvoiceIdReused".
//
// The consumer is a worker.Handler as it is: worker.New(receiver,
// invoice.NewConsumer(store), logger, options) runs it on a Service Bus
// queue, and cosmosstore.New on a container partitioned on /invoiceId is its
// store.
package invoice

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// PartitionKeyPath is the partition key path of the invoices container.
const PartitionKeyPath = "/invoiceId"

// ReasonInvoiceIDReused is the dead-letter reason of an invoiceId reused for
// other content.
const ReasonInvoiceIDReused = "InvoiceIdReused"

// Invoice is an invoice message. Every field is part of the request hash.
type Invoice struct {
	InvoiceID   string    `json:"invoiceId"`
	CustomerID  string    `json:"customerId"`
	Currency    string    `json:"currency"`    // ISO 4217, three upper-case letters
	AmountMinor int64     `json:"amountMinor"` // in the currency's minor unit; positive
	IssuedAt    time.Time `json:"issuedAt"`
}

// Kind is the idempotent.Kind of invoice messages. It is stateless.
type Kind struct{}

var (
	_ idempotent.Kind[Invoice]       = Kind{}
	_ idempotent.ReasonNamer         = Kind{}
	_ idempotent.EffectKind[Invoice] = Kind{}
)

// NewConsumer returns the idempotent consumer of invoice messages over store.
func NewConsumer(store idempotent.Store, opts ...idempotent.Option) *idempotent.Consumer[Invoice] {
	return idempotent.NewConsumer[Invoice](Kind{}, store, opts...)
}

// Decode decodes one invoice message strictly (an unknown field or data
// after the object is an error) and validates it.
func (Kind) Decode(body []byte) (Invoice, error) {
	var v Invoice
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return Invoice{}, fmt.Errorf("invoice: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Invoice{}, errors.New("invoice: data after the invoice object")
	}
	var errs []error
	check := func(ok bool, field, problem string) {
		if !ok {
			errs = append(errs, fmt.Errorf("invoice: %s: %s", field, problem))
		}
	}
	check(isID(v.InvoiceID), "invoiceId", "must be 1 to 128 characters from A-Z a-z 0-9 . _ -")
	check(isID(v.CustomerID), "customerId", "must be 1 to 128 characters from A-Z a-z 0-9 . _ -")
	check(len(v.Currency) == 3 && isUpper(v.Currency), "currency", "must be three upper-case letters (ISO 4217)")
	check(v.AmountMinor > 0, "amountMinor", "must be positive")
	check(!v.IssuedAt.IsZero(), "issuedAt", "is required")
	if err := errors.Join(errs...); err != nil {
		return Invoice{}, err
	}
	return v, nil
}

// ID returns the invoice id.
func (Kind) ID(v Invoice) string { return v.InvoiceID }

// ReusedReason names the dead-letter reason of an invoiceId reused.
func (Kind) ReusedReason() string { return ReasonInvoiceIDReused }

// RequestHash returns the hex SHA-256 of a canonical, length-prefixed
// encoding of every field, so that JSON key order, white space and the time
// zone of issuedAt do not change it and no two invoices encode alike.
func (Kind) RequestHash(v Invoice) string {
	b := appendString(nil, "invoice-request/v1")
	b = appendString(b, v.InvoiceID)
	b = appendString(b, v.CustomerID)
	b = appendString(b, v.Currency)
	b = binary.BigEndian.AppendUint64(b, uint64(v.AmountMinor))
	b = appendString(b, v.IssuedAt.UTC().Format(time.RFC3339Nano))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Documents returns the invoice marker and its InvoiceIssued outbox event.
func (Kind) Documents(m idempotent.Message, v Invoice, hash string) ([]idempotent.Document, error) {
	return documents(m, v, hash, nil)
}

// documents returns the invoice marker, holding resp if not nil, and its
// InvoiceIssued outbox event.
func documents(m idempotent.Message, v Invoice, hash string, resp *storedResponse) ([]idempotent.Document, error) {
	marker, err := json.Marshal(document{ID: v.InvoiceID, Type: "invoice", Invoice: v, RequestHash: hash, MessageID: m.ID, Response: resp})
	if err != nil {
		return nil, err
	}
	eventID := EventID(v.InvoiceID)
	event, err := json.Marshal(document{ID: eventID, Type: "event", EventType: "InvoiceIssued", Invoice: v, RequestHash: hash, MessageID: m.ID})
	if err != nil {
		return nil, err
	}
	return []idempotent.Document{{ID: v.InvoiceID, Body: marker}, {ID: eventID, Body: event}}, nil
}

// EventID returns the id of the InvoiceIssued outbox event of an invoice.
func EventID(invoiceID string) string { return "InvoiceIssued:" + invoiceID }

// document is the stored form of the marker and of the event: the invoice's
// fields (invoiceId is the partition key) and the request hash.
type document struct {
	ID        string `json:"id"`
	Type      string `json:"type"` // "invoice" or "event"
	EventType string `json:"eventType,omitempty"`
	Invoice
	RequestHash string `json:"requestHash"`
	MessageID   string `json:"messageId"`
	// Response is the HTTP response of an invoice created by a Handler,
	// replayed to a repeated request.
	Response *storedResponse `json:"response,omitempty"`
}

func appendString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...)
}

// isID reports whether s is 1 to 128 characters safe as a Cosmos DB id and in
// "InvoiceIssued:<id>": no '/', '\', '?', '#' and no ':'.
func isID(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return len(s) > 0 && len(s) <= 128
}

func isUpper(s string) bool {
	for _, c := range []byte(s) {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}
