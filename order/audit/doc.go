// Package audit checks, on a deployment's stored state, what the
// simulation checks on its model: that every order had exactly one effect.
// It reads the orders container (and the inbox consumers' containers, the
// relay's lease documents and, when one is configured, the payments
// service's ledger) through small interfaces that package cosmosstore (Azure
// Cosmos DB) and package test/memstore (the in-memory model) both
// implement, and reports, per invariant, how many things it checked and the
// ids of the first violations. Command orderctl runs it as "orderctl audit".
//
// # Invariants
//
//   - order-event: every order document has exactly one OrderAccepted event
//     in its partition, id order.EventID(orderId), with the order's request
//     hash; and the order's request hash is the hash of its own stored
//     fields (order.Order.RequestHash).
//   - event-order: every event document has its order document.
//   - payment: every payment record is completed with one payment id, the
//     order's amount, currency, request hash and idempotency key; with
//     Config.Payments, every order with a total older than the claim
//     horizon has one; an order with a total of zero has none.
//   - payment-ledger: with Config.Ledger, the payments service's ledger
//     holds exactly one charge for every completed record, with its payment
//     id, amount and currency. Without a ledger it is reported as not
//     checked.
//   - payment-claim: no payment record has stayed in progress longer than
//     Config.ClaimHorizon (the redelivery horizon: no copy of the message
//     that could complete it can arrive any more).
//   - status: every order's status and version agree with its recorded
//     status hashes: version 1 is "accepted" with none recorded; a later
//     version has a known status, a change time and, when hashes are
//     recorded, the hash of its own status and time under its version, no
//     hash above it, at most order.MaxStatusHashes and statusHashCount
//     equal to their number.
//   - inbox: for every consumer, every event that occurred after the
//     consumer's subscription existed (Consumer.Since), is older than
//     Config.Settle and younger than Consumer.MarkerTTL (less
//     Config.ClockSkew) has the consumer's marker, with the event's request
//     hash, in its order's partition of the consumer's container; and in
//     every such partition the consumer has as many business entries
//     (loyalty entries) as markers written within the TTL, and no more
//     markers than entries among older ones. A marker and its entry are
//     written in one batch with one time (processedAt, awardedAt), and the
//     entry stays when the marker expires by design: an old entry without
//     its marker is no violation.
//   - marker-ttl: every marker of a consumer carries a ttl (-1, or at least
//     Config.MinMarkerRetention seconds) and is not visible after it: a
//     marker still readable more than order.PaymentClockSkew after its
//     processedAt plus its ttl means the container does not expire it
//     (time to live off).
//   - relay-lag: for every relay named in Config.Relays, every feed range
//     of its manifest has a lease, and the feed after the lease's
//     checkpoint holds no event older than Config.MaxRelayLag.
//   - relay-lease: no feed range is held (an unexpired lease with an owner)
//     by two relays of different names, and every lease names its relay
//     and its range.
//
// # What it cannot check
//
// It sees the store, not the broker: it cannot tell an order whose message
// is still being redelivered from one whose message was completed, so the
// payment of an order younger than the claim horizon may be in progress or
// absent. It cannot see two instances of one relay holding one lease at the
// same moment: a lease document names one owner, and the ETag fencing that
// keeps a second from writing leaves no trace. It cannot see whether an
// event or an entry older than the marker TTL had its marker (it expired by
// design), nor an event published before the
// consumer's subscription existed (Consumer.Since is a setting, since
// the subscription's creation time is not in the store).
//
// # Memory and resumption
//
// Run pages through the orders container's change feed (latest version
// mode, from the beginning of every feed range) with Config.PageSize
// documents a page, and holds one page and one order's partition at a time,
// and the ids of up to 10,000 events whose order it has not met yet.
// A document changed during the audit may be checked twice.
//
// # Requests
//
// Per order it sends one query, of the order's partition, and per inbox
// consumer whose container is not the orders container one query of the
// order's partition there; per page of the feed one read, and one more per
// feed range at its end. An event needs no read of its own: its order
// lives in its partition, hence in its feed range, whose scan meets every
// live document once; an event whose order the scan met in its page or the
// page before is checked at once, and another when the scan meets its
// order. Only the events whose order the scan never met by the end of
// their range (or by the time Run stops) cost a point read of the order,
// as do those beyond the 10,000. A healthy store costs about
// 1 + 1/PageSize × (documents per order) requests per order. After every page
// the position is a continuation: Run returns it in Report.Continuation when
// it stops early (Config.MaxPages, or its context ended), and a Run given it
// goes on from there. The relay checks run when the scan completes.
//
// # Concurrency
//
// Run reads only; any number may run concurrently with the workers and
// with each other. Its reads should go at low priority where the account
// supports it (the adapters' business: cosmosstore's client option).
package audit
