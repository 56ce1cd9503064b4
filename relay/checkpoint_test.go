package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// trickleCounts are what a relay did for a trickle of events.
type trickleCounts struct {
	events, checkpoints, leaseWrites, reads int
}

// runTrickle runs Run with the default options in a synctest bubble on one
// feed range, writes n orders at exponential gaps of mean 30ms (about 33
// orders/s, a fixed seed), waits 3s, and counts before the relay stops:
// the checkpoints, every accepted write of a lease (checkpoints, renewals,
// the acquisition) and the feed reads. sharedLeases keeps the leases in the
// orders container (the emulators' set-up, where each lease write is a
// change the relay reads), else in a container of their own (Azure's).
// Every gap is a whole number of milliseconds plus 1ns, so no write falls on
// an instant at which the relay polls (multiples of 31.25ms from its start)
// and the counts are exact, whatever the machine's load.
func runTrickle(t *testing.T, n int, sharedLeases bool, mod func(*relay.Options)) trickleCounts {
	t.Helper()
	var c trickleCounts
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1)
		leases := f.store
		if !sharedLeases {
			leases = &leaseStore{Store: memstore.New("/orderId")}
		}
		var writes atomic.Int64
		leases.audit = func(prev, next relay.Lease) { writes.Add(1) }
		feed := &timedFeed{ChangeFeed: f.feed}
		tp := &timedTopic{topic: f.topic, first: map[string]time.Time{}}
		o := ordersOptions(relay.Options{Name: "orderrelay", Owner: "a", Logger: discard()})
		if mod != nil {
			mod(&o)
		}
		r, err := relay.New(feed, leases, tp, o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		rnd := rand.New(rand.NewPCG(42, 33))
		written := make([]time.Time, 0, n)
		for range n {
			gap := time.Duration(rnd.ExpFloat64() * float64(30*time.Millisecond)).Round(time.Millisecond)
			time.Sleep(gap + time.Nanosecond)
			f.addOrders(1)
			written = append(written, time.Now())
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		st := r.Stats()
		c = trickleCounts{events: n, checkpoints: int(st.Checkpoints), leaseWrites: int(writes.Load()), reads: len(feed.readTimes())}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		sent, _ := f.topic.sent()
		f.wantEveryEvent(sent)
		// The poll loop's share of the latency, on synctest's clock: a
		// figure for the log, not an assertion.
		var ds []time.Duration
		for i, id := range f.orders {
			if at, ok := tp.sentAt(order.EventID(id)); ok {
				ds = append(ds, at.Sub(written[i]))
			}
		}
		slices.Sort(ds)
		if len(ds) > 0 {
			t.Logf("write to publish: p50 %v, p99 %v, max %v", ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1])
		}
	})
	return c
}

// TestRun_CheckpointsPerEventAtThirtyThreeOrdersASecond counts exactly, on
// synctest's clock, the lease writes and feed reads of a relay with the
// default options under 2,000 orders at about 33 a second (a minute): one
// checkpoint per CheckpointInterval (1s), not one per poll that found an
// event. The rule of earlier versions (a checkpoint after every page with
// events, the next poll at once) made 1,010 checkpoints, 1,017 lease writes
// and 2,396 feed reads here; now 58, 64 and 1,848. The counts are the same
// with the leases in the orders container: a lease write read back from
// the feed is no event, and changes no wait.
func TestRun_CheckpointsPerEventAtThirtyThreeOrdersASecond(t *testing.T) {
	for _, tt := range []struct {
		name   string
		shared bool
		want   trickleCounts
	}{
		{"leases container", false, trickleCounts{events: 2000, checkpoints: 58, leaseWrites: 64, reads: 1848}},
		{"shared container", true, trickleCounts{events: 2000, checkpoints: 58, leaseWrites: 64, reads: 1848}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := runTrickle(t, tt.want.events, tt.shared, nil)
			per := func(n int) float64 { return float64(n) / float64(got.events) }
			t.Logf("%d events: %d checkpoints (%.3f per event), %d lease writes (%.3f), %d feed reads (%.3f)",
				got.events, got.checkpoints, per(got.checkpoints), got.leaseWrites, per(got.leaseWrites), got.reads, per(got.reads))
			if got != tt.want {
				t.Errorf("counts %+v, want %+v", got, tt.want)
			}
			if per(got.checkpoints) > 0.1 {
				t.Errorf("%.3f checkpoints per event, want at most 0.1", per(got.checkpoints))
			}
		})
	}
}

// eventsAfter returns the ids of the events the feed holds after
// continuation in feed range fr.
func (f *fixture) eventsAfter(fr, continuation string) map[string]bool {
	out := map[string]bool{}
	for {
		docs, next, err := f.feed.ReadChanges(context.Background(), fr, continuation, 500)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(docs) == 0 {
			return out
		}
		for _, d := range docs {
			var head struct{ ID, Type string }
			if json.Unmarshal(d, &head) == nil && head.Type == order.TypeEvent {
				out[head.ID] = true
			}
		}
		continuation = next
	}
}

// TestRelay_NeverCheckpointsBeforeThePublish audits every lease write that
// moves a continuation, while sends fail now and then (a send that fails
// publishes nothing of its batch), instances stop without a release (a
// crash between a read and its publish, or between a publish and its
// checkpoint) and the clock moves by uneven steps: every event before the
// continuation written was sent to the topic before the write. And every
// event is published in the end.
func TestRelay_NeverCheckpointsBeforeThePublish(t *testing.T) {
	f := newFixture(t, 2)
	var audited, violations int
	f.store.audit = func(prev, next relay.Lease) {
		if next.Continuation == prev.Continuation {
			return
		}
		audited++
		sent, _ := f.topic.sent()
		after := f.eventsAfter(next.FeedRange, next.Continuation)
		for ev := range f.eventsAfter(next.FeedRange, "") {
			if !after[ev] && sent[ev] == 0 {
				violations++
				t.Errorf("lease of %s checkpointed past event %s, which was never sent", next.FeedRange, ev)
			}
		}
	}
	rnd := rand.New(rand.NewPCG(7, 34))
	small := func(o *relay.Options) { o.PageSize = 7; o.MaxBatchMessages = 2 }
	gen := 0
	r := f.relay("a0", f.clock.Now, small)
	for i := range 300 {
		f.addOrders(rnd.IntN(4))
		if rnd.IntN(5) == 0 {
			f.topic.mu.Lock()
			f.topic.failSends = 1 + rnd.IntN(2)
			f.topic.mu.Unlock()
		}
		if i%60 == 59 { // the instance dies without a release; the next takes over after its lease
			gen++
			r = f.relay(fmt.Sprintf("a%d", gen), f.clock.Now, small)
			f.clock.Advance(31 * time.Second)
		}
		_ = r.Step(context.Background())
		f.clock.Advance(time.Duration(rnd.IntN(700)) * time.Millisecond)
	}
	f.topic.mu.Lock()
	f.topic.failSends = 0
	f.topic.mu.Unlock()
	f.clock.Advance(relay.DefaultCheckpointInterval)
	if err := drain(t, r); err != nil {
		t.Fatal(err)
	}
	sent, _ := f.topic.sent()
	f.wantEveryEvent(sent)
	if audited < 50 || violations > 0 {
		t.Errorf("%d checkpoints audited, %d events checkpointed before their publish", audited, violations)
	}
}

// TestRelay_ReleaseSavesWhatWasPublished: events published within
// CheckpointInterval of the last checkpoint are not checkpointed yet; the
// release at shutdown saves them, so the next owner republishes nothing.
func TestRelay_ReleaseSavesWhatWasPublished(t *testing.T) {
	f := newFixture(t, 1)
	f.addOrders(10)
	a := f.relay("a", f.clock.Now, nil)
	if err := drain(t, a); err != nil {
		t.Fatal(err)
	}
	f.addOrders(20)
	if err := drain(t, a); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Published != 30 || st.Checkpoints != 1 {
		t.Fatalf("stats %+v: want 30 published and only the first page checkpointed (the clock has not moved)", st)
	}
	fr := a.Owned()[0]
	if after := f.eventsAfter(fr, f.lease(fr).Continuation); len(after) != 20 {
		t.Fatalf("%d events after the checkpoint, want the 20 published since", len(after))
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := f.lease(fr)
	if after := f.eventsAfter(fr, l.Continuation); l.Owner != "" || len(after) != 0 {
		t.Errorf("released lease %+v leaves %d events after its continuation, want 0", l, len(after))
	}
	b := f.relay("b", f.clock.Now, nil)
	if err := drain(t, b); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Published != 0 || st.Acquired != 1 {
		t.Errorf("the next owner: %+v; want the lease acquired at once and nothing republished", st)
	}
}
