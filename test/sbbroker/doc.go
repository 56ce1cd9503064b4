// Package sbbroker is an Azure Service Bus test broker: it serves the
// Service Bus dialect of AMQP 1.0 on a loopback TCP address so that the
// unmodified azservicebus client (v1.11.0) talks to it with an emulator
// connection string
//
//	Endpoint=sb://127.0.0.1:PORT;SharedAccessKeyName=…;SharedAccessKey=…;UseDevelopmentEmulator=true;
//
// without Docker or Azure. Queues, topics and their subscriptions, locks,
// delivery counts, dead-lettering, time-to-live and duplicate detection come
// from the in-process queue model (test/sbqueue); this package is the
// AMQP front end to it, and tests inspect the same sbqueue.Namespace to
// assert what happened.
//
// # What it implements
//
//   - AMQP 1.0 framing with the broker's own codec (internal/wire): protocol
//     headers, SASL ANONYMOUS, open/begin/attach/flow/transfer/disposition/
//     detach/end/close, multi-frame transfers in both directions (65536-byte
//     frames), session windows, link credit, empty frames as heartbeats and
//     an idle time-out. Malformed frames close the connection with
//     amqp:connection:framing-error; sizes are bounded before allocation.
//   - $cbs put-token: SAS tokens are verified (key name, HMAC-SHA256
//     signature, expiry, audience); a bad token gets 401 (the SDK's
//     CodeUnauthorizedAccess), a token for an entity that does not exist
//     (queue, topic, subscription or dead-letter queue) 404 (CodeNotFound),
//     a good one 202.
//   - Addresses as Service Bus resolves them, case-insensitively: a queue
//     "<queue>" and "<queue>/$DeadLetterQueue"; a topic "<topic>", which is
//     sent to; its subscriptions "<topic>/Subscriptions/<sub>" and
//     "<topic>/Subscriptions/<sub>/$DeadLetterQueue", which are received
//     from, settled and managed like queues (Client.NewSender(topic),
//     Client.NewReceiverForSubscription(topic, sub, …), SubQueueDeadLetter).
//     A receive link on a topic, and a send link to a subscription or any
//     dead-letter queue, are refused with amqp:not-allowed (the SDK returns
//     it unmapped, as a fatal link error): Service Bus refuses both, but its
//     exact condition is not documented, and amqp:not-allowed is what it
//     uses for a link on the wrong kind of entity. Either way the SDK fails
//     the call at once without retrying.
//   - Sending: single messages and batches (format 0x80013700, one inner
//     message per data section), settled with accepted; a message sent to a
//     topic is copied to every subscription (see sbqueue.Topic). Duplicates
//     dropped by duplicate detection are accepted too, as Service Bus does
//     (a topic's are dropped at the topic, before fan-out), but each drop is
//     logged (queue or topic, message_id, window) and counted (Dropped); the
//     link announces a 256 KiB max-message-size (Options.MaxMessageSize). A
//     MessageId over 128 UTF-16 code units (MaxMessageIDLength) rejects the send,
//     for a batch the whole batch, with com.microsoft:argument-out-of-range.
//     Service Bus refuses such ids; the exact condition it uses is not
//     documented, and the SDK maps neither it nor this one, so it retries
//     and then returns the error to the sender either way.
//   - PeekLock receiving, driven by link credit: 16-byte lock tokens as
//     delivery tags in .NET Guid byte order; x-opt-locked-until,
//     x-opt-sequence-number, x-opt-enqueued-time (and x-opt-partition-key,
//     x-opt-deadletter-source when set) annotations; header delivery-count;
//     header ttl; DeadLetterReason and DeadLetterErrorDescription application
//     properties on dead letters. Receive-and-delete links get settled
//     transfers and the message is completed on sending.
//   - Settlement on the link: accepted completes, modified abandons (merging
//     its message-annotations into the application properties), rejected
//     with com.microsoft:dead-letter dead-letters with the reason and
//     description from its info, released unlocks without counting the
//     delivery. Acknowledgements echo the outcome, except that a
//     dead-letter is acknowledged as rejected without an error; a lost lock
//     is rejected with com.microsoft:message-lock-lost (CodeLockLost).
//     Settlements for a link the broker has detached are ignored, as the
//     SDK then settles through $management.
//   - $management: com.microsoft:renew-lock (200 with expirations, 410 for a
//     lost lock), com.microsoft:update-disposition (completed, abandoned,
//     suspended; 410 for a lost lock), com.microsoft:peek-message, and, on
//     a queue, com.microsoft:schedule-message and
//     com.microsoft:cancel-scheduled-message (the SDK's ScheduleMessages
//     and CancelScheduledMessages): a scheduled message waits in the queue
//     model until its x-opt-scheduled-enqueue-time and is then enqueued
//     with a new sequence number, delivered with that annotation (the SDK's
//     ScheduledEnqueueTime); duplicate detection applies at scheduling, a
//     dropped duplicate logged and counted like a dropped send (see
//     sbqueue.Queue.Schedule); cancelling a number that names no waiting
//     message answers 404. A
//     reply larger than one frame goes out as a multi-frame transfer, as
//     from Service Bus. Every operation works on a queue, a subscription
//     and either's dead-letter queue (addressed as above). On a topic's own
//     $management link, which the SDK's sender opens, renew-lock,
//     update-disposition and peek-message answer 400 (a topic holds no
//     messages; Service Bus's status here is not documented) and the
//     scheduling operations 501.
//   - Fault controls for tests: DropConnections, DetachReceivers (detach with
//     amqp:link:detach-forced), ExpireLocks, DelayDispositions and
//     LoseDispositions.
//
// # What it does not implement
//
// Subscription rules and filters (every subscription has the default rule
// and gets every message; the rule management operations answer 501),
// auto-forwarding, sessions (session-enabled queues and session receivers),
// scheduling by the send path (a sent message with a scheduled enqueue time
// is rejected with amqp:not-allowed: schedule with the management
// operations) and on topics (their schedule-message and
// cancel-scheduled-message answer 501), deferral (rejected with
// amqp:not-allowed; receive-by-sequence-number answers 501), transactions,
// the management operations for rules and sessions, drain-mode credit,
// Entra ID (JWT) tokens (put-token answers 401), TLS and WebSockets,
// throttling (server-busy), and entity administration over HTTP (the
// admin.Client). Queues, topics and subscriptions, and their properties,
// are fixed when the namespace is created.
// Locks survive link detaches and dropped connections, as in Service Bus;
// no state survives the process.
//
// A Broker is safe for concurrent use; every method may be called while it
// serves connections.
package sbbroker
