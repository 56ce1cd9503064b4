package idempotent_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// arrival is one redelivery path: the events a copy of a message went
// through, and when (after the first processing) that copy arrives last.
type arrival struct {
	path string
	at   time.Duration
}

// redeliveryPaths enumerates how a copy with the MessageId of a message
// first processed at time 0 can still arrive, under the broker's rules and
// the project's assumptions (see RedeliveryHorizon), and returns every path
// with its latest arrival. The first processing is taken at the first
// copy's enqueue, the earliest possible: a later one shortens every path.
//
// The events, each at its earliest or latest possible time:
//
//   - a copy enqueued at e is delivered, first or again, in [e, e+T];
//   - it is dead-lettered in [e, e+T+2D] (a delivery that began just before
//     it expired holds the copy until its lock ends: the worker renews only
//     until its message deadline, below D, and a lock lapses D after its
//     last renewal);
//   - a dead-lettered copy may be resubmitted (a new copy) until H after the
//     first dead-lettering in its chain, however often the resubmission is
//     dead-lettered again;
//   - the producer may retry the original send once the broker no longer
//     drops it, just after the window W, and not later (a new copy at W).
//
// A resubmission inside the window of an earlier copy is dropped by the
// broker's duplicate detection; the enumeration ignores that, so it can
// only find more paths, never miss one.
func redeliveryPaths(h idempotent.RedeliveryHorizon, maxResubmissions int) []arrival {
	t, d, w, hz := h.MessageTimeToLive, h.LockDuration, h.DuplicateDetectionWindow, h.ResubmissionHorizon
	var out []arrival
	// visit explores the copy enqueued at enq. chainEnd is the latest
	// resubmission allowed in its dead-letter chain (-1: not in a chain).
	var visit func(path string, enq, chainEnd time.Duration, resubmissions int, original bool)
	visit = func(path string, enq, chainEnd time.Duration, resubmissions int, original bool) {
		for _, at := range []time.Duration{enq, enq + t} {
			out = append(out, arrival{fmt.Sprintf("%s → delivered at %v", path, at), at})
		}
		if original {
			visit(path+" → producer retry enqueued at W", w, -1, resubmissions, false)
		}
		if resubmissions == maxResubmissions {
			return
		}
		for _, dl := range []time.Duration{enq, enq + t + 2*d} {
			end := chainEnd
			if end < 0 {
				end = dl + hz
			}
			for _, r := range []time.Duration{dl, end} {
				if r < dl || r > end {
					continue // no resubmission before its dead-lettering or after the horizon
				}
				visit(fmt.Sprintf("%s → dead-lettered at %v → resubmitted at %v", path, dl, r), r, end, resubmissions+1, false)
			}
		}
	}
	visit("first copy enqueued and processed at 0", 0, -1, 0, true)
	return out
}

// TestMinRetentionCoversEveryRedeliveryPath derives the bound from the
// enumeration: MinRetention is at least the latest arrival of every path,
// and equals the latest of them, for the production defaults, edge cases
// and random horizons. Chains of up to three resubmissions are enumerated;
// they arrive no later than one.
func TestMinRetentionCoversEveryRedeliveryPath(t *testing.T) {
	const day = 24 * time.Hour
	horizons := []idempotent.RedeliveryHorizon{
		{LockDuration: time.Minute, MaxDeliveryCount: 10, MessageTimeToLive: 14 * day, DuplicateDetectionWindow: 10 * time.Minute, ResubmissionHorizon: 7 * day},
		{LockDuration: 5 * time.Minute, MaxDeliveryCount: 2, MessageTimeToLive: time.Minute, DuplicateDetectionWindow: time.Hour},
		{LockDuration: time.Second, MaxDeliveryCount: 1, MessageTimeToLive: time.Second, DuplicateDetectionWindow: 20 * time.Second},
		{LockDuration: 30 * time.Second, MaxDeliveryCount: 10, MessageTimeToLive: time.Hour, DuplicateDetectionWindow: 7 * day, ResubmissionHorizon: time.Minute},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		horizons = append(horizons, idempotent.RedeliveryHorizon{
			LockDuration:             time.Duration(rng.Int64N(int64(5*time.Minute))) + time.Second,
			MaxDeliveryCount:         rng.IntN(10) + 1,
			MessageTimeToLive:        time.Duration(rng.Int64N(int64(30*day))) + time.Second,
			DuplicateDetectionWindow: time.Duration(rng.Int64N(int64(7*day))) + 20*time.Second,
			ResubmissionHorizon:      time.Duration(rng.Int64N(int64(30 * day))),
		})
	}
	for i, h := range horizons {
		got, why := h.MinRetention()
		var latest arrival
		for _, a := range redeliveryPaths(h, 3) {
			if a.at > got {
				t.Errorf("horizon %d %+v: MinRetention %v (%s) is shorter than the path %s", i, h, got, why, a.path)
			}
			if a.at > latest.at {
				latest = a
			}
		}
		if got != latest.at {
			t.Errorf("horizon %d %+v: MinRetention %v, but the latest path arrives at %v: %s", i, h, got, latest.at, latest.path)
		}
		if one := redeliveryPaths(h, 1); maxAt(one) != latest.at {
			t.Errorf("horizon %d: chains of resubmissions arrive at %v, later than one resubmission at %v", i, latest.at, maxAt(one))
		}
		if err := h.CheckRetention(got); err != nil {
			t.Errorf("horizon %d: CheckRetention(minimum) = %v", i, err)
		}
		if err := h.CheckRetention(got - time.Nanosecond); err == nil || !strings.Contains(err.Error(), got.String()) {
			t.Errorf("horizon %d: CheckRetention(minimum - 1ns) = %v, want a refusal that shows the minimum", i, err)
		}
	}
}

func maxAt(as []arrival) time.Duration {
	var m time.Duration
	for _, a := range as {
		m = max(m, a.at)
	}
	return m
}

// TestMinRetentionTheIssuesPath: the path the old formula missed, a
// producer retry just after the window that is itself dead-lettered and
// resubmitted, arrives after W + 2T + H.
func TestMinRetentionTheIssuesPath(t *testing.T) {
	h := idempotent.RedeliveryHorizon{LockDuration: time.Minute, MaxDeliveryCount: 10, MessageTimeToLive: 14 * 24 * time.Hour,
		DuplicateDetectionWindow: 10 * time.Minute, ResubmissionHorizon: 7 * 24 * time.Hour}
	arrives := h.DuplicateDetectionWindow + 2*h.MessageTimeToLive + h.ResubmissionHorizon
	if got, why := h.MinRetention(); got < arrives {
		t.Errorf("MinRetention = %v (%s), below the retry-dead-letter-resubmit path's %v", got, why, arrives)
	}
}

// TestUnlimitedTTLHasNoSafeRetention: with an unlimited message TTL a copy
// can wait in a backlog for ever; lock duration × max delivery count bounds
// nothing. No finite retention passes, the refusal says how to fix it, and
// only a retention for ever passes.
func TestUnlimitedTTLHasNoSafeRetention(t *testing.T) {
	h := idempotent.RedeliveryHorizon{LockDuration: time.Minute, MaxDeliveryCount: 10, DuplicateDetectionWindow: 10 * time.Minute, ResubmissionHorizon: time.Hour}
	if got, why := h.MinRetention(); got != idempotent.UnboundedRetention || !strings.Contains(why, "unlimited") {
		t.Errorf("MinRetention = %v (%s), want UnboundedRetention", got, why)
	}
	for _, d := range []time.Duration{time.Hour, 100 * 365 * 24 * time.Hour, idempotent.UnboundedRetention - 1} {
		err := h.CheckRetentionOf("inbox markers", d)
		if err == nil || !strings.Contains(err.Error(), "retention of inbox markers") || !strings.Contains(err.Error(), "set a default message TTL") {
			t.Errorf("CheckRetentionOf(inbox markers, %v) = %v, want a refusal that says to set a message TTL", d, err)
		}
	}
	if err := h.CheckRetention(idempotent.UnboundedRetention); err != nil {
		t.Errorf("CheckRetention(UnboundedRetention) = %v, want markers kept for ever to pass", err)
	}
}

// TestCheckRetentionOfNamesWhat: the check is generic, for payment
// idempotency keys as for markers.
func TestCheckRetentionOfNamesWhat(t *testing.T) {
	h := idempotent.RedeliveryHorizon{LockDuration: time.Minute, MaxDeliveryCount: 10, MessageTimeToLive: 14 * 24 * time.Hour,
		DuplicateDetectionWindow: 10 * time.Minute, ResubmissionHorizon: 7 * 24 * time.Hour}
	err := h.CheckRetentionOf("payment idempotency keys", 24*time.Hour)
	if err == nil || !strings.Contains(err.Error(), "retention of payment idempotency keys 24h0m0s") {
		t.Errorf("CheckRetentionOf = %v, want a refusal naming the payment keys", err)
	}
	if err := h.CheckRetention(time.Hour); err == nil || !strings.Contains(err.Error(), "retention of deduplication markers") {
		t.Errorf("CheckRetention = %v, want a refusal naming the markers", err)
	}
	if got, _ := (idempotent.RedeliveryHorizon{MessageTimeToLive: idempotent.UnboundedRetention - 1, ResubmissionHorizon: time.Hour}).MinRetention(); got != idempotent.UnboundedRetention {
		t.Errorf("an overflowing minimum is %v, want UnboundedRetention", got)
	}
}
