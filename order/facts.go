package order

import "github.com/idempotent-consumer/sbcosmos/idempotent"

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
func (p *Processor) CacheStats() CacheStats {
	if p.facts == nil {
		return CacheStats{}
	}
	return p.facts.Stats()
}
