package idempotent_test

import (
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

func TestOutcome_Settlement(t *testing.T) {
	for _, tc := range []struct {
		o    idempotent.Outcome
		want idempotent.Settlement
	}{
		{idempotent.Created, idempotent.Complete},
		{idempotent.Duplicate, idempotent.Complete},
		{idempotent.Applied, idempotent.Complete},
		{idempotent.Stale, idempotent.Complete},
		{idempotent.Ignored, idempotent.Complete},
		{idempotent.Mismatch, idempotent.DeadLetter},
		{idempotent.Invalid, idempotent.DeadLetter},
		{idempotent.Transient, idempotent.Abandon},
		{0, idempotent.Abandon},                      // the zero Outcome is no decision: retried
		{idempotent.Outcome(99), idempotent.Abandon}, // an outcome nobody knows: retried, never lost
	} {
		if got := tc.o.Settlement(); got != tc.want {
			t.Errorf("%v.Settlement() = %v, want %v", tc.o, got, tc.want)
		}
	}
}
