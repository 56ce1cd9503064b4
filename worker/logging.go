package worker

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// record counts and logs one delivery with the worker's keys (see Logs in
// the package documentation), under ctx, which carries what the Hook's
// Start put in it, if there is a Hook.
func (w *Worker) record(ctx context.Context, m *azservicebus.ReceivedMessage, rep Report) {
	res := rep.Result
	// slog.Attr values on the stack: a disabled level costs no allocation.
	var buf [10]slog.Attr
	attrs := buf[:0]
	if res.Key != "" {
		attrs = append(attrs, slog.String(w.opts.KeyAttr, res.Key))
	}
	attrs = append(attrs, slog.String("message_id", m.MessageID), slog.Uint64("delivery_count", uint64(m.DeliveryCount)),
		slog.String("outcome", res.Outcome.String()), slog.Int64("duration_ms", rep.Duration.Milliseconds()))
	if res.Reason != "" {
		attrs = append(attrs, slog.String("reason", res.Reason))
	}
	if res.Description != "" {
		attrs = append(attrs, slog.String("description", res.Description))
	}
	if res.Resumed {
		attrs = append(attrs, slog.Bool(w.opts.ResumedAttr, true))
	}
	w.outcomes.add(res.Outcome)
	level, msg := slog.LevelInfo, "processed"
	switch res.Outcome.Settlement() {
	case idempotent.Complete:
	case idempotent.DeadLetter:
		w.deadLettered.Add(1)
		level, msg = slog.LevelWarn, "dead-lettered"
		if res.Outcome == idempotent.Mismatch {
			// An id reused for other content is the producer's bug: alert.
			level = slog.LevelError
		}
	default:
		w.retried.Add(1)
		level, msg = slog.LevelWarn, "abandoned for redelivery"
		switch {
		case rep.CutOff:
			w.cutOff.Add(1)
			msg = "cut off by shutdown: abandoned"
		case rep.Scheduled:
			w.scheduled.Add(1)
			level, msg = slog.LevelInfo, "scheduled for a delayed retry"
			attrs = append(attrs, slog.Int(logKeyRetryAttempt, rep.RetryAttempt), slog.Int64(logKeyRetryDelay, rep.RetryDelay.Milliseconds()))
		case rep.ScheduleErr != nil:
			w.scheduleFailed.Add(1)
			msg = "scheduling a delayed retry failed: abandoned for redelivery"
			attrs = append(attrs, slog.String("error", rep.ScheduleErr.Error()))
		case w.wantsRetry(res) && !rep.LockLost:
			msg = "delayed retries exhausted: abandoned for redelivery"
		}
		if !rep.CutOff && rep.ScheduleErr == nil && res.Err != nil {
			attrs = append(attrs, slog.String("error", res.Err.Error()))
		}
	}
	if rep.LockLost {
		w.lockLost.Add(1)
		w.logLine(ctx, slog.LevelWarn, "lock lost while handling: not settled; the redelivery will be a duplicate", attrs)
		return
	}
	w.logLine(ctx, level, msg, attrs)
	if rep.SettleErr != nil {
		w.settleFailed.Add(1)
		if isLockLost(rep.SettleErr) {
			w.lockLost.Add(1)
		}
		w.logLine(ctx, slog.LevelWarn, "settlement failed; the message will be redelivered and must then be a duplicate", append(attrs, slog.String("error", rep.SettleErr.Error())))
	}
}

// Log keys of a delivery retried by a scheduled copy: the copy's attempt
// and its delay.
const (
	logKeyRetryAttempt = "retry_attempt"
	logKeyRetryDelay   = "retry_delay_ms"
)

// logLine logs one delivery's line as Logger.LogAttrs does, except that the
// record carries no program counter: LogAttrs walks the stack for one
// (runtime.Callers) on every enabled record, for a source location that
// only a handler with AddSource reads, and the worker's handlers never
// write one (the line's keys say which delivery it is). That walk cost
// about a quarter of the per-message line. A disabled level costs a call
// to Enabled.
func (w *Worker) logLine(ctx context.Context, level slog.Level, msg string, attrs []slog.Attr) {
	h := w.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r)
}

// startSummary logs a summary every SummaryInterval; the returned function
// stops it and logs the final summary.
func (w *Worker) startSummary() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	if w.opts.SummaryInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(w.opts.SummaryInterval)
			defer t.Stop()
			var prev Stats // a Worker runs once: everything counted so far is in the first interval
			prevAt := start
			for {
				select {
				case <-done:
					return
				case now := <-t.C:
					s := w.Stats()
					w.logSummary("summary", prev, s, now.Sub(prevAt), false)
					prev, prevAt = s, now
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
		w.logSummary("final summary", Stats{}, w.Stats(), time.Since(start), true)
	}
}

// outcomeAttrs are the counts by outcome of a summary: every outcome of
// package idempotent, counted or not, under its name, and any other outcome
// counted.
func outcomeAttrs(counts map[idempotent.Outcome]int64) []any {
	var attrs []any
	for o := idempotent.Outcome(1); o < 32; o++ {
		name := o.String()
		if n, ok := counts[o]; ok || !strings.HasPrefix(name, "Outcome(") {
			attrs = append(attrs, name, n)
		}
	}
	others := make([]idempotent.Outcome, 0)
	for o := range counts {
		if o < 1 || o >= 32 {
			others = append(others, o)
		}
	}
	slices.Sort(others)
	for _, o := range others {
		attrs = append(attrs, o.String(), counts[o])
	}
	return attrs
}

// logSummary logs the totals in cur and what changed since prev, over d.
// It logs at WARN when the change shows trouble, else at INFO.
func (w *Worker) logSummary(msg string, prev, cur Stats, d time.Duration, final bool) {
	delta := Stats{
		Received: cur.Received - prev.Received, Retried: cur.Retried - prev.Retried,
		DeadLettered: cur.DeadLettered - prev.DeadLettered,
		LockLost:     cur.LockLost - prev.LockLost, SettleFailed: cur.SettleFailed - prev.SettleFailed,
		Renewed: cur.Renewed - prev.Renewed, RenewFailed: cur.RenewFailed - prev.RenewFailed,
		ReceiveFailed: cur.ReceiveFailed - prev.ReceiveFailed,
	}
	processed := cur.Processed() - prev.Processed()
	secs := max(d.Seconds(), 1e-3)
	attrs := []any{"received", cur.Received}
	attrs = append(attrs, outcomeAttrs(cur.Outcomes)...)
	attrs = append(attrs,
		"dead_lettered", cur.DeadLettered, "retried", cur.Retried, "lock_lost", cur.LockLost, "settle_failed", cur.SettleFailed,
		"cut_off", cur.CutOff, "renewed", cur.Renewed, "renew_failed", cur.RenewFailed, "receive_failed", cur.ReceiveFailed,
		"scheduled", cur.Scheduled, "schedule_failed", cur.ScheduleFailed,
		"in_flight", w.inFlight.Load(),
		slog.Group("interval",
			"length", d.Round(time.Millisecond).String(),
			"received", delta.Received, "processed", processed,
			"received_per_s", round1(float64(delta.Received)/secs), "processed_per_s", round1(float64(processed)/secs),
			"retried", delta.Retried, "dead_lettered", delta.DeadLettered, "lock_lost", delta.LockLost,
			"renewed", delta.Renewed, "renew_failed", delta.RenewFailed, "settle_failed", delta.SettleFailed,
			"receive_failed", delta.ReceiveFailed),
	)
	if w.opts.RequestCharge != nil {
		attrs = append(attrs, "request_units", w.opts.RequestCharge())
	}
	if w.opts.CacheStats != nil {
		// Cumulative: the cache counts since the handler was made.
		cs := w.opts.CacheStats()
		attrs = append(attrs, slog.Group("cache", "hits", cs.Hits, "misses", cs.Misses, "hit_rate", round3(cs.HitRate()), "entries", cs.Entries))
	}
	trouble := delta.Retried+delta.DeadLettered+delta.LockLost+delta.RenewFailed+delta.SettleFailed+delta.ReceiveFailed > 0
	for _, x := range []any{w.gate, w.opts.Hook} {
		if s, ok := x.(Summarizer); ok {
			more, bad := s.Summary(final)
			for _, a := range more {
				attrs = append(attrs, a)
			}
			trouble = trouble || bad
		}
	}
	level := slog.LevelInfo
	if trouble {
		level = slog.LevelWarn
	}
	w.log.Log(context.Background(), level, msg, attrs...)
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
