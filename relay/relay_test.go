package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
)

func TestRelay_PublishesEveryEventAndSkipsOtherDocuments(t *testing.T) {
	f := newFixture(t, 2)
	f.addOrders(120)
	r := f.relay("a", f.clock.Now, nil)
	if err := drain(t, r); err != nil {
		t.Fatal(err)
	}
	sent, total := f.topic.sent()
	f.wantEveryEvent(sent)
	if total != len(f.orders) {
		t.Errorf("%d messages sent for %d events: a republish without a crash", total, len(f.orders))
	}
	st := r.Stats()
	// Each order also wrote its order document and an inbox marker; the
	// manifest and the leases are in the feed too.
	if st.Skipped < int64(2*len(f.orders)) || st.Unpublishable != 0 {
		t.Errorf("stats = %+v, want at least %d skipped, none unpublishable", st, 2*len(f.orders))
	}
	m := f.topic.batches[0][0]
	if m.Subject == nil || *m.Subject != order.EventOrderAccepted || m.ContentType == nil || *m.ContentType != "application/json" {
		t.Errorf("message subject %v, content type %v", m.Subject, m.ContentType)
	}
	var ev order.AcceptedEvent
	dec := json.NewDecoder(strings.NewReader(string(m.Body)))
	dec.DisallowUnknownFields() // no _etag, _lsn or other system property
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("body %s: %v", m.Body, err)
	}
	if ev.ID != *m.MessageID || ev.ID != order.EventID(ev.OrderID) || ev.Type != order.TypeEvent || m.ApplicationProperties["orderId"] != ev.OrderID {
		t.Errorf("message %s carries event %+v, properties %v", *m.MessageID, ev, m.ApplicationProperties)
	}
	for _, fr := range r.Owned() {
		if l := f.lease(fr); l.Owner != "a" || l.Continuation == "" {
			t.Errorf("lease %+v: want owner a and a checkpoint", l)
		}
	}
}

// An idle relay writes nothing: its own lease writes are changes of the
// container it reads, and must not keep it checkpointing for ever.
func TestRelay_IdleRelayWritesNoCheckpoints(t *testing.T) {
	f := newFixture(t, 1)
	f.addOrders(10)
	r := f.relay("a", f.clock.Now, nil)
	if err := drain(t, r); err != nil {
		t.Fatal(err)
	}
	before := r.Stats()
	for range 10 {
		if err := r.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if after := r.Stats(); after.Checkpoints != before.Checkpoints || after.Published != before.Published {
		t.Errorf("idle steps wrote checkpoints or published: before %+v, after %+v", before, after)
	}
}

// A crash after the publish and before the checkpoint republishes the page
// at the next owner: nothing is lost.
func TestRelay_CrashBetweenPublishAndCheckpointRepublishes(t *testing.T) {
	f := newFixture(t, 1)
	f.addOrders(30)
	big := func(o *relay.Options) { o.PageSize = 500 } // the 20 orders' documents in one page
	a := f.relay("a", f.clock.Now, big)
	if err := drain(t, a); err != nil {
		t.Fatal(err)
	}
	f.addOrders(20) // published by a, never checkpointed
	f.store.setFailReplace(func(id string) error {
		return errors.New("crash: the process died before the checkpoint")
	})
	f.clock.Advance(relay.DefaultCheckpointInterval) // the checkpoint after the page is due
	if err := a.Step(context.Background()); err == nil {
		t.Fatal("the step survived its checkpoint failing")
	}
	f.store.setFailReplace(nil)
	_, afterCrash := f.topic.sent()
	if afterCrash != 50 {
		t.Fatalf("%d messages before the crash, want 50", afterCrash)
	}
	// a is gone without releasing; b takes over once the lease expires.
	b := f.relay("b", f.clock.Now, big)
	if err := b.Step(context.Background()); err != nil || b.Stats().Published != 0 {
		t.Fatalf("b published %d before a's lease expired (err %v)", b.Stats().Published, err)
	}
	f.clock.Advance(31 * time.Second)
	if err := drain(t, b); err != nil {
		t.Fatal(err)
	}
	sent, total := f.topic.sent()
	f.wantEveryEvent(sent)
	if total != 70 {
		t.Errorf("%d messages sent, want 70: 50, then the 20 of the uncheckpointed page again", total)
	}
	for _, id := range f.orders[30:] {
		if sent[order.EventID(id)] != 2 {
			t.Errorf("event of %s sent %d times, want 2 (published, crash, republished)", id, sent[order.EventID(id)])
		}
	}
}

func TestRelay_LeaseTakeoverAfterExpiryContinuesFromTheCheckpoint(t *testing.T) {
	f := newFixture(t, 1)
	f.addOrders(40)
	a := f.relay("a", f.clock.Now, nil)
	if err := drain(t, a); err != nil {
		t.Fatal(err)
	}
	// Its pages after the first were published within CheckpointInterval
	// of the first's checkpoint: the poll after the interval saves them.
	f.clock.Advance(relay.DefaultCheckpointInterval)
	if err := a.Step(context.Background()); err != nil || a.Stats().Checkpoints != 2 {
		t.Fatalf("the poll after CheckpointInterval: err %v, stats %+v; want the second checkpoint", err, a.Stats())
	}
	f.addOrders(10)
	b := f.relay("b", f.clock.Now, nil)
	f.clock.Advance(28 * time.Second)
	if err := b.Step(context.Background()); err != nil || len(b.Owned()) != 0 {
		t.Fatalf("b took a lease 29s into a 30s lease: owned %v, err %v", b.Owned(), err)
	}
	f.clock.Advance(2 * time.Second)
	if err := drain(t, b); err != nil {
		t.Fatal(err)
	}
	if len(b.Owned()) != 1 || b.Stats().Acquired != 1 {
		t.Fatalf("b owns %v after a's lease expired", b.Owned())
	}
	sent, total := f.topic.sent()
	f.wantEveryEvent(sent)
	if total != 50 {
		t.Errorf("%d messages: b republished what a had checkpointed", total)
	}
	if l := f.lease(b.Owned()[0]); l.Owner != "b" {
		t.Errorf("lease owner %q", l.Owner)
	}
}

// The ETag, not the clock, fences the checkpoint: an owner whose clock says
// its lease still holds, after another instance took it over, has its
// checkpoint rejected and drops the range.
func TestRelay_StaleOwnersCheckpointIsRejected(t *testing.T) {
	f := newFixture(t, 1)
	f.addOrders(10)
	stuck := f.clock.Now() // a's clock barely moves: a paused process, or skew
	var aClock clock
	aClock.now = stuck
	a := f.relay("a", aClock.Now, nil)
	if err := drain(t, a); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	b := f.relay("b", f.clock.Now, nil)
	f.addOrders(10)
	if err := drain(t, b); err != nil || len(b.Owned()) != 1 {
		t.Fatalf("b owns %v, err %v", b.Owned(), err)
	}
	fr := b.Owned()[0]
	bLease := f.lease(fr)
	f.addOrders(5)
	// By a's clock its lease holds for 28s more and needs no renewal, but
	// its next checkpoint is due.
	aClock.Advance(2 * relay.DefaultCheckpointInterval)
	err := a.Step(context.Background())
	if err == nil || len(a.Owned()) != 0 || a.Stats().Lost != 1 {
		t.Fatalf("stale owner a: err %v, owned %v, stats %+v; want its checkpoint rejected and the range dropped", err, a.Owned(), a.Stats())
	}
	if got := f.lease(fr); got.Owner != "b" || got.Continuation != bLease.Continuation {
		t.Errorf("lease after a's stale checkpoint = %+v; want b's, unchanged", got)
	}
	// b goes on from its own checkpoint; a's publishes were duplicates.
	if err := drain(t, b); err != nil {
		t.Fatal(err)
	}
	sent, _ := f.topic.sent()
	f.wantEveryEvent(sent)
}

// TestRelay_ReleaseOfALeaseTakenOverIsNoError: an instance that paused
// past its lease's expiry and is then stopped finds the lease taken over;
// releasing it would be wrong and is no failure: the range is dropped and
// counted, the new owner's lease unchanged.
func TestRelay_ReleaseOfALeaseTakenOverIsNoError(t *testing.T) {
	f := newFixture(t, 1)
	f.addOrders(10)
	stuck := f.clock.Now()
	a := f.relay("a", func() time.Time { return stuck }, nil)
	if err := drain(t, a); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	b := f.relay("b", f.clock.Now, nil)
	if err := drain(t, b); err != nil || len(b.Owned()) != 1 {
		t.Fatalf("b owns %v, err %v", b.Owned(), err)
	}
	fr := b.Owned()[0]
	before := f.lease(fr)
	if err := a.Release(context.Background()); err != nil || len(a.Owned()) != 0 || a.Stats().Lost != 1 {
		t.Fatalf("a.Release = %v, owned %v, stats %+v; want no error and the range dropped as lost", err, a.Owned(), a.Stats())
	}
	if got := f.lease(fr); got != before {
		t.Errorf("lease after a's release = %+v, want b's unchanged %+v", got, before)
	}
}

func TestRelay_TwoInstancesNeverBothOwnARange(t *testing.T) {
	f := newFixture(t, 4)
	// Audit every accepted lease write: it may take a lease only from no
	// one, from its own holder, or after the holder's expiry; a release
	// only by its holder.
	var violations []string
	var audited int
	f.store.audit = func(prev, next relay.Lease) {
		audited++
		switch {
		case next.Owner == "" && prev.Owner != "" && prev.Owner != "a" && prev.Owner != "b":
			violations = append(violations, "release by a stranger")
		case next.Owner != "" && prev.Owner != "" && prev.Owner != next.Owner && f.clock.Now().Before(prev.ExpiresAt):
			violations = append(violations, next.Owner+" took "+next.FeedRange+" from "+prev.Owner+" before it expired")
		}
	}
	short := func(o *relay.Options) { o.LeaseDuration = 3 * time.Second }
	a := f.relay("a", f.clock.Now, short)
	b := f.relay("b", f.clock.Now, short)
	for i := range 60 {
		f.addOrders(3)
		if i%20 < 14 { // a stalls for 6 steps (4.2s) now and then: b takes over
			_ = a.Step(context.Background())
		}
		_ = b.Step(context.Background())
		f.clock.Advance(700 * time.Millisecond)
	}
	for range 10 {
		_ = a.Step(context.Background())
		_ = b.Step(context.Background())
	}
	if len(violations) > 0 || audited == 0 {
		t.Errorf("%d lease writes audited; violations: %v", audited, violations)
	}
	owned := append(a.Owned(), b.Owned()...)
	slices.Sort(owned)
	ranges, _ := f.feed.FeedRanges(context.Background())
	slices.Sort(ranges)
	if !slices.Equal(owned, ranges) {
		t.Errorf("a owns %v, b owns %v; want every range owned once", a.Owned(), b.Owned())
	}
	for _, fr := range a.Owned() {
		if f.lease(fr).Owner != "a" {
			t.Errorf("a believes it owns %s; the lease says %q", fr, f.lease(fr).Owner)
		}
	}
	if a.Stats().Lost == 0 || b.Stats().Acquired <= 0 {
		t.Errorf("no takeover happened: a %+v, b %+v", a.Stats(), b.Stats())
	}
	sent, _ := f.topic.sent()
	f.wantEveryEvent(sent)
}

func TestRelay_SendsInBatches(t *testing.T) {
	t.Run("by count", func(t *testing.T) {
		f := newFixture(t, 1)
		f.addOrders(250)
		r := f.relay("a", f.clock.Now, func(o *relay.Options) { o.PageSize = 750; o.MaxBatchMessages = 100 })
		if err := drain(t, r); err != nil {
			t.Fatal(err)
		}
		if got := f.topic.batchSizes(); !slices.Equal(got, []int{100, 100, 50}) {
			t.Errorf("batch sizes %v, want [100 100 50]", got)
		}
	})
	t.Run("by size, and an event that fits no batch", func(t *testing.T) {
		f := newFixture(t, 1)
		f.addOrders(10)
		var one int
		for _, it := range f.store.Items() {
			if it.ID == order.EventID(f.orders[0]) {
				one = len(it.Body)
			}
		}
		f.topic.maxBytes = 3*one + one/2 // three events per batch
		huge, _ := json.Marshal(map[string]any{"id": "Big:ord-big", "orderId": "ord-big", "type": order.TypeEvent,
			"eventType": "Big", "pad": strings.Repeat("x", 4*one)})
		if _, err := f.store.CreateBatch(context.Background(), "ord-big", []idempotent.Document{{ID: "Big:ord-big", Body: huge}}); err != nil {
			t.Fatal(err)
		}
		r := f.relay("a", f.clock.Now, nil)
		if err := drain(t, r); err != nil {
			t.Fatal(err)
		}
		sizes := f.topic.batchSizes()
		sum := 0
		for _, n := range sizes {
			if n > 3 {
				t.Errorf("batch of %d events over the byte limit", n)
			}
			sum += n
		}
		if sum != 10 || r.Stats().Unpublishable != 1 {
			t.Errorf("sent %d in %v, unpublishable %d; want the 10 events and the oversized one refused", sum, sizes, r.Stats().Unpublishable)
		}
	})
}

func TestRelay_FailedSendIsNotCheckpointed(t *testing.T) {
	f := newFixture(t, 1)
	f.addOrders(5)
	r := f.relay("a", f.clock.Now, nil)
	f.topic.failSends = 1
	if err := r.Step(context.Background()); err == nil {
		t.Fatal("a failed send did not fail the step")
	}
	if st := r.Stats(); st.Checkpoints != 0 || st.Published != 0 {
		t.Fatalf("after a failed send: %+v", st)
	}
	if err := drain(t, r); err != nil {
		t.Fatal(err)
	}
	sent, total := f.topic.sent()
	f.wantEveryEvent(sent)
	if total != 5 {
		t.Errorf("%d sent", total)
	}
}

func TestRelay_RunReleasesItsLeasesAtShutdown(t *testing.T) {
	f := newFixture(t, 2)
	f.addOrders(30)
	r := f.relay("a", f.clock.Now, func(o *relay.Options) { o.PollInterval = time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() { defer wg.Done(); runErr = r.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for r.Stats().Published < 30 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	if runErr != nil {
		t.Fatal(runErr)
	}
	ranges, _ := f.feed.FeedRanges(context.Background())
	for _, fr := range ranges {
		if l := f.lease(fr); l.Owner != "" || l.Continuation == "" {
			t.Errorf("lease after shutdown %+v: want released with its checkpoint", l)
		}
	}
	// Another instance takes over at once, from the checkpoints.
	b := f.relay("b", f.clock.Now, nil)
	if err := drain(t, b); err != nil {
		t.Fatal(err)
	}
	if len(b.Owned()) != 2 || b.Stats().Published != 0 {
		t.Errorf("b owns %v and published %d", b.Owned(), b.Stats().Published)
	}
}

func TestNew_ReportsEveryProblem(t *testing.T) {
	f := newFixture(t, 1)
	_, err := relay.New(nil, f.store, f.topic, relay.Options{Name: "a:b", LeaseDuration: time.Second, CallTimeout: time.Second})
	for _, want := range []string{"needs a change feed", "name", "lease duration"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to mention %q", err, want)
		}
	}
}

// No lease or manifest id is an order id, so the worker, which reads only by
// order id, can never take one for an order.
func TestLeaseIDsAreNeverOrderIDs(t *testing.T) {
	for _, id := range []string{relay.LeaseID("orderrelay", "00000000-100000000"), relay.ManifestID("orderrelay")} {
		if err := order.ValidateOrderID(id); err == nil {
			t.Errorf("%q is a valid order id", id)
		}
	}
}
