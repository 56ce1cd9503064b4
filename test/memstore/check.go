package memstore

import "context"

// CheckResult is what Check found, with the fields of cosmosstore's
// CheckResult that apply to an in-memory store.
type CheckResult struct {
	// ETagsHonoured reports whether a replace with a wrong If-Match ETag
	// fails with 412. It is always true: the store honours ETags.
	ETagsHonoured bool
}

// Check is the start-up check that cosmosstore's Store makes against Cosmos
// DB. An in-memory store always exists and can be read and written, so Check
// only reports ctx's error, if any, and that ETags are honoured. It is safe
// for concurrent use.
func (s *Store) Check(ctx context.Context) (CheckResult, error) {
	if err := ctx.Err(); err != nil {
		return CheckResult{}, err
	}
	return CheckResult{ETagsHonoured: true}, nil
}

// Ping is the cheap probe of a circuit breaker: it succeeds unless ctx has
// ended, because an in-memory store is always there. It is safe for
// concurrent use.
func (s *Store) Ping(ctx context.Context) error {
	return ctx.Err()
}
