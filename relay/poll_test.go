package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
)

// The poll rule of Run, tested in a synctest bubble, where time moves only
// when every goroutine waits: the times below are exact, whatever the
// machine's load.

// timedFeed is a change feed that records the time of every read.
type timedFeed struct {
	relay.ChangeFeed
	mu    sync.Mutex
	reads []time.Time
}

func (f *timedFeed) ReadChanges(ctx context.Context, fr, continuation string, maxItems int) ([][]byte, string, error) {
	f.mu.Lock()
	f.reads = append(f.reads, time.Now())
	f.mu.Unlock()
	return f.ChangeFeed.ReadChanges(ctx, fr, continuation, maxItems)
}

// readTimes returns the times of the reads so far.
func (f *timedFeed) readTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.reads...)
}

// timedTopic is a topic that records when each message was first sent.
type timedTopic struct {
	*topic
	mu    sync.Mutex
	first map[string]time.Time
}

func (t *timedTopic) SendBatch(ctx context.Context, b relay.Batch) error {
	if err := t.topic.SendBatch(ctx, b); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range b.(*fakeBatch).msgs {
		if _, ok := t.first[*m.MessageID]; !ok {
			t.first[*m.MessageID] = time.Now()
		}
	}
	return nil
}

func (t *timedTopic) sentAt(id string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.first[id]
	return at, ok
}

// polling is a relay run by Run in a bubble, with the fixture's store and a
// feed and topic that record times.
type polling struct {
	f     *fixture
	feed  *timedFeed
	topic *timedTopic
	stop  func()
}

// rules are the two poll rules: Run's, and the fixed interval of earlier
// versions (relay.SetFixedPoll).
var rules = []struct {
	name  string
	fixed bool
}{{"adaptive", false}, {"fixed", true}}

// startPolling starts Run on a fixture of ranges feed ranges, with the
// default poll interval (1s) and a lease of 30s (renewed every 10s, each
// renewal a change in the feed), page size 50. Call stop before the bubble
// ends.
func startPolling(t *testing.T, ranges int, fixed bool, before func(*fixture)) *polling {
	f := newFixture(t, ranges)
	if before != nil {
		before(f)
	}
	p := &polling{f: f, feed: &timedFeed{ChangeFeed: f.feed}, topic: &timedTopic{topic: f.topic, first: map[string]time.Time{}}}
	r, err := relay.New(p.feed, f.store, p.topic, ordersOptions(relay.Options{Name: "orderrelay", Owner: "a", LeaseDuration: 30 * time.Second,
		CallTimeout: time.Second, PageSize: 50, Logger: discard()}))
	if err != nil {
		t.Fatal(err)
	}
	if fixed {
		relay.SetFixedPoll(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	p.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	return p
}

// TestRun_IdleMinuteReadsAsOftenAsTheFixedInterval: while no event comes,
// Run reads each feed range once per PollInterval, as the fixed interval
// did: 60 reads per range in a minute, the relay's own lease renewals
// (changes in the feed, every 10s) included. After a burst it is back at
// that rate within two seconds.
func TestRun_IdleMinuteReadsAsOftenAsTheFixedInterval(t *testing.T) {
	const ranges = 2
	for _, rule := range rules {
		for _, burst := range []int{0, 200} {
			t.Run(fmt.Sprintf("%s/burst=%d", rule.name, burst), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					p := startPolling(t, ranges, rule.fixed, func(f *fixture) { f.addOrders(burst) })
					defer p.stop()
					// Off the second marks at which the relay polls, so
					// that no read falls on an end of the window.
					time.Sleep(2500 * time.Millisecond)
					synctest.Wait()
					if sent, _ := p.topic.sent(); len(sent) != burst {
						t.Fatalf("%d of %d events published before the idle minute", len(sent), burst)
					}
					from := len(p.feed.readTimes())
					time.Sleep(time.Minute)
					synctest.Wait()
					if got, want := len(p.feed.readTimes())-from, 60*ranges; got != want {
						t.Errorf("%d feed reads in an idle minute, want %d (one per range per PollInterval)", got, want)
					}
				})
			})
		}
	}
}

// TestRun_BurstIsDrainedWithoutWaiting: a backlog of many pages is
// published without a pause between its pages (time does not move until
// every event is out), under either rule.
func TestRun_BurstIsDrainedWithoutWaiting(t *testing.T) {
	for _, rule := range rules {
		t.Run(rule.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				p := startPolling(t, 2, rule.fixed, func(f *fixture) { f.addOrders(400) }) // 1200 documents, 24 pages or more
				defer p.stop()
				synctest.Wait()
				sent, _ := p.topic.sent()
				p.f.wantEveryEvent(sent)
				if d := time.Since(start); d != 0 {
					t.Errorf("the burst took %v of waits", d)
				}
				if n := len(p.feed.readTimes()); n < 24 {
					t.Errorf("%d reads for 1200 documents in pages of 50", n)
				}
			})
		})
	}
}

// TestRun_BacksOffFromAThirtySecondOfTheInterval pins the waits after the
// last page that published events: PollInterval/32 until four polls in a
// row found nothing (the first finds the checkpoint's lease write, no
// event), then doubling to PollInterval; under the fixed rule PollInterval
// at once.
func TestRun_BacksOffFromAThirtySecondOfTheInterval(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, tt := range []struct {
		fixed bool
		want  []time.Duration // the gaps between reads after the reads at the start
	}{
		{false, []time.Duration{ms(31.25), ms(31.25), ms(31.25), ms(31.25), ms(62.5), ms(125), ms(250), ms(500), time.Second, time.Second, time.Second}},
		{true, []time.Duration{time.Second, time.Second, time.Second}},
	} {
		t.Run(fmt.Sprintf("fixed=%v", tt.fixed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				p := startPolling(t, 1, tt.fixed, func(f *fixture) { f.addOrders(30) }) // 90 documents: a full page, then 40
				defer p.stop()
				time.Sleep(5 * time.Second)
				synctest.Wait()
				reads := p.feed.readTimes()
				atStart := 0
				for atStart < len(reads) && reads[atStart].Equal(start) {
					atStart++
				}
				// A full page, then the rest with events; then the waits.
				if want := 2; atStart != want {
					t.Errorf("%d reads at the start, want %d", atStart, want)
				}
				var gaps []time.Duration
				for i := atStart; i < len(reads) && len(gaps) < len(tt.want); i++ {
					gaps = append(gaps, reads[i].Sub(reads[i-1]))
				}
				if fmt.Sprint(gaps) != fmt.Sprint(tt.want) {
					t.Errorf("waits between polls\n got %v\nwant %v", gaps, tt.want)
				}
			})
		})
	}
}

// TestRun_TrickleIsPublishedWithinTwoBackoffSteps: orders written one every
// 30ms (33 orders/s) from the relay's start are each published within
// PollInterval/16 (62.5ms) of their write, those of its first second too
// (it starts with the backoff, not idle), where the fixed rule makes most
// wait for the next second.
func TestRun_TrickleIsPublishedWithinTwoBackoffSteps(t *testing.T) {
	for _, rule := range rules {
		t.Run(rule.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := startPolling(t, 2, rule.fixed, nil)
				defer p.stop()
				var ids []string
				written := map[string]time.Time{}
				for range 200 {
					time.Sleep(30 * time.Millisecond)
					p.f.addOrders(1)
					id := order.EventID(p.f.orders[len(p.f.orders)-1])
					ids = append(ids, id)
					written[id] = time.Now()
				}
				time.Sleep(2 * time.Second)
				synctest.Wait()
				first, ok := p.topic.sentAt(ids[0])
				if !ok || first.Sub(written[ids[0]]) > time.Second {
					t.Fatalf("the first event was not published within PollInterval of its write")
				}
				if !rule.fixed && first.Sub(written[ids[0]]) > time.Second/16 {
					t.Errorf("the first event, written 30ms after the start, was published %v after its write", first.Sub(written[ids[0]]))
				}
				var worst time.Duration
				measured, late := 0, 0
				for _, id := range ids {
					at, ok := p.topic.sentAt(id)
					if !ok {
						t.Fatalf("event %s never published", id)
					}
					if rule.fixed && !written[id].After(first) {
						continue // written before the fixed rule's first poll found one
					}
					measured++
					d := at.Sub(written[id])
					worst = max(worst, d)
					if d > time.Second/16 {
						late++
					}
				}
				if measured < 150 {
					t.Fatalf("only %d events written after the first publish", measured)
				}
				switch {
				case !rule.fixed && late > 0:
					t.Errorf("%d of %d events published more than 62.5ms after their write (worst %v)", late, measured, worst)
				case rule.fixed && late < measured*9/10:
					t.Errorf("fixed interval: only %d of %d events waited over 62.5ms (worst %v): the comparison shows nothing", late, measured, worst)
				}
				t.Logf("%s: worst delay %v, %d of %d over 62.5ms", rule.name, worst, late, measured)
			})
		})
	}
}

// poisonTopic is a topic that refuses every batch carrying one message.
type poisonTopic struct {
	*topic
	poison string
	mu     sync.Mutex
	fails  int
}

func (t *poisonTopic) SendBatch(ctx context.Context, b relay.Batch) error {
	for _, m := range b.(*fakeBatch).msgs {
		if *m.MessageID == t.poison {
			t.mu.Lock()
			t.fails++
			t.mu.Unlock()
			return errors.New("fake: the topic refuses this batch")
		}
	}
	return t.topic.SendBatch(ctx, b)
}

// TestRun_FailedPollWaits: a poll that sent some batches of a page and
// then failed is no sign of work: Run waits as after an empty poll instead
// of republishing the page at once in a loop.
func TestRun_FailedPollWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1)
		f.addOrders(10)
		feed := &timedFeed{ChangeFeed: f.feed}
		tp := &poisonTopic{topic: f.topic, poison: order.EventID(f.orders[5])}
		r, err := relay.New(feed, f.store, tp, ordersOptions(relay.Options{Name: "orderrelay", Owner: "a", CallTimeout: time.Second,
			MaxBatchMessages: 1, Logger: discard()}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(9500 * time.Millisecond)
		synctest.Wait()
		tp.mu.Lock()
		fails := tp.fails
		tp.mu.Unlock()
		// The backoff from the start: polls at 0, 31.25ms, 62.5ms,
		// 93.75ms, 125ms, 187.5ms, 312.5ms, 562.5ms and 1062.5ms, then once
		// per PollInterval: 16 in 9.5s, as many as with no event at all.
		if n := len(feed.readTimes()); n != 16 || fails != 16 {
			t.Errorf("%d reads and %d refused sends in 9.5s, want 16 and 16 (the backoff's, then one poll per PollInterval)", n, fails)
		}
		if r.Stats().Published == 0 {
			t.Error("no batch before the refused one was sent: the test shows nothing")
		}
		cancel()
		<-done
	})
}
