package sbqueue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestCountsEqualsSnapshotCountersAndCopiesNothing: Counts reports the same
// counters as Snapshot, with lapsed locks applied, and copies no message:
// polling it on a full queue allocates nothing, where Snapshot copies every
// message (which cost the end-to-end benchmark a sixth of its rate).
func TestCountsEqualsSnapshotCountersAndCopiesNothing(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{})
	ctx := context.Background()
	const n = 1000
	for i := range n {
		send(t, q, sbqueue.Message{MessageID: fmt.Sprint("m-", i), Body: []byte(`{"orderId":"x"}`)})
	}
	got, err := q.Receive(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Complete(got[0].LockToken); err != nil {
		t.Fatal(err)
	}
	if err := q.Abandon(got[1].LockToken, nil); err != nil {
		t.Fatal(err)
	}
	// got[2]'s lock lapses: Counts must apply the deadline, as Snapshot does.
	clock.Advance(lockDuration)

	c := q.Counts()
	want := sbqueue.Counters{Sent: n, Delivered: 3, Completed: 1, Abandoned: 1, LockExpired: 1}
	if c != want {
		t.Errorf("Counts() = %+v, want %+v", c, want)
	}
	if s := q.Snapshot(); s.Counters != c {
		t.Errorf("Snapshot().Counters = %+v, Counts() = %+v: want equal", s.Counters, c)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = q.Counts() }); allocs != 0 {
		t.Errorf("Counts() on a queue of %d messages allocates %v times per call, want 0", n, allocs)
	}
	if allocs := testing.AllocsPerRun(10, func() { _ = q.Snapshot() }); allocs < n {
		t.Errorf("Snapshot() allocates %v times per call on %d messages; the test no longer shows what Counts saves", allocs, n)
	}
}

// BenchmarkCounts compares polling the counters with Counts and with
// Snapshot on a queue holding 1000 messages.
func BenchmarkCounts(b *testing.B) {
	q, _ := newTestQueue(b, sbqueue.QueueOptions{})
	for i := range 1000 {
		send(b, q, sbqueue.Message{MessageID: fmt.Sprint("m-", i), Body: []byte(`{"orderId":"x"}`)})
	}
	b.Run("Counts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = q.Counts()
		}
	})
	b.Run("Snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = q.Snapshot().Completed
		}
	})
}
