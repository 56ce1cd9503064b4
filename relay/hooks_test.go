package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/relay"
)

// hookLog records what the hooks were told.
type hookLog struct {
	published map[string]int // feed range -> events
	lags      map[string]time.Duration
	acquired  map[string]string // feed range -> previous owner
	takeovers int
	lost      []string
	steps     []relay.StepReport
}

func (h *hookLog) hooks() relay.Hooks {
	h.published, h.lags, h.acquired = map[string]int{}, map[string]time.Duration{}, map[string]string{}
	return relay.Hooks{
		Published: func(fr string, n int) { h.published[fr] += n },
		Read:      func(fr string, lag time.Duration) { h.lags[fr] = lag },
		Acquired: func(fr, prev string, reclaimed bool) {
			h.acquired[fr] = prev
			if reclaimed {
				h.takeovers++
			}
		},
		Lost:    func(fr string) { h.lost = append(h.lost, fr) },
		Stepped: func(s relay.StepReport) { h.steps = append(h.steps, s) },
	}
}

func (h *hookLog) last() relay.StepReport { return h.steps[len(h.steps)-1] }

// The hooks see what the relay does: the events published per range, how
// far behind the feed it is (the age of the newest change of a full page, 0
// once a page is not full), a takeover of an expired lease, a lost lease, and after each
// step the leases owned and waited for. Their counts agree with Stats.
func TestRelay_HooksSeePublishesLagAndTakeovers(t *testing.T) {
	f := newFixture(t, 2)
	f.addOrders(30) // written at the fixture clock's now
	var ha, hb hookLog
	a := f.relay("a", f.clock.Now, func(o *relay.Options) { o.Hooks = ha.hooks(); o.PageSize = 10 })
	f.clock.Advance(7 * time.Second)
	if err := a.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := ha.last(); s.Ranges != 2 || len(s.Owned) != 2 || s.Waiting != 0 || s.Err != nil {
		t.Errorf("a's first step: %+v, want 2 ranges owned", s)
	}
	for fr, lag := range ha.lags {
		if lag != 7*time.Second {
			t.Errorf("lag of %s after reading changes 7s old: %v", fr, lag)
		}
	}
	if err := drain(t, a); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range ha.published {
		total += n
	}
	if st := a.Stats(); int64(total) != st.Published || total != 30 {
		t.Errorf("hooks saw %d published, Stats %d, want 30", total, st.Published)
	}
	if err := a.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	for fr, lag := range ha.lags {
		if lag != 0 {
			t.Errorf("lag of %s once caught up: %v, want 0", fr, lag)
		}
	}
	for fr, prev := range ha.acquired {
		if prev != "" {
			t.Errorf("a acquired %s from %q, want a free lease", fr, prev)
		}
	}

	// b waits while a's leases hold, then takes them over.
	b := f.relay("b", f.clock.Now, func(o *relay.Options) { o.Hooks = hb.hooks() })
	if err := b.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := hb.last(); s.Ranges != 2 || len(s.Owned) != 0 || s.Waiting != 2 {
		t.Errorf("b beside a live a: %+v, want waiting for 2", s)
	}
	f.clock.Advance(31 * time.Second)
	if err := b.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := hb.last(); len(s.Owned) != 2 || s.Waiting != 0 {
		t.Errorf("b after a's leases expired: %+v", s)
	}
	for fr, prev := range hb.acquired {
		if prev != "a" {
			t.Errorf("b acquired %s from %q, want a takeover from a", fr, prev)
		}
	}
	if st := b.Stats(); st.Reclaimed != 2 || st.Acquired != 2 || hb.takeovers != 2 || ha.takeovers != 0 {
		t.Errorf("b's stats %+v, want 2 acquired, both taken over", st)
	}

	// a, resuming, finds its leases gone.
	f.addOrders(1)
	if err := a.Step(context.Background()); err == nil {
		t.Error("a's step after losing its leases returned no error")
	}
	if len(ha.lost) == 0 || len(ha.last().Owned) != 0 {
		t.Errorf("a lost %v and owns %v, want its leases lost", ha.lost, ha.last().Owned)
	}
}

// A relay that cannot read its manifest reports a step with no ranges and
// the error.
func TestRelay_HooksSeeAFailedManifest(t *testing.T) {
	f := newFixture(t, 1)
	var h hookLog
	r, err := relay.New(failingFeed{}, f.store, f.topic, ordersOptions(relay.Options{Name: "orderrelay", Owner: "a", Logger: discard(), Hooks: h.hooks()}))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Step(context.Background())
	if err == nil || len(h.steps) != 1 || h.last().Ranges != 0 || h.last().Err == nil {
		t.Errorf("step with a failing store: %v, reports %+v", err, h.steps)
	}
}

// failingFeed is a change feed whose every call fails.
type failingFeed struct{}

func (failingFeed) FeedRanges(context.Context) ([]string, error) {
	return nil, errors.New("unreachable")
}
func (failingFeed) ReadChanges(context.Context, string, string, int) ([][]byte, string, error) {
	return nil, "", errors.New("unreachable")
}
