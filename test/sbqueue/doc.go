// Package sbqueue is an in-process model of Azure Service Bus queues and
// topics with PeekLock semantics, for tests and simulations that must run
// without Azure or Docker. It speaks no protocol: the worker reaches it through Receiver,
// which satisfies the worker's receiver interface, and a protocol front end
// (such as an AMQP test broker) can drive a Queue directly.
//
// The model follows Service Bus where it matters to an idempotent consumer:
//   - A received message is locked for the queue's LockDuration. Completing
//     it removes it; abandoning it or letting the lock expire makes it
//     available again, and its next delivery has DeliveryCount one higher.
//     Releasing it (the AMQP "released" outcome) makes it available again
//     without counting the delivery.
//   - A message delivered MaxDeliveryCount times whose lock then expires or
//     is abandoned moves to the dead-letter queue with reason
//     "MaxDeliveryCountExceeded".
//   - A message whose time-to-live passes while it is available is removed,
//     or dead-lettered with reason "TTLExpiredException" when the queue has
//     DeadLetteringOnMessageExpiration. A locked message expires only once
//     its lock ends.
//   - With RequiresDuplicateDetection, a message whose MessageID was
//     accepted less than DuplicateDetectionWindow ago is accepted and
//     silently dropped, whatever its content.
//   - A scheduled message (Queue.Schedule, Sender.ScheduleMessages, or a
//     send with ScheduledEnqueueTime) waits, unavailable and cancellable
//     (Queue.CancelScheduled), until its scheduled enqueue time; then it is
//     enqueued as if sent at that moment, with a new sequence number.
//     Duplicate detection applies when it is scheduled. Scheduling is
//     modelled on queues, not on topics.
//   - A Topic copies every message sent to it to each of its subscriptions
//     at send time (the default rule; filters are not modelled, see Topic).
//     Each subscription is a Queue, named "<topic>/Subscriptions/<name>",
//     with its own locks, delivery counts, MaxDeliveryCount, time-to-live
//     and dead-letter queue. Duplicate detection is the topic's: a duplicate
//     is dropped before fan-out, so no subscription gets it.
//   - An entity takes only the timings and names Service Bus accepts: a
//     lock duration of 5 s to 5 min, a duplicate-detection window of 20 s
//     to 7 days, a MaxDeliveryCount of 1 to 2000, a subscription name of 1 to 50 letters, digits, '.', '-'
//     and '_' starting and ending with a letter or digit (ErrOutOfRange,
//     and see MinLockDuration). A test at a compressed time scale asks for
//     shorter timings with NamespaceOptions.AllowUnrealisticTimings, whose
//     documentation says why that cannot hide a defect.
//   - A Receiver has the SDK's link credit: the broker sends on credit
//     whether or not a handler waits, a message sent is locked and its
//     delivery counted from that moment, leftover credit stays on the link
//     and what arrives on it between calls is released (see Receiver).
//
// Time comes from a Clock. Every deadline is evaluated lazily against
// Clock.Now on each operation; receivers blocked in Receive or
// ReceiveMessages are woken when a message becomes available or the next
// lock or TTL deadline is reached. RealClock inside a testing/synctest
// bubble runs every deadline on the bubble's virtual time, together with
// the timers of the code under test; with a VirtualClock tests move time
// with VirtualClock.Advance instead.
//
// For a topic: Namespace.CreateTopic, then Topic.CreateSubscription for
// each subscription (it returns the subscription's *Queue); send with
// Topic.Send or Topic.NewSender, receive from a subscription with
// Queue.Receive or Queue.NewReceiver as from any queue. Namespace.Queue
// resolves subscription paths ("order-events/Subscriptions/loyalty", with
// "/$DeadLetterQueue" for the dead-letter queue), case-insensitively.
//
// Namespace, Queue, Topic, Receiver, Sender and VirtualClock are safe for
// concurrent use.
package sbqueue
