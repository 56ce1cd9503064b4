// Package invoice is the Idempotent Consumer pattern applied to a second,
// small domain: an invoice is created once and mailed to its customer once,
// whether it arrives as a Service Bus message or as an HTTP request, on the
// same core (package idempotent) and the same store. It imports nothing of
// the project but the core, and the core knows nothing of it. It is an
// example to read and to copy as the start of your own message type.
//
// On a queue, the consumer is a worker.Handler as it is:
//
//	mail := invoice.NewMailEffect(store, invoice.MailOptions{
//		Mailer: mailClient, Lease: lockDuration, Owner: hostname})
//	consumer := invoice.NewConsumer(store, idempotent.WithEffect(mail))
//	// worker.New(receiver, consumer, logger, options) runs it.
//
// Over HTTP, on the same store and mail:
//
//	h, err := invoice.NewHandler(store, invoice.HandlerOptions{Mail: mail, Timeout: 10 * time.Second})
//	mux.Handle("POST /invoices", h)
//
// store is cosmosstore.New(client, database, container, PartitionKeyPath), a
// store on a container whose partition key path is [PartitionKeyPath] (or
// test/memstore's model of one, in tests);
// mailClient is your mail service's client as a [Mailer]. Without the mail,
// NewConsumer(store) is create-once alone.
//
// # The message
//
// An invoice message is a JSON object whose MessageId is its invoiceId:
//
//	{"invoiceId": "inv-1", "customerId": "cust-42", "currency": "EUR",
//	 "amountMinor": 1999, "issuedAt": "2026-11-30T10:00:00Z"}
//
// An accepted invoice writes, in one transactional batch under partition
// key value invoiceId, the invoice marker (its id is the invoice id; it
// records the request hash), the "InvoiceIssued:<invoiceId>" outbox event
// and, with the mail, the mail's first claim. A redelivery is a Duplicate;
// the same invoiceId with other content is a Mismatch dead-lettered as
// "InvoiceIdReused".
//
// # Create-once and effect-once
//
// The mail is an idempotent.Effect ([NewMailEffect]): its record
// "InvoiceMail:<invoiceId>" is claimed in the create's batch, the
// [Mailer] is called with the idempotency key "InvoiceMail:<invoiceId>",
// stable per invoice, and the record is marked completed with the mail's
// id. A delivery that finds the mail not done (the mail service failed, or
// the process ended between the call and the completed record) resumes it
// with the same key, so the mail service, which deduplicates on the key,
// sends one mail per invoice whatever is redelivered. The example makes no
// store write or conflict decision of its own: the Kind says what an
// invoice is, writes and asks for, the core decides.
//
// # The HTTP endpoint
//
// [Handler] follows the IETF draft "The Idempotency-Key HTTP Header Field"
// (draft-ietf-httpapi-idempotency-key-header, HTTPAPI working group): the
// key is required (400 without it), a repeated request is answered with the
// stored response (marked Idempotent-Replayed: true), the key reused for
// another body is a 422, a request whose key is in progress a 409 with
// Retry-After. The key is the invoiceId, as the MessageId is on the
// queue, so that both inputs converge on one invoice and one mail: a key
// of its own per request would let two keys create one invoice twice. The
// response is stored in the marker, written in the create's batch, so that
// it exists exactly when the invoice does.
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
