package memstore

import (
	"context"
	"fmt"
)

// CheckResult is what Check found, with the fields of cosmosstore's
// CheckResult that apply to an in-memory store.
type CheckResult struct {
	// ETagsHonoured reports whether a replace with a wrong If-Match ETag
	// fails with 412. It is always true: the store honours ETags.
	ETagsHonoured bool
	// DefaultTTL is the container's default time to live (see
	// SetDefaultTTL), or nil when TTL is off, as cosmosstore reports it.
	DefaultTTL *int32
}

// Check is the start-up check that cosmosstore's Store makes against Cosmos
// DB. An in-memory store always exists and can be read and written, so Check
// reports ctx's error, if any, that ETags are honoured, and, like
// cosmosstore's Check, refuses a container default TTL other than -1 (see
// SetDefaultTTL) with an error naming the fix: a positive default deletes
// every order, event, payment record and lease; TTL off makes the inbox
// markers' ttl ignored. It is safe for concurrent use.
func (s *Store) Check(ctx context.Context) (CheckResult, error) {
	if err := ctx.Err(); err != nil {
		return CheckResult{}, err
	}
	s.mu.Lock()
	ttl := s.containerTTL()
	s.mu.Unlock()
	res := CheckResult{ETagsHonoured: true}
	const fix = "set it to -1: az cosmosdb sql container update … --ttl -1, or defaultTtl: -1 as the Bicep template (infra/bicep/modules/cosmos.bicep) sets it"
	switch {
	case ttl == TTLOff:
		return res, fmt.Errorf("memstore: check: the container has time to live off (no defaultTtl): the inbox markers' ttl is ignored and they never expire; %s", fix)
	case ttl != -1:
		res.DefaultTTL = &ttl
		return res, fmt.Errorf("memstore: check: the container's default time to live (defaultTtl) is %d: every document without a ttl of its own (orders, events, payment records, leases) expires %d seconds after its last write; %s", ttl, ttl, fix)
	}
	res.DefaultTTL = &ttl
	return res, nil
}
