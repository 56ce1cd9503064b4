package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/idempotent-consumer/sbcosmos/relay"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The readiness and liveness of the relay as the hooks report its polls:
// ready while it owns or waits for leases and both services answer, not
// ready before its first poll, when the manifest cannot be read, when it
// neither owns nor waits for any lease, when a poll failed and the ping of
// Cosmos DB fails too, when Service Bus refuses a batch, and from the first
// signal on; not live once no poll ended for the stall limit.
func TestRelayHealth(t *testing.T) {
	unreachable := errors.New("dial tcp: connection refused")
	tests := []struct {
		name      string
		steps     []relay.StepReport // reported before the probe; none: no poll ended
		ping, sb  error
		draining  bool
		stalled   bool
		wantReady []string // lines of /readyz; the status follows from "fail"
		wantLive  string
	}{
		{name: "owns leases", steps: []relay.StepReport{{Ranges: 2, Owned: []string{"a", "b"}}},
			wantReady: []string{"ok started", "ok leases", "ok cosmos", "ok servicebus"}},
		{name: "waits for another instance's leases", steps: []relay.StepReport{{Ranges: 2, Waiting: 2}},
			wantReady: []string{"ok leases"}},
		{name: "before the first poll", wantReady: []string{"fail leases: no poll"}},
		{name: "manifest unreadable", steps: []relay.StepReport{{Err: unreachable}}, ping: unreachable,
			wantReady: []string{"fail leases: the manifest", "fail cosmos: ping: dial tcp"}},
		{name: "no lease held or waited for", steps: []relay.StepReport{{Ranges: 2, Err: unreachable}}, ping: unreachable,
			wantReady: []string{"fail leases: none of the 2", "fail cosmos"}},
		{name: "a failed poll while Cosmos DB answers is a Service Bus matter", steps: []relay.StepReport{{Ranges: 1, Owned: []string{"a"}, Err: errors.New("send")}},
			wantReady: []string{"ok leases", "ok cosmos"}},
		{name: "Service Bus refuses a batch", steps: []relay.StepReport{{Ranges: 1, Owned: []string{"a"}}}, sb: unreachable,
			wantReady: []string{"ok cosmos", "fail servicebus: open a message batch: dial tcp"}},
		{name: "draining", steps: []relay.StepReport{{Ranges: 1, Owned: []string{"a"}}}, draining: true,
			wantReady: []string{"fail draining: signal", "ok leases"}},
		{name: "stuck loop", steps: []relay.StepReport{{Ranges: 1, Owned: []string{"a"}}}, stalled: true,
			wantReady: []string{"ok leases"}, wantLive: "fail loop: no poll of the feed ranges ended"},
	}
	cfg := testConfig(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
			state := newRelayState(clock.Now)
			h, err := startHealth(config{}, nil, slog.New(slog.DiscardHandler)) // no address: no listener
			if err != nil {
				t.Fatal(err)
			}
			tel, err := newRelayTelemetry(noop.NewMeterProvider(), "order-events", state)
			if err != nil {
				t.Fatal(err)
			}
			hooks := state.hooks(tel)
			h.watch(state, cfg.stallLimit, func(context.Context) error { return tt.ping }, func(context.Context) error { return tt.sb })
			h.started()
			for _, s := range tt.steps {
				hooks.Stepped(s)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			defer h.draining(ctx)()
			if tt.draining {
				cancel(errors.New("signal: terminated"))
				waitDraining(t, h)
			}
			if tt.stalled {
				clock.Advance(cfg.stallLimit(1) + time.Second)
			}
			code, body := get(t, h, "/readyz")
			wantCode := http.StatusOK
			for _, line := range tt.wantReady {
				if strings.HasPrefix(line, "fail") {
					wantCode = http.StatusServiceUnavailable
				}
				if !strings.Contains(body, line) {
					t.Errorf("/readyz does not say %q:\n%s", line, body)
				}
			}
			if tt.draining || len(tt.steps) == 0 {
				wantCode = http.StatusServiceUnavailable
			}
			if code != wantCode {
				t.Errorf("/readyz = %d, want %d:\n%s", code, wantCode, body)
			}
			code, body = get(t, h, "/livez")
			if tt.wantLive == "" && code != http.StatusOK || tt.wantLive != "" && (code != http.StatusServiceUnavailable || !strings.Contains(body, tt.wantLive)) {
				t.Errorf("/livez = %d %q, want %q", code, body, tt.wantLive)
			}
		})
	}
}

// The stall limit grows with the feed ranges, so that a slow store with
// many ranges is no reason to restart, and is never below ten leases.
func TestStallLimit(t *testing.T) {
	cfg := testConfig(t)
	cfg.LeaseDuration, cfg.CallTimeout, cfg.PollInterval = 30*time.Second, 5*time.Second, time.Second
	if got, want := cfg.stallLimit(1), 10*30*time.Second+time.Second+time.Minute; got != want {
		t.Errorf("stallLimit(1) = %v, want %v", got, want)
	}
	if got, want := cfg.stallLimit(100), 100*8*5*time.Second+time.Second+time.Minute; got != want {
		t.Errorf("stallLimit(100) = %v, want %v", got, want)
	}
}

func waitDraining(t *testing.T, h *relayHealth) {
	t.Helper()
	for range 1000 {
		if err := h.status.Ready(context.Background()); err != nil && strings.Contains(err.Error(), "draining") {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the first signal did not make the relay not ready")
}

func get(t *testing.T, h *relayHealth, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.status.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}
