package idempotent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"
)

// FactCache is a bounded cache of facts the store confirmed and that
// cannot change: an entity's request hash, learned from a create that
// succeeded or a document the store returned, and that its side effect
// completed. With them a later delivery of the same entity is answered
// without a round trip. For everything it does not know the store stays the
// arbiter.
//
// An answer from the cache assumes that a marker, once written, is never
// deleted. An operator who deletes one anyway gets Duplicate from a worker
// that remembers it; restart the workers after such a deletion.
//
// It is a map from entity id to fact with CLOCK (second chance) eviction: a
// slice of slots and a hand, no allocation per hit and one (the map's) per
// insert. Its memory follows what it holds: the map and the slots grow as
// entities are learned, up to the size it was made with, so an empty cache
// of 10,000 entities is a few hundred bytes, and a full one about 0.9 MB
// (66 bytes a slot, and the index).
// It holds no pointer, so the garbage collector never scans it: an entity
// is known by the SHA-256 of its id, not by the id (a string, which the
// collector would trace in the map and the slot, 10,000 times at every
// collection). Two ids share an entry only if their SHA-256 collide, the
// property the request hash that decides a duplicate relies on already.
// The index is keyed by the first 8 bytes of that SHA-256 only, a third of
// the memory of the whole 32, and the slot it points to holds all 32: a
// lookup whose slot holds another key is a miss, and a new entity whose 8
// bytes are taken replaces the entry that has them, so ids whose prefixes
// collide (by chance once in 2^64 pairs, or made to by whoever picks the
// ids) only evict each other, never answer for each other.
// Hashes that are not hex SHA-256 are never cached. It is safe for
// concurrent use.
type FactCache struct {
	mu     sync.Mutex
	index  map[uint64]int32 // prefix of the entity id's factKey -> slot
	slots  []factEntry      // grown up to size, then reused by the hand
	size   int
	hand   int
	hits   uint64
	misses uint64
}

// Fact is what a FactCache knows about one entity.
type Fact struct {
	hash [32]byte // the stored request hash (SHA-256)
	// Done reports that the entity's side effect is known completed.
	Done bool
}

// Hash returns the stored request hash, in hex.
func (f Fact) Hash() string { return hex.EncodeToString(f.hash[:]) }

// Matches reports whether hash is the stored request hash.
func (f Fact) Matches(hash string) bool {
	h, ok := decodeHash(hash)
	return ok && h == f.hash
}

// factEntry is one slot of the CLOCK.
type factEntry struct {
	key [sha256.Size]byte // factKey of the entity id
	Fact
	used bool // referenced since the hand last passed
}

// CacheStats are the counters of a FactCache.
type CacheStats struct {
	Hits     uint64 // lookups the cache knew the entity for
	Misses   uint64 // lookups it did not
	Entries  int    // entities it remembers now
	Capacity int    // the most it remembers; 0: the cache is off
}

// HitRate returns Hits / (Hits + Misses), or 0 before the first lookup.
func (s CacheStats) HitRate() float64 {
	if n := s.Hits + s.Misses; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}

// NewFactCache returns a FactCache that remembers at most size entities
// (size must be positive).
func NewFactCache(size int) *FactCache {
	return &FactCache{index: make(map[uint64]int32), size: size}
}

// decodeHash returns the SHA-256 a hex request hash encodes, or false if h
// is not one.
func decodeHash(h string) ([32]byte, bool) {
	var b [32]byte
	if len(h) != 2*len(b) {
		return b, false
	}
	_, err := hex.Decode(b[:], []byte(h))
	return b, err == nil
}

// factKey is what the cache knows an entity id by.
func factKey(id string) [sha256.Size]byte { return sha256.Sum256([]byte(id)) }

// indexKey is the part of a factKey the index is keyed by.
func indexKey(k [sha256.Size]byte) uint64 { return binary.LittleEndian.Uint64(k[:8]) }

// Get returns the fact known for id, counting a hit or a miss.
func (c *FactCache) Get(id string) (Fact, bool) {
	k := factKey(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[indexKey(k)]
	if !ok || c.slots[i].key != k {
		c.misses++
		return Fact{}, false
	}
	c.hits++
	c.slots[i].used = true
	return c.slots[i].Fact, true
}

// Learn records that id's stored request hash is hash, and, if done, that
// its side effect completed. A fact once known stays: done is never
// unlearned, and a hash that differs from the known one (which a store
// cannot confirm for one id) replaces nothing.
func (c *FactCache) Learn(id, hash string, done bool) {
	h, ok := decodeHash(hash)
	if !ok {
		return
	}
	k := factKey(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	ik := indexKey(k)
	i, ok := c.index[ik]
	switch {
	case ok && c.slots[i].key == k:
		e := &c.slots[i]
		if e.hash == h {
			e.Done = e.Done || done
		}
		e.used = true
		return
	case ok: // another entity with the same index key: it makes room
		c.slots[i] = factEntry{key: k, Fact: Fact{hash: h, Done: done}}
		return
	}
	f := Fact{hash: h, Done: done}
	if len(c.slots) < c.size {
		if len(c.slots) == cap(c.slots) {
			grown := make([]factEntry, len(c.slots), min(max(2*cap(c.slots), 64), c.size))
			copy(grown, c.slots)
			c.slots = grown
		}
		c.index[ik] = int32(len(c.slots))
		c.slots = append(c.slots, factEntry{key: k, Fact: f})
		return
	}
	// Evict the first slot not used since the hand last passed it.
	for c.slots[c.hand].used {
		c.slots[c.hand].used = false
		c.hand = (c.hand + 1) % len(c.slots)
	}
	delete(c.index, indexKey(c.slots[c.hand].key))
	c.slots[c.hand] = factEntry{key: k, Fact: f}
	c.index[ik] = int32(c.hand)
	c.hand = (c.hand + 1) % len(c.slots)
}

// Stats returns the cache's counters since it was made.
func (c *FactCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits, Misses: c.misses, Entries: len(c.slots), Capacity: c.size}
}

// Wrap returns next behind the cache: a lookup the cache can answer costs
// no round trip, and whatever next finds or a create confirms is learned.
// Use it with WithLookup.
func (c *FactCache) Wrap(next Lookup) Lookup { return cachedLookup{c, next} }

type cachedLookup struct {
	c    *FactCache
	next Lookup
}

func (l cachedLookup) Lookup(ctx context.Context, id string) (string, bool, error) {
	if f, ok := l.c.Get(id); ok {
		return f.Hash(), true, nil
	}
	hash, found, err := l.next.Lookup(ctx, id)
	if found {
		l.c.Learn(id, hash, false)
	}
	return hash, found, err
}

func (l cachedLookup) Learn(id, hash string) {
	l.c.Learn(id, hash, false)
	l.next.Learn(id, hash)
}
