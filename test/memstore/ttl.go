package memstore

// TTLOff is the default time to live that SetDefaultTTL takes for a
// container with time to live off: Cosmos DB then reports no defaultTtl and
// ignores every document's "ttl".
const TTLOff = 0

// SetDefaultTTL sets the container's default time to live (Cosmos DB's
// defaultTtl), in seconds, for the writes that follow, as a container made
// other than by the Bicep template may have it: -1, the default of New, turns
// per-document TTL on with no default expiry; a positive n also expires every
// document without a "ttl" of its own n seconds after its last write;
// TTLOff turns TTL off, so that no document expires whatever its "ttl". Check
// refuses every value but -1, as cosmosstore's Check does. It is safe for
// concurrent use.
func (s *Store) SetDefaultTTL(seconds int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaultTTL = seconds
	s.defaultTTLSet = true
}

// containerTTL returns the container's default time to live: -1 unless
// SetDefaultTTL said otherwise. s.mu must be held.
func (s *Store) containerTTL() int32 {
	if !s.defaultTTLSet {
		return -1
	}
	return s.defaultTTL
}

// expiry returns how many seconds after a write a document with the given
// "ttl" (nil: none) expires under the container's default, or 0 for never,
// as Cosmos DB applies the two. s.mu must be held.
func (s *Store) expiry(ttl *int64) int64 {
	def := s.containerTTL()
	switch {
	case def == TTLOff:
		return 0
	case ttl != nil && *ttl > 0:
		return *ttl
	case ttl != nil: // -1: never, whatever the default
		return 0
	case def > 0:
		return int64(def)
	}
	return 0
}
