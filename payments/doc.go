// Package payments is the order worker's downstream payments API: a reference
// payment service that deduplicates on the Idempotency-Key HTTP header, and
// the client the worker captures payments with.
//
// A payment capture is a side effect that cannot join the Cosmos DB
// transaction that accepts an order. The worker makes it safe to repeat by
// passing the same idempotency key, [KeyFor] the order id, on every attempt
// and every redelivery; the service guarantees that one key charges at most
// once.
//
// # Wire contract
//
//	POST /payments
//	Idempotency-Key: capture:ord-000123
//	Content-Type: application/json
//
//	{"orderId": "ord-000123", "amountMinor": 3998, "currency": "EUR"}
//
// The first request with a key charges and answers 201 Created with the
// payment:
//
//	{"paymentId": "pay_00000001", "orderId": "ord-000123", "amountMinor": 3998,
//	 "currency": "EUR", "status": "captured", "capturedAt": "2026-11-30T10:00:00Z"}
//
// Errors are RFC 9457 problem documents (Content-Type application/problem+json,
// see [Problem]). GET /payments/{paymentId} returns a stored payment and
// GET /healthz reports that the service's own process is up.
//
//	POST /payments/probe
//
// asks whether a capture would go through now. The service makes the call a
// capture makes to its acquirer, as a zero-amount verification (the account
// verification that real acquirers offer, which this call stands for), and
// charges nothing, records nothing and claims no idempotency key: the request
// has no Idempotency-Key (one sent is ignored) and no body (one sent is 400).
// It answers 204 No Content when captures go through, and what a capture
// would get when they would not: 503 (or the status of the failure) with a
// problem document, and Retry-After if the outage sets one. Unlike
// GET /healthz, it fails during an outage of the acquirer behind a running
// service. [Client.Ping], a circuit breaker's probe, sends it. The route is
// POST only: GET /payments/probe would read a payment of id "probe".
//
// GET /payments?orderId=ord-000123 lists every payment the service's ledger
// holds for the order, oldest first ([PaymentList]); an empty list means no
// charge for it ever happened. The ledger is never forgotten, unlike the
// idempotency keys, so the lookup tells the outcome of a capture long after
// its key expired:
//
//	{"orderId": "ord-000123", "payments": [{"paymentId": "pay_00000001", ...}]}
//
// # Idempotency semantics
//
// The service follows the IETF HTTPAPI draft "The Idempotency-Key HTTP Header
// Field": a key identifies one request, and the request's payload (order id,
// amount and currency) is its fingerprint.
//
//   - The first request with a key is processed: it charges once and its
//     response is stored under the key.
//   - A retry with the same key and the same payload is not processed again:
//     it gets the stored status code and body, byte for byte, with the header
//     Idempotent-Replayed: true. No new charge.
//   - The same key with a different payload is 422 Unprocessable Content, and
//     nothing is charged: a key can never be reused for another request.
//   - A request that arrives while the first request with its key is still
//     being processed is 409 Conflict (with Retry-After: 1); it neither waits
//     nor charges. Two concurrent first requests therefore charge once.
//   - A missing or malformed key is 400 Bad Request, and so is an invalid body.
//
// Only a completed charge is stored. A request rejected as invalid, or one that
// failed before charging (a 5xx or 429), leaves the key free, so the next
// request with it is processed as a first request.
//
// A key is remembered for a retention period after its charge (30 days by
// default at the reference service, the upper end of what payment providers
// keep: 24 hours to 30 days), measured on the service's clock, then forgotten: a request with an
// expired key is a new request and charges again. A consumer that may retry
// a capture later than the retention must therefore look the payment up
// instead of repeating it. The order worker does: it records when it first
// sent the key, assumes a retention no longer than the service's
// (order.PaymentOptions.KeyRetention: 24 hours unless configured, the
// shortest that providers commonly keep), and resolves a claim older than that
// (minus a safety margin) with [Client.Lookup], never with a blind retry.
// A retention above the consumer's redelivery horizon (the longest time from
// a capture's first attempt to its last possible retry: the broker's
// delivery attempts, the client's retries, and the time an operator may take
// to resubmit a dead-lettered message) saves those lookups; it is not what
// keeps a late retry from charging twice.
//
// This service keeps its keys and payments in memory, so a restart forgets
// them; a real payment provider persists them. Its keys expire exactly on
// time (a key is new again the instant its retention has passed): a model
// that remembered keys longer than a provider would hide a double charge. It stands in for one in tests,
// in the fault-injection simulation and as the standalone command
// test/paymentservice/cmd/paymentservice.
//
// # Client
//
// [Client.Capture] sends one capture with a per-attempt timeout and retries
// with exponential backoff and full jitter, only where a retry can help: 5xx,
// 429 (honouring Retry-After), timeouts and connection errors. It sends the
// same key on every attempt, so a retry after a lost response, or after a
// timeout that fired once the charge had happened, is answered from the
// service's store instead of charging twice. It never retries another 4xx.
// [Client.Lookup] reads the ledger with the same timeouts and retries.
// [Client.Ping] sends one POST /payments/probe, never retried: it sees what
// fails every capture (the service down, an acquirer outage), not what fails
// one (a declined card, one merchant's account).
// Errors match the sentinels [ErrKeyReused], [ErrInProgress], [ErrRejected]
// and [ErrUnavailable] with errors.Is, and [IsTransient] tells the worker
// whether to try again later (abandon the message) or give up (dead-letter it).
package payments
