package capacity

// Kind is the kind of one Cosmos DB request.
type Kind string

// The kinds of request the worker, the inbox consumers and the relay send.
const (
	Read         Kind = "point read"
	ReadMiss     Kind = "point read, not found"
	Batch        Kind = "transactional batch of creates"
	BatchRefused Kind = "transactional batch refused (409)"
	Replace      Kind = "conditional replace"
	Patch        Kind = "conditional patch"
	PatchRefused Kind = "conditional patch refused (412 or 404)"
	FeedRead     Kind = "change-feed read"
)

// Request is one Cosmos DB round trip: its kind and the documents it
// creates (a batch), returns (a feed read) or touches (1 otherwise).
type Request struct {
	Kind Kind   `json:"kind"`
	Docs int    `json:"docs"`
	What string `json:"what"`
}

// RU is the request's charge by the figures of Figures: a batch is the sum
// of its creates, a refused write is charged as the write it attempted, a
// feed read one point read per document and at least one.
func (r Request) RU() float64 {
	n := float64(max(r.Docs, 1))
	switch r.Kind {
	case Read, ReadMiss:
		return PointReadRU
	case Batch, BatchRefused:
		return InsertRU * n
	case Replace, Patch, PatchRefused:
		return ReplaceRU
	case FeedRead:
		return PointReadRU * n
	}
	return 0
}

// PathID names one path of a message through the processor or an inbox
// consumer.
type PathID string

// The paths. Their requests are what order.Processor and order.InboxConsumer
// send (test/bench TestRoundTripsPerPath and order TestInboxConsumer_RoundTrips
// count them, and fail when a path here disagrees).
const (
	OrderNew             PathID = "order-new"               // create first: one batch, the order and its OrderAccepted event
	OrderNewReadFirst    PathID = "order-new-read-first"    // adaptive read-first: the read that misses, then the batch
	OrderCopy            PathID = "order-copy"              // a copy another worker stored: the refused batch, then a read
	OrderCopyReadFirst   PathID = "order-copy-read-first"   // a copy under adaptive read-first: the read
	OrderRedelivery      PathID = "order-redelivery"        // a redelivery reads first: the read
	OrderCopyCached      PathID = "order-copy-cached"       // a copy this worker stored: the fact cache answers, no request
	OrderMismatch        PathID = "order-mismatch"          // the id reused with another body: the refused batch, then a read
	OrderInvalid         PathID = "order-invalid"           // malformed: no request
	PaymentNew           PathID = "payment-new"             // the batch with the in-progress claim, the capture, then the completed mark
	PaymentNewReadFirst  PathID = "payment-new-read-first"  // adaptive read-first with payments: the read that misses, then PaymentNew's (composed, not measured)
	PaymentCopy          PathID = "payment-copy"            // a copy of a paid order: the refused batch, then a read
	StatusApplied        PathID = "status-applied"          // a newer status: one conditional patch
	StatusStaleRedeliver PathID = "status-stale-redelivery" // a redelivered status change: the read
	StatusStaleFirst     PathID = "status-stale-first"      // an old status change on its first delivery: the refused patch, then a read
	StatusBeforeOrder    PathID = "status-before-order"     // before its order: the patch finds nothing (retried later)
	InboxNew             PathID = "inbox-new"               // a new event: one batch, the marker and the subscriber's entry
	InboxRedelivery      PathID = "inbox-redelivery"        // a redelivered event: the read of its marker
	InboxCopy            PathID = "inbox-copy"              // a republished event on its first delivery: the refused batch, then a read
)

// The relay's requests, which depend on the rate (how many changes a read
// returns, how often it checkpoints): estimated by Compute, not paths the
// tests count, and not in Paths.
const (
	RelayFeed  PathID = "relay-feed"  // a change-feed read of a page
	RelayLease PathID = "relay-lease" // a checkpoint or a renewal: a conditional replace of the lease
)

// Path is one path and the Cosmos DB requests it sends, in order.
type Path struct {
	ID       PathID    `json:"id"`
	Requests []Request `json:"requests"`
}

// RoundTrips is the number of Cosmos DB requests of the path.
func (p Path) RoundTrips() int { return len(p.Requests) }

// RU is the sum of the path's request charges.
func (p Path) RU() float64 {
	var s float64
	for _, r := range p.Requests {
		s += r.RU()
	}
	return s
}

var (
	orderBatch    = Request{Batch, 2, "create the order and its OrderAccepted event"}
	paidBatch     = Request{Batch, 3, "create the order, its event and the in-progress payment claim"}
	orderRefused  = Request{BatchRefused, 2, "the order's batch, refused: the order exists"}
	paidRefused   = Request{BatchRefused, 3, "the order's batch with its claim, refused: the order exists"}
	readOrder     = Request{Read, 1, "read the stored order"}
	missOrder     = Request{ReadMiss, 1, "read the order: not there yet"}
	completedMark = Request{Replace, 1, "mark the payment completed (ETag from the batch)"}
	statusPatch   = Request{Patch, 1, "patch status, version and status hash if the version is older"}
	statusRefused = Request{PatchRefused, 1, "the status patch, refused"}
	inboxBatch    = Request{Batch, 2, "create the inbox marker and the subscriber's entry"}
	inboxRefused  = Request{BatchRefused, 2, "the marker's batch, refused: the marker exists"}
	readMarker    = Request{Read, 1, "read the inbox marker"}
)

var paths = map[PathID][]Request{
	OrderNew:             {orderBatch},
	OrderNewReadFirst:    {missOrder, orderBatch},
	OrderCopy:            {orderRefused, readOrder},
	OrderCopyReadFirst:   {readOrder},
	OrderRedelivery:      {readOrder},
	OrderCopyCached:      nil,
	OrderMismatch:        {orderRefused, readOrder},
	OrderInvalid:         nil,
	PaymentNew:           {paidBatch, completedMark},
	PaymentNewReadFirst:  {missOrder, paidBatch, completedMark},
	PaymentCopy:          {paidRefused, readOrder},
	StatusApplied:        {statusPatch},
	StatusStaleRedeliver: {readOrder},
	StatusStaleFirst:     {statusRefused, readOrder},
	StatusBeforeOrder:    {statusRefused},
	InboxNew:             {inboxBatch},
	InboxRedelivery:      {readMarker},
	InboxCopy:            {inboxRefused, readMarker},
}

// PathOf returns path id's requests; ok is false for an unknown id.
func PathOf(id PathID) (p Path, ok bool) {
	r, ok := paths[id]
	return Path{ID: id, Requests: r}, ok
}

// Paths returns every path, in the order of the constants.
func Paths() []Path {
	ids := []PathID{OrderNew, OrderNewReadFirst, OrderCopy, OrderCopyReadFirst, OrderRedelivery, OrderCopyCached,
		OrderMismatch, OrderInvalid, PaymentNew, PaymentNewReadFirst, PaymentCopy, StatusApplied, StatusStaleRedeliver, StatusStaleFirst,
		StatusBeforeOrder, InboxNew, InboxRedelivery, InboxCopy}
	out := make([]Path, len(ids))
	for i, id := range ids {
		out[i], _ = PathOf(id)
	}
	return out
}
