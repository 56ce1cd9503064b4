// Package order is the example domain built on package idempotent, the
// pattern itself: the order message and its wire contract, validation, the
// request hash, the documents an accepted order writes, and the processing
// decision that turns one delivery of a message into exactly one outcome,
// with what an order needs beyond the create: status changes applied in
// version order, a payment captured exactly once through in-progress and
// completed records, and inbox consumers of the OrderAccepted event.
//
// An order placement runs the core: [Processor.Process] hands it to an
// idempotent.Consumer whose Kind is the order's schema, validation, hash
// and documents (process.go), with the payment as its idempotent.Effect
// (payment_capture.go adapts the [PaymentGateway] onto the core's
// Downstream) and the core's FactCache and CopyShare (lookup.go). The
// package makes no store write or conflict decision of its own for a
// placement; status changes and inbox consumers are the pieces of
// status.go and inbox.go.
//
// The package has no Azure imports. It talks to storage through the core's
// port ([idempotent.Store], [idempotent.DocumentStore]); storage adapters (package cosmosstore for
// Azure Cosmos DB, package test/memstore for the in-memory model) translate
// their status codes into the sentinel errors [idempotent.ErrAlreadyExists],
// [idempotent.ErrNotFound] and [idempotent.ErrTransient].
//
// # Wire contract
//
// An order message is a JSON object (Content-Type application/json, at most
// [MaxBodySize] bytes) whose field names are the contract between producer and
// worker:
//
//	{
//	  "orderId":    "ord-000123",          // required; equals the Service Bus MessageId; see ValidateOrderID
//	  "customerId": "cust-42",             // required
//	  "currency":   "EUR",                 // required; ISO 4217, three upper-case letters
//	  "lines": [                           // required; 1 to MaxLines lines, in invoice order
//	    {"sku": "SKU-1", "quantity": 2, "unitPriceMinor": 1999}
//	  ],
//	  "totalMinor": 3998,                  // required; the sum of quantity*unitPriceMinor
//	  "placedAt":   "2026-11-30T10:00:00Z",// required; when the customer placed the order
//	  "sentAt":     "2026-11-30T10:00:01Z",// optional metadata, not part of the request hash
//	  "traceId":    "4bf92f3577b34da6"     // optional metadata, not part of the request hash
//	}
//
// Amounts are integers in the currency's minor unit (cents), never floats,
// and at most [MaxSafeInteger] (2^53-1), like every integer the worker
// stores: the store's JavaScript readers would round a larger one.
// Unknown fields are rejected: a field the worker does not know could be a
// business field the request hash would not cover. So are a repeated key and
// a key spelled other than its field ("OrderId"): encoding/json would take
// the last one, or match it case-insensitively, where another JSON reader
// may take the first or ignore it, and see another order in the same bytes.
// A body in the plain form the project's producers send (every key exactly
// a field's name and at most once, strings of printable ASCII without
// escapes, integers as plain digits) is decoded and its keys checked in one
// pass; any other body is decoded by encoding/json and its keys checked
// after, which names what is wrong. Both accept the same bodies, with the
// same order.
//
// # What an accepted order writes
//
// One accepted order writes two documents ([Write.Documents]), which the
// core's [idempotent.Consumer] creates in one transactional batch under the
// partition key value orderId:
//
//   - the order document (id = orderId), which is also the idempotency marker:
//     it carries the request hash, the MessageId that created it and when it was
//     processed;
//   - an OrderAccepted outbox event (id = "OrderAccepted:" + orderId) that
//     downstream readers (fulfilment, billing, e-mail) consume from the Cosmos DB
//     change feed. Writing the event in the same batch as the order means the
//     event exists if and only if the order does: no dual write, no lost or
//     phantom event.
//
// Because both ids are derived from the order id, a second attempt to write the
// same order conflicts on the order document, and the batch fails as a whole.
// With a payment step, the core effect adds the payment record's first claim
// to the batch and takes its ETag from the batch's response, so the capture
// needs no write of its own before it calls the payments service.
//
// # Round trips
//
// The decision costs the fewest store calls its correctness allows: a new
// order one (the batch; with a payment step two, the batch and the completed
// mark, and one payments call). A redelivery (DeliveryCount above 1) is most
// likely a duplicate, so it reads first (the order, or with a payment step
// the payment record, which carries the request hash and the payment's
// state) and creates only if nothing is there: one call for a duplicate. A
// first delivery reads first too while most first deliveries turn out to be
// copies (see [WithAdaptiveReadFirst] and [Processor.CopyShare]). A
// bounded cache of facts the store confirmed (see [WithFactCache]) answers a
// duplicate or a reused id it knows with none. The create stays the arbiter
// of every race. A status change applies through the core's versioned
// state ([idempotent.Versioned]), in one conditional patch on its first
// delivery (see [idempotent.Patcher]); an inbox consumer records what it
// processed through the core's inbox ([idempotent.Inbox]).
//
// # Idempotency contract
//
// [Processor.Process] may be called any number of times, concurrently, for
// deliveries of the same message; the store's atomic create makes at most
// one call return [idempotent.Created] and every other call with the same
// content return [idempotent.Duplicate] or [idempotent.Transient]. After an
// ambiguous write (a create that committed but reported a failure) every
// delivery returns Duplicate or Transient, and the payment is still
// captured once. A duplicate never changes a stored document (the payment
// step of a duplicate may claim or complete the order's payment record).
package order
