package order

import "github.com/idempotent-consumer/sbcosmos/idempotent"

// The lookup before the create is the core consumer's (see
// idempotent.Consumer.Process), and so are its optimizations. Neither
// changes an outcome, only the round trips:
//
//   - the fact cache (idempotent.FactCache, WithFactCache) answers a
//     delivery of an order whose facts the store confirmed earlier with no
//     round trip;
//   - the read-first policy (idempotent.CopyShare, WithAdaptiveReadFirst)
//     reads before it creates on a redelivery, and on a first delivery while
//     most first deliveries turn out to be copies.

// WithAdaptiveReadFirst turns the adaptive choice of the first store call
// for a first delivery on (the default) or off. On, the Processor estimates
// the share of first deliveries that turn out to be copies of stored orders
// (see CopyShare) and reads before it creates while that share is above
// about 1/2, creating first otherwise; a new Processor creates first until
// the copies it finds raise the estimate. Off, it always creates first.
// Redeliveries read first either way, and the choice never changes a
// delivery's outcome, only its round trips.
func WithAdaptiveReadFirst(on bool) Option {
	return func(p *Processor) {
		if on {
			p.copies = &idempotent.CopyShare{}
		} else {
			p.copies = nil
		}
	}
}

// CopyShare returns the Processor's estimate of the share of first
// deliveries (those the fact cache cannot answer) that turn out to be copies
// of stored orders, between 0 and 1, and whether it reads first because of
// it. The estimate is a moving average over about the last 32 such
// deliveries; without the adaptive choice (see WithAdaptiveReadFirst) it is
// 0 and false. It is safe to call concurrently with Process.
func (p *Processor) CopyShare() (share float64, readFirst bool) {
	if p.copies == nil {
		return 0, false
	}
	return p.copies.Estimate()
}

// DefaultFactCacheSize is the number of orders the fact cache of a Processor
// remembers unless WithFactCache says otherwise.
const DefaultFactCacheSize = 10_000

// WithFactCache bounds the Processor's cache of confirmed facts to size
// orders (CLOCK eviction); zero or less turns the cache off. The default is
// DefaultFactCacheSize.
//
// The cache holds only facts that cannot change once the store confirmed
// them: an order id's request hash, learned from a create that succeeded or
// a document the store returned (the order document, or the payment record
// written in the order's batch), and that the order's payment is completed,
// learned from the completed mark that succeeded or a completed record read.
// With them it answers a later delivery of the same order without a round
// trip: Duplicate when the hash is equal and nothing is left to do (payments
// off, nothing to capture, or the payment known completed), Mismatch when
// the hash differs. For everything it does not know the store stays the
// arbiter: a miss, or a known order whose payment is not known completed,
// goes to the store as it would without the cache.
//
// An answer from the cache assumes what the project's contract says: an
// accepted order's documents are never deleted (they carry no ttl and no
// component deletes them). An operator who deletes an order document anyway
// gets Duplicate from a processor that remembers the order, where the
// store would answer OrderDocumentMissing; the message's effect (the order
// accepted, its event written, its payment captured) has happened exactly
// once either way, and only the dead-letter hint to restore the document
// is lost. Restart the workers after such a deletion to forget the facts.
func WithFactCache(size int) Option {
	return func(p *Processor) {
		p.facts = nil
		if size > 0 {
			p.facts = idempotent.NewFactCache(size)
		}
	}
}

// CacheStats returns the counters of the Processor's fact cache since it was
// made. It is safe to call concurrently with Process.
func (p *Processor) CacheStats() idempotent.CacheStats {
	if p.facts == nil {
		return idempotent.CacheStats{}
	}
	return p.facts.Stats()
}
