package order

// The outbox's shape in the orders container, as an outbox publisher (the
// core's package relay, which cmd/orderrelay runs) needs it: which
// documents are events, the fields it makes a message of, and where its
// lease documents keep their partition key value when they share the
// container (or a leases container partitioned the same way). They are plain
// strings so that this package links no Service Bus SDK; cmd/orderrelay
// copies them into relay.EventFormat and relay.Options.
const (
	// OutboxTypeField is the field that tells an event from the other
	// documents (orders, payment records, inbox markers).
	OutboxTypeField = "type"
	// OutboxTypeValue is OutboxTypeField's value on an event.
	OutboxTypeValue = TypeEvent
	// OutboxIDField holds the event id (EventID), which becomes the
	// message's MessageId.
	OutboxIDField = "id"
	// OutboxSubjectField holds the event type (EventOrderAccepted), which
	// becomes the message's Subject.
	OutboxSubjectField = "eventType"
	// OutboxPartitionKeyField holds the order id, every document's
	// partition key value; the message carries it as an application
	// property of the same name.
	OutboxPartitionKeyField = "orderId"
	// OutboxTimeField holds when the event occurred.
	OutboxTimeField = "occurredAt"
	// OutboxLeasePartitionKeyPath is the partition key path of the orders
	// container and of the leases container the Bicep template creates.
	OutboxLeasePartitionKeyPath = "/" + OutboxPartitionKeyField
)
