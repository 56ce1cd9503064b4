package order

import (
	"encoding/hex"
	"sync"
)

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
			p.facts = newFactCache(size)
		}
	}
}

// CacheStats are the counters of a Processor's fact cache.
type CacheStats struct {
	Hits     uint64 // lookups the cache knew the order for
	Misses   uint64 // lookups it did not
	Entries  int    // orders it remembers now
	Capacity int    // the most it remembers; 0: the cache is off
}

// HitRate returns Hits / (Hits + Misses), or 0 before the first lookup.
func (s CacheStats) HitRate() float64 {
	if n := s.Hits + s.Misses; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}

// CacheStats returns the counters of the Processor's fact cache since it was
// made. It is safe to call concurrently with Process.
func (p *Processor) CacheStats() CacheStats {
	if p.facts == nil {
		return CacheStats{}
	}
	return p.facts.stats()
}

// fact is what the cache knows about one order.
type fact struct {
	hash [32]byte // the stored order's request hash (SHA-256)
	paid bool     // its payment record is completed
}

// factEntry is one slot of the CLOCK.
type factEntry struct {
	key string
	fact
	used bool // referenced since the hand last passed
}

// factCache is a bounded map from order id to fact with CLOCK (second
// chance) eviction: a slice of slots and a hand, no allocation per hit and
// one (the map's) per insert. It is safe for concurrent use.
type factCache struct {
	mu     sync.Mutex
	index  map[string]int32 // order id -> slot
	slots  []factEntry
	hand   int
	hits   uint64
	misses uint64
}

func newFactCache(size int) *factCache {
	return &factCache{index: make(map[string]int32, size), slots: make([]factEntry, 0, size)}
}

// decodeHash returns the SHA-256 a hex request hash encodes, or false if h
// is not one (such a hash is never cached).
func decodeHash(h string) ([32]byte, bool) {
	var b [32]byte
	if len(h) != 2*len(b) {
		return b, false
	}
	_, err := hex.Decode(b[:], []byte(h))
	return b, err == nil
}

// get returns the fact known for orderID, counting a hit or a miss.
func (c *factCache) get(orderID string) (fact, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[orderID]
	if !ok {
		c.misses++
		return fact{}, false
	}
	c.hits++
	c.slots[i].used = true
	return c.slots[i].fact, true
}

// learn records that orderID's stored request hash is hash, and, if paid,
// that its payment is completed. A fact once known stays: paid is never
// unlearned, and a hash that differs from the known one (which a store
// cannot confirm for one order id) replaces nothing.
func (c *factCache) learn(orderID, hash string, paid bool) {
	h, ok := decodeHash(hash)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[orderID]; ok {
		e := &c.slots[i]
		if e.hash == h {
			e.paid = e.paid || paid
		}
		e.used = true
		return
	}
	f := fact{hash: h, paid: paid}
	if len(c.slots) < cap(c.slots) {
		c.index[orderID] = int32(len(c.slots))
		c.slots = append(c.slots, factEntry{key: orderID, fact: f})
		return
	}
	// Evict the first slot not used since the hand last passed it.
	for c.slots[c.hand].used {
		c.slots[c.hand].used = false
		c.hand = (c.hand + 1) % len(c.slots)
	}
	delete(c.index, c.slots[c.hand].key)
	c.slots[c.hand] = factEntry{key: orderID, fact: f}
	c.index[orderID] = int32(c.hand)
	c.hand = (c.hand + 1) % len(c.slots)
}

func (c *factCache) stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits, Misses: c.misses, Entries: len(c.slots), Capacity: cap(c.slots)}
}
