// Package relay is the outbox publisher: it reads the change feed of a
// container and sends every outbox event document, written in the same
// transactional batch as the business write it announces, to a Service Bus
// topic, where each subscription's consumer processes it once.
//
// Wire it with the container's change feed, a store for its lease documents,
// a sender on the topic and the shape of the events:
//
//	store, _ := cosmosstore.New(client, "db", "invoices", "/invoiceId")
//	sender, _ := sbClient.NewSender("invoice-events", nil) // duplicate detection on
//	r, err := relay.New(store.ChangeFeed(), store, relay.NewServiceBusSender(sender), relay.Options{
//		Name:                  "invoicerelay", // shared by every instance
//		Events:                relay.EventFormat{PartitionKeyField: "invoiceId"},
//		LeasePartitionKeyPath: "/invoiceId", // the leases share the container
//		Logger:                logger,
//	})
//	if err != nil {
//		return err
//	}
//	return r.Run(ctx) // until ctx ends; then it releases its leases
//
// The events flow so:
//
//	container ──change feed──▶ Relay ──MessageBatch──▶ topic ──▶ subscriptions ──▶ inbox consumers
//	 (write + event, one batch)  │ lease + checkpoint per feed range
//	                             ▼
//	                      lease documents (idempotent.DocumentStore, ETag-guarded)
//
// # Delivery contract
//
// At least once, never lost. Each message has MessageId = the event id,
// Subject = the event's subject field and the event document, without
// Cosmos DB's system properties, as its JSON body. The relay publishes a
// page of changes before it checkpoints the page's continuation, so a crash
// between the two republishes what was published since the last checkpoint
// and loses nothing. A republish
// inside the topic's duplicate-detection window (MessageId = the event id)
// is dropped by Service Bus (detection applies at the topic, before the
// fan-out); a later one reaches the subscribers again, whose inbox markers
// (a per-consumer marker keyed by the MessageId, written with the
// consumer's business write) make it a duplicate. Documents that are not
// events (the business documents, inbox markers, the relay's own lease
// documents) are skipped and counted in Stats.Skipped. An event the relay
// cannot publish at all (no id, an id over [MaxMessageIDLength] characters,
// no subject, a message larger than the topic accepts) is logged at error
// and counted in [Stats].Unpublishable, not retried for ever: no retry could
// send it.
//
// Nothing depends on the order of the feed across partition keys, which
// Cosmos DB does not promise: the events of one partition key value are
// published in the order the feed returns them (Cosmos DB orders the
// changes of one partition key value), events of different values in any
// order.
//
// # Leases and checkpoints
//
// Each feed range has a lease document, id [LeaseID](name, range), that
// records its owner, when the ownership expires and the continuation up to
// which the range was published. A relay instance acquires a range whose
// lease is free or expired with a create or an ETag-conditioned replace,
// renews it every LeaseDuration/3, checkpoints with an ETag-conditioned
// replace and releases it at shutdown. Of two instances only one write on
// an ETag succeeds, so two instances never both hold a range's lease: a
// stale owner (one that paused past its expiry while another reclaimed the
// lease) has its next renewal or checkpoint rejected with 412 and drops the
// range; what it published meanwhile is a duplicate, which the topic and
// the inboxes absorb. The clock only decides when a lease may be reclaimed;
// the ETag, not the clock, fences the checkpoint. A store that ignores
// If-Match (cosmium) cannot fence: the relay logs that once and runs, which
// is safe only with a single instance.
//
// The list of feed ranges is fixed the first time a relay of a given name
// runs, in a manifest document ([ManifestID](name)), and never read again:
// after a partition split Cosmos DB serves a parent feed range's changes
// through the SDK's continuation of its children, so the same leases keep
// covering the container, where re-reading the ranges would start new
// leases from the beginning and republish everything.
//
// # Which documents are events
//
// An [EventFormat] names, by exact top-level field names, the field and value
// that mark a document as an event and the fields of its id, its subject,
// its partition key value and its time. Its zero value reads a generic
// shape ({"id", "type": "event", "eventType", "occurredAt"}), so a domain
// that writes that shape sets nothing, and one whose documents use other
// names passes them (see the EventFormat example). The seam is a
// description, not a function from document to message, because the
// relay's guarantees hang on what it derives: MessageId = the event id,
// which duplicate detection and the inbox markers key on, a body without
// the store's system properties, and the accounting of what it skips or
// cannot publish. Kept in the relay, those rules are written and tested
// once; a user states field names and cannot break them.
//
// # Where the lease documents live
//
// In any idempotent.DocumentStore: a leases container of their own (so that
// the relay only reads the events' container, and no lease write appears in
// the feed it reads), or the events' container itself (emulators, one
// identity). A lease document's partition key value is its id,
// "lease:<name>:<range>"; [Options].LeasePartitionKeyPath names the field
// that carries it: /id by default, the path of a leases container of the
// relay's own, or the shared container's path, such as /invoiceId. The id
// contains ':', so in a shared container a lease never falls in a business
// partition as long as the business partition key values refuse ':': a
// consumer that reads only by its own keys never sees a lease. Lease writes
// in a shared container appear in its change feed; the relay skips them,
// and it writes a lease only to save progress (after pages that held
// events), to renew or to release, so its own writes never keep it busy.
//
// # Checkpoints
//
// A checkpoint is a lease write, a conditional replace that costs request
// units, so the relay does not write one per page: it checkpoints a range
// once events were published there and [Options].CheckpointInterval (1 s
// by default) has passed since the range's last checkpoint, at the poll
// that published them or at the first poll after the interval. The first
// events after a quiet spell are checkpointed at once; a steady trickle
// costs one checkpoint per interval, however many polls it takes (0.03 per
// event at 33 events/s, where a checkpoint per page cost 0.5 and more).
// Never before the publish: a page's continuation is saved only once the
// topic accepted every event of it. A lease renewal saves the published
// continuation too, and so does the release at shutdown (each write bounded
// by CallTimeout), so a relay that stops cleanly republishes nothing. A
// crash, or a lease lost to another instance, republishes what was
// published since the last checkpoint: about CheckpointInterval +
// PollInterval of events at most, which duplicate detection and the inbox
// markers absorb.
//
// # Polling
//
// Run polls every feed range it holds, one page each, and polls again at
// once while a poll returns a full page. After a poll that published events
// it waits PollInterval/32, and so after the next three polls that find
// nothing; from the fourth in a row it waits twice as long as the last
// time, up to PollInterval, which it keeps while the feed stays idle (with
// the default: 31.25 ms four times, then 62.5 ms, 125 ms, …, 1 s). It
// starts with that backoff, so the events of its first second wait no full
// PollInterval;
// its own lease writes publish no events, so an idle relay reads each range
// once per PollInterval, as one that always waits PollInterval does; a
// failed poll waits as an empty one, so that a page that keeps failing
// half-sent is not republished in a loop. Under a trickle it reads about
// once per PollInterval/32 (0.92 reads per event at 33 events/s with the
// default interval, where polling again at once after each publish took
// 1.2) and an event reaches the topic within the first wait of its write,
// unless the feed was quiet for four polls before it; the first event
// after an idle spell of about 2 s or more waits up to PollInterval. BenchmarkOutboxLatency measures the
// rule beside the fixed interval of earlier versions, and
// TestRun_CheckpointsPerEventAtThirtyThreeOrdersASecond counts the reads
// and lease writes.
//
// # Concurrency
//
// A Relay is driven by one goroutine: Run, or a caller's Step calls, never
// both, never concurrently. Any number of Relay values, in one process or
// many, may share a feed, a lease store and a topic.
package relay
