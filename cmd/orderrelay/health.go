package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/health"
	"github.com/idempotent-consumer/sbcosmos/relay"
)

// The relay's health, served on RELAY_HEALTH_ADDR:
//
//   - /startupz passes once the start-up checks passed: the store check,
//     the change feed check and the opening of the topic's link.
//   - /readyz passes after that while the relay is not shutting down (it
//     fails from the first signal on), owns or is waiting for leases (its
//     last poll read the manifest of feed ranges, and holds at least one
//     lease or found the others' held by live instances), and can reach
//     both services: Cosmos DB (the last poll met no error, or else a ping
//     of the orders container answers) and Service Bus (the sender opens a
//     message batch, which reuses the open link and reconnects a broken
//     one).
//   - /livez fails when no poll of the feed ranges has ended for
//     stallLimit: the relay's loop is stuck, and a restart is the cure.

// healthShutdownTimeout bounds the health listener's shutdown.
const healthShutdownTimeout = 5 * time.Second

// relayState is what the relay's hooks reported, for its health and its
// metrics. Safe for concurrent use: the hooks write it from the relay's
// goroutine, the probes and the metric callbacks read it from others.
type relayState struct {
	mu      sync.Mutex
	now     func() time.Time
	last    relay.StepReport // of the last poll
	steps   int64            // polls that ended
	stepped time.Time        // when the last poll ended, or when the state was made
	lags    map[string]time.Duration
}

func newRelayState(now func() time.Time) *relayState {
	return &relayState{now: now, stepped: now(), lags: map[string]time.Duration{}}
}

// hooks returns the relay hooks that keep s, calling tel's too.
func (s *relayState) hooks(tel *relayTelemetry) relay.Hooks {
	h := tel.hooks()
	h.Read = func(fr string, lag time.Duration) {
		s.mu.Lock()
		s.lags[fr] = lag
		s.mu.Unlock()
	}
	h.Stepped = func(r relay.StepReport) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.last, s.stepped = r, s.now()
		s.steps++
		for fr := range s.lags { // a range no longer held has no lag of this instance's
			if !containsString(r.Owned, fr) {
				delete(s.lags, fr)
			}
		}
	}
	return h
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// snapshot returns the last poll's report, how many polls ended and when
// the last one did.
func (s *relayState) snapshot() (relay.StepReport, int64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.steps, s.stepped
}

// lagsOwned returns the lag of each feed range held.
func (s *relayState) lagsOwned() map[string]time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Duration, len(s.lags))
	for fr, d := range s.lags {
		out[fr] = d
	}
	return out
}

// checkLeases is the "leases" readiness check.
func (s *relayState) checkLeases(context.Context) error {
	last, steps, _ := s.snapshot()
	switch {
	case steps == 0:
		return errors.New("no poll of the feed ranges has ended yet")
	case last.Ranges == 0:
		return fmt.Errorf("the manifest of feed ranges cannot be read or written: %v", last.Err)
	case len(last.Owned) == 0 && last.Waiting == 0:
		return fmt.Errorf("none of the %d feed ranges' leases is held or waited for: %v", last.Ranges, last.Err)
	}
	return nil
}

// checkCosmos is the "cosmos" readiness check: the last poll met no error,
// or else ping answers.
func (s *relayState) checkCosmos(ping func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if last, steps, _ := s.snapshot(); steps > 0 && last.Err == nil {
			return nil
		}
		if err := ping(ctx); err != nil {
			return fmt.Errorf("ping: %w", err)
		}
		return nil
	}
}

// checkLoop is the "loop" liveness check: it fails when no poll ended for
// limit(the number of feed ranges).
func (s *relayState) checkLoop(limit func(ranges int) time.Duration) func(context.Context) error {
	return func(context.Context) error {
		last, _, at := s.snapshot()
		if d, limit := s.now().Sub(at), limit(last.Ranges); d > limit {
			return fmt.Errorf("no poll of the feed ranges ended for %v (limit %v): the relay's loop is stuck", d.Round(time.Second), limit)
		}
		return nil
	}
}

// stallLimit is how long the relay's loop may go without ending a poll
// before /livez fails: a poll makes a few calls per feed range, each bounded
// by the call timeout, and waits the poll interval between polls; a lease
// lasts several call timeouts. Ten lease durations (or eight call timeouts
// per range, if more) and a minute leave room for a slow store without ever
// restarting a relay that merely waits.
func (c *config) stallLimit(ranges int) time.Duration {
	perPoll := time.Duration(max(ranges, 1)) * 8 * c.CallTimeout
	return max(10*c.LeaseDuration, perPoll) + c.PollInterval + time.Minute
}

// relayHealth is the relay's health state and, when an address is
// configured, its listener.
type relayHealth struct {
	status *health.Status
	srv    *health.Server // nil without RELAY_HEALTH_ADDR
	log    *slog.Logger
}

// startHealth creates the health state and, if cfg.HealthAddr is set,
// starts its listener, serving metrics on /metrics when it is not nil.
func startHealth(cfg config, metrics http.Handler, logger *slog.Logger) (*relayHealth, error) {
	h := &relayHealth{status: health.NewStatus(), log: logger}
	if cfg.HealthAddr == "" {
		return h, nil
	}
	srv, err := health.Listen(cfg.HealthAddr, h.status.Handler(metrics), logger)
	if err != nil {
		return nil, fmt.Errorf("RELAY_HEALTH_ADDR (-health-addr): %w", err)
	}
	h.srv = srv
	logger.Info("health probes listening", "addr", srv.Addr().String(), "paths", "/livez /readyz /startupz", "metrics", metrics != nil)
	return h, nil
}

// watch adds the checks of the running relay: its leases, its loop, and
// the two services, Cosmos DB through ping and Service Bus through
// openBatch.
func (h *relayHealth) watch(s *relayState, loopLimit func(ranges int) time.Duration, ping, openBatch func(context.Context) error) {
	h.status.AddLive("loop", s.checkLoop(loopLimit))
	h.status.AddReady("leases", s.checkLeases)
	h.status.AddReady("cosmos", s.checkCosmos(ping))
	h.status.AddReady("servicebus", func(ctx context.Context) error {
		if err := openBatch(ctx); err != nil {
			return fmt.Errorf("open a message batch: %s", strings.TrimSpace(err.Error()))
		}
		return nil
	})
}

// started records that the start-up checks passed.
func (h *relayHealth) started() { h.status.Started() }

// draining turns /readyz not ready at the first signal.
func (h *relayHealth) draining(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { h.status.Draining(context.Cause(ctx).Error()) })
}

// stop shuts the listener down within healthShutdownTimeout; after a second
// signal it returns at once (the process exits).
func (h *relayHealth) stop(runCtx context.Context) {
	if h.srv == nil || cli.Force(runCtx).Err() != nil {
		return
	}
	if err := h.srv.Shutdown(healthShutdownTimeout); err != nil {
		h.log.Warn("health listener shutdown", "error", err)
	}
}
