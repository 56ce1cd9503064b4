// Package relay publishes the transactional outbox: it reads the change feed
// of the orders container and sends every outbox event document (type
// "event", such as the OrderAccepted event that idempotent.Store.CreateOrder
// writes in the same transactional batch as its order) to a Service Bus
// topic, where each subscription's inbox consumer processes it once.
//
//	orders container ──change feed──▶ Relay ──MessageBatch──▶ topic ──▶ subscriptions ──▶ inbox consumers
//	 (order + event, one batch)        │ lease + checkpoint per feed range
//	                                   ▼
//	                            lease documents (idempotent.DocumentStore, ETag-guarded)
//
// # Delivery contract
//
// At least once, never lost. Each message has MessageId = the event id
// (order.EventID), Subject = the event type and the event document, without
// Cosmos DB's system properties, as its JSON body. The relay publishes a page
// of changes before it checkpoints the page's continuation, so a crash
// between the two republishes the page and loses nothing. A republish inside
// the topic's duplicate-detection window is dropped by Service Bus (detection
// applies at the topic, before the fan-out); a later one reaches the
// subscribers again, whose inbox markers (order.InboxConsumer) make it a
// duplicate. Documents that are not events (orders, payment records, inbox
// markers, the relay's own lease documents) are skipped. An event the relay
// cannot publish at all (no id, an id over 128 characters, no event type, a
// message larger than the topic accepts) is logged at error and counted in
// Stats.Unpublishable, not retried for ever: no retry could send it.
//
// Nothing depends on the order of the feed across partition keys, which
// Cosmos DB does not promise: events of one order are published in the
// order the feed returns them (Cosmos DB orders the changes of one partition
// key value), events of different orders in any order.
//
// # Leases and checkpoints
//
// Each feed range has a lease document, id LeaseID(name, range), that
// records its owner, when the ownership expires and the continuation up to
// which the range was published. A relay instance acquires a range whose
// lease is free or expired with a create or an ETag-conditioned replace,
// renews it every LeaseDuration/3, checkpoints with an ETag-conditioned
// replace and releases it at shutdown. Of two instances only one write on
// an ETag succeeds, so two instances never both hold a range's lease: a
// stale owner (one that paused past its expiry while another took over)
// has its next renewal or checkpoint rejected with 412 and drops the range;
// what it published meanwhile is a duplicate, which the topic and the
// inboxes absorb. The clock only decides when a lease may be taken over; the
// ETag, not the clock, fences the checkpoint. A store that ignores If-Match
// (cosmium) cannot fence: the relay logs that once and runs, which is safe
// only with a single instance.
//
// The list of feed ranges is fixed the first time a relay of a given name
// runs, in a manifest document (ManifestID(name)), and never read again:
// after a partition split Cosmos DB serves a parent feed range's changes
// through the SDK's continuation of its children, so the same leases keep
// covering the container, where re-reading the ranges would start new
// leases from the beginning and republish everything.
//
// # Where the lease documents live
//
// In any idempotent.DocumentStore. cmd/orderrelay keeps them in the
// container COSMOS_LEASES_CONTAINER names (in Azure a leases container of
// their own, so that the relay only reads the orders container), or, when
// that is empty (emulators), in the orders container itself. A lease
// document's partition key
// value is its id, "lease:<name>:<range>", which contains ':' and so is never
// an order id (order.ValidateOrderID refuses ':'): no order's partition
// holds a lease, and the worker, which reads only by order id, never sees
// one. Lease writes appear in the change feed of the container; the relay
// skips them, and it writes a lease only to publish progress (after a page
// that held events), to renew or to release, so its own writes never keep it
// busy. A separate leases container, as Cosmos DB's change feed processor
// uses, works the same: pass a store on it (no lease write then appears in
// the feed the relay reads).
//
// # Polling
//
// Run polls every feed range it holds, one page each, and polls again at
// once while a poll returns a full page or publishes events without an
// error. After a poll that does neither it waits PollInterval/32, then
// twice as long after each further such poll, up to PollInterval, which it
// keeps while the feed stays idle (31.25 ms, 62.5 ms, …, 1 s with the
// default). It starts idle, and its own lease writes publish no events, so
// an idle relay reads each range once per PollInterval, as one that always
// waits PollInterval does; a failed poll waits too, so that a page that
// keeps failing half-sent is not republished in a loop. Under load it
// reads more often (about 40 reads per second per range at 33 events/s
// with the default interval, against 1 to 2 when it always waited) and an
// event reaches the topic within one or two backoff steps of its write;
// the first event after an idle spell of about 2 s or more waits up to
// PollInterval. BenchmarkOutboxLatency measures both rules side by side.
//
// # Concurrency
//
// A Relay is driven by one goroutine: Run, or a caller's Step calls, never
// both, never concurrently. Any number of Relay values, in one process or
// many, may share a feed, a lease store and a topic.
package relay
