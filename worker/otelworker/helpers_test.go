package otelworker_test

import (
	"context"
	"errors"
	"sync/atomic"
)

var errStoreDown = errors.New("503 service unavailable")

// probeFailsOnce returns a probe that fails its first call and succeeds
// after: the breaker, asked to open, opens, and its next probe closes it.
func probeFailsOnce() func(context.Context) error {
	var calls atomic.Int64
	return func(context.Context) error {
		if calls.Add(1) == 1 {
			return errStoreDown
		}
		return nil
	}
}
