package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// checkNoDurations fails the test for any attribute logged as a
// time.Duration, which JSON handlers write as raw nanoseconds.
func checkNoDurations(t *testing.T, logs *workertest.Capture) {
	t.Helper()
	for _, r := range logs.Records() {
		for k, v := range r.Attrs {
			if v.Kind() == slog.KindDuration {
				t.Errorf("record %q logs %s as a time.Duration (raw nanoseconds in JSON)", r.Msg, k)
			}
		}
	}
}

// deliveryRecord returns the one record about message id that is not a
// summary.
func deliveryRecord(t *testing.T, logs *workertest.Capture, id string) workertest.Record {
	t.Helper()
	var out []workertest.Record
	for _, r := range logs.Records() {
		if v, ok := r.Attrs["message_id"]; ok && v.String() == id {
			out = append(out, r)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d records for message %s, want 1: %+v", len(out), id, out)
	}
	return out[0]
}

func TestOutcomeLogs(t *testing.T) {
	base := []string{"message_id", "delivery_count", "outcome", "duration_ms"}
	tests := []struct {
		res     idempotent.Result
		level   slog.Level
		msg     string
		keys    []string // besides base
		without []string
		stat    func(worker.Stats) int64
	}{
		{idempotent.Result{Outcome: idempotent.Created, Key: "o1"}, slog.LevelInfo, "processed", []string{"entity_key"}, []string{"error", "reason"},
			func(s worker.Stats) int64 { return s.Outcomes[idempotent.Created] }},
		{idempotent.Result{Outcome: idempotent.Duplicate, Key: "o1"}, slog.LevelInfo, "processed", []string{"entity_key"}, []string{"effect_resumed"},
			func(s worker.Stats) int64 { return s.Outcomes[idempotent.Duplicate] }},
		{idempotent.Result{Outcome: idempotent.Duplicate, Key: "o1", Resumed: true}, slog.LevelInfo, "processed", []string{"entity_key", "effect_resumed"}, nil,
			func(s worker.Stats) int64 { return s.Outcomes[idempotent.Duplicate] }},
		{idempotent.Result{Outcome: idempotent.Applied, Key: "o1"}, slog.LevelInfo, "processed", []string{"entity_key"}, nil,
			func(s worker.Stats) int64 { return s.Outcomes[idempotent.Applied] }},
		{idempotent.Result{Outcome: idempotent.Stale, Key: "o1"}, slog.LevelInfo, "processed", []string{"entity_key"}, nil,
			func(s worker.Stats) int64 { return s.Outcomes[idempotent.Stale] }},
		{idempotent.Result{Outcome: idempotent.Ignored, Key: "o1", Reason: idempotent.ReasonUnsupportedMessage}, slog.LevelInfo, "processed", []string{"entity_key", "reason"}, []string{"error"},
			func(s worker.Stats) int64 { return s.Outcomes[idempotent.Ignored] }},
		{idempotent.Result{Outcome: idempotent.Mismatch, Key: "o1", Reason: order.ReasonOrderIDReused, Description: "hashes differ"}, slog.LevelError, "dead-lettered",
			[]string{"entity_key", "reason", "description"}, nil, func(s worker.Stats) int64 { return s.Outcomes[idempotent.Mismatch] }},
		{idempotent.Result{Outcome: idempotent.Invalid, Reason: idempotent.ReasonInvalidMessage, Description: "not JSON"}, slog.LevelWarn, "dead-lettered",
			[]string{"reason", "description"}, []string{"entity_key"}, func(s worker.Stats) int64 { return s.Outcomes[idempotent.Invalid] }},
		{idempotent.Result{Outcome: idempotent.Transient, Key: "o1", Reason: idempotent.ReasonStoreUnavailable, Err: errors.New("503")}, slog.LevelWarn, "abandoned for redelivery",
			[]string{"entity_key", "reason", "error"}, nil, func(s worker.Stats) int64 { return s.Retried }},
		// An outcome the worker does not know is retried, never lost,
		// and counted under its own value.
		{idempotent.Result{Outcome: idempotent.Outcome(42), Key: "o1"}, slog.LevelWarn, "abandoned for redelivery",
			[]string{"entity_key"}, nil, func(s worker.Stats) int64 { return s.Outcomes[42] }},
	}
	for _, tt := range tests {
		t.Run(tt.res.Outcome.String(), func(t *testing.T) {
			r := workertest.NewReceiver("m1")
			done := workertest.SettledN(r, 1)
			logs := workertest.NewCapture(slog.LevelDebug)
			w, err := worker.New(r, worker.HandlerFunc(func(context.Context, idempotent.Message) idempotent.Result { return tt.res }),
				slog.New(logs), worker.Options{RetryBackoff: -1, SummaryInterval: -1, ReceiveDrain: -1})
			if err != nil {
				t.Fatal(err)
			}
			stop := workertest.Start(t, w)
			workertest.Wait(t, done, "settlement")
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			rec := deliveryRecord(t, logs, "m1")
			if rec.Level != tt.level || rec.Msg != tt.msg {
				t.Errorf("logged %v %q, want %v %q", rec.Level, rec.Msg, tt.level, tt.msg)
			}
			for _, k := range append(base, tt.keys...) {
				if _, ok := rec.Attrs[k]; !ok {
					t.Errorf("record lacks %s: %+v", k, rec.Attrs)
				}
			}
			for _, k := range tt.without {
				if _, ok := rec.Attrs[k]; ok {
					t.Errorf("record has %s: %+v", k, rec.Attrs)
				}
			}
			// A delivery's line carries its time and no program counter:
			// finding one walks the stack on every message, for a source
			// location no handler of the worker writes.
			if rec.Time.IsZero() || rec.PC != 0 {
				t.Errorf("record time %v, pc %#x: want a time and no pc", rec.Time, rec.PC)
			}
			if got := rec.Attrs["outcome"].String(); got != tt.res.Outcome.String() {
				t.Errorf("outcome = %q, want %q", got, tt.res.Outcome)
			}
			if n := tt.stat(w.Stats()); n != 1 {
				t.Errorf("the outcome's counter is %d, want 1: %+v", n, w.Stats())
			}
			for _, r := range logs.Records() {
				if strings.Contains(r.Msg, "order created") {
					t.Errorf("record %q: outcome messages must be neutral (an inbox consumer creates no order)", r.Msg)
				}
			}
			checkNoDurations(t, logs)
		})
	}
}

// TestDeliveryLogKeys: the caller names the log keys of Result.Key and
// Result.Resumed, so that a deployment keeps the names its queries read.
func TestDeliveryLogKeys(t *testing.T) {
	r := workertest.NewReceiver("m1")
	done := workertest.SettledN(r, 1)
	logs := workertest.NewCapture(slog.LevelDebug)
	w, err := worker.New(r, worker.HandlerFunc(func(context.Context, idempotent.Message) idempotent.Result {
		return idempotent.Result{Outcome: idempotent.Created, Key: "r-1", Resumed: true}
	}), slog.New(logs), worker.Options{SummaryInterval: -1, ReceiveDrain: -1, KeyAttr: "refund_id", ResumedAttr: "refund_resumed"})
	if err != nil {
		t.Fatal(err)
	}
	stop := workertest.Start(t, w)
	workertest.Wait(t, done, "settlement")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	rec := deliveryRecord(t, logs, "m1")
	if rec.Attrs["refund_id"].String() != "r-1" || !rec.Attrs["refund_resumed"].Bool() {
		t.Errorf("record %+v: want refund_id r-1 and refund_resumed true", rec.Attrs)
	}
	for _, k := range []string{"entity_key", "effect_resumed"} {
		if _, ok := rec.Attrs[k]; ok {
			t.Errorf("record %+v has the default key %s", rec.Attrs, k)
		}
	}
}

// TestCutOffByShutdownIsNotAnOutage: a handler the shutdown grace cancels
// returns what a cancelled payment call returns (PaymentUnavailable,
// context canceled); it must be logged as cut off by shutdown, not as an
// outage, and still be abandoned.
func TestCutOffByShutdownIsNotAnOutage(t *testing.T) {
	r := workertest.NewReceiver("stuck")
	entered := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		close(entered)
		<-ctx.Done()
		return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: order.ReasonPaymentUnavailable,
			Description: "capture: " + ctx.Err().Error(), Err: ctx.Err()}
	})
	logs := workertest.NewCapture(slog.LevelDebug)
	w, err := worker.New(r, h, slog.New(logs), worker.Options{ShutdownGrace: 50 * time.Millisecond, SummaryInterval: -1, ReceiveDrain: -1})
	if err != nil {
		t.Fatal(err)
	}
	stop := workertest.Start(t, w)
	workertest.Wait(t, entered, "the handler to start")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	rec := deliveryRecord(t, logs, "stuck")
	if rec.Level != slog.LevelWarn || rec.Msg != "cut off by shutdown: abandoned" {
		t.Errorf("logged %v %q, want WARN cut off by shutdown", rec.Level, rec.Msg)
	}
	if got := r.Settlements("stuck"); len(got) != 1 || got[0].Kind != "abandon" {
		t.Errorf("settled %+v, want one abandon", got)
	}
	if s := w.Stats(); s.CutOff != 1 || s.Retried != 1 {
		t.Errorf("stats = %+v, want 1 cut off (counted as a retry)", s)
	}
	began := logs.Matching("shutdown: stopped receiving")
	if len(began) != 1 || began[0].Level != slog.LevelInfo || began[0].Attrs["in_flight"].Int64() != 1 || began[0].Attrs["grace"].String() != "50ms" {
		t.Errorf("shutdown start records %+v, want one INFO with in_flight 1 and grace 50ms", began)
	}
	if over := logs.Matching("shutdown grace period over"); len(over) != 1 || over[0].Level != slog.LevelWarn {
		t.Errorf("grace records %+v, want one WARN", over)
	}
	if len(logs.Matching("shutdown complete")) != 1 {
		t.Error("no shutdown complete record")
	}
	checkNoDurations(t, logs)
}

// TestSummaryLevel: with the handler at WARN (LOG_LEVEL=warn) a clean
// interval's summary is not shown and an interval with a retry is, with
// the interval's counts and rates.
func TestSummaryLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver("good")
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			if m.ID == "bad" {
				return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: errors.New("503")}
			}
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		})
		all := workertest.NewCapture(slog.LevelDebug)
		warn := workertest.NewCapture(slog.LevelWarn)
		w, err := worker.New(r, h, slog.New(teeHandler{all, warn}), worker.Options{RetryBackoff: -1, SummaryInterval: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		time.Sleep(15 * time.Second) // summary at 10 s: "good" created
		r.Add("bad")
		time.Sleep(10 * time.Second) // summary at 20 s: "bad" retried
		time.Sleep(10 * time.Second) // summary at 30 s: nothing
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}

		sums := all.Matching("summary")
		if len(sums) != 4 { // three periodic, one final
			t.Fatalf("%d summaries, want 3 periodic and the final one", len(sums))
		}
		wantLevels := []slog.Level{slog.LevelInfo, slog.LevelWarn, slog.LevelInfo, slog.LevelWarn}
		for i, s := range sums {
			if s.Level != wantLevels[i] {
				t.Errorf("summary %d (%s) at %v, want %v", i, s.Msg, s.Level, wantLevels[i])
			}
		}
		first := sums[0].Attrs
		if first["interval.received"].Int64() != 1 || first["interval.processed"].Int64() != 1 || first["interval.received_per_s"].Float64() != 0.1 ||
			first["interval.length"].String() != "10s" || first["in_flight"].Int64() != 0 {
			t.Errorf("first summary %+v: want 1 received and processed in 10s (0.1/s), none in flight", first)
		}
		if _, ok := first["breaker"]; ok {
			t.Errorf("first summary %+v: a breaker's state without a Gate", first)
		}
		shown := warn.Matching("summary")
		if len(shown) != 2 || shown[0].Msg != "summary" || shown[0].Attrs["interval.retried"].Int64() != 1 || shown[0].Attrs["retried"].Int64() != 1 {
			t.Errorf("summaries shown at WARN: %+v; want the retry interval's and the final one", shown)
		}
		if shown[1].Msg != "final summary" || shown[1].Attrs["received"].Int64() != 2 || shown[1].Attrs["created"].Int64() != 1 {
			t.Errorf("final summary %+v: want the totals", shown[1].Attrs)
		}
		if _, ok := first["cache.hits"]; ok {
			t.Errorf("first summary %+v: cache counters without Options.CacheStats", first)
		}
		checkNoDurations(t, all)
	})
}

// TestSummaryCacheStats: with Options.CacheStats the periodic and the final
// summaries log the cache's cumulative hits, misses and hit rate.
func TestSummaryCacheStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver()
		var mu sync.Mutex
		stats := idempotent.CacheStats{Hits: 3, Misses: 1, Entries: 1, Capacity: 10}
		logs := workertest.NewCapture(slog.LevelDebug)
		w, err := worker.New(r, worker.HandlerFunc(func(context.Context, idempotent.Message) idempotent.Result {
			return idempotent.Result{Outcome: idempotent.Created}
		}),
			slog.New(logs), worker.Options{RetryBackoff: -1, SummaryInterval: 10 * time.Second, CacheStats: func() idempotent.CacheStats {
				mu.Lock()
				defer mu.Unlock()
				return stats
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		time.Sleep(15 * time.Second) // summary at 10 s
		mu.Lock()
		stats.Hits, stats.Misses = 7, 3
		mu.Unlock()
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		sums := logs.Matching("summary")
		if len(sums) != 2 {
			t.Fatalf("%d summaries, want one periodic and the final one", len(sums))
		}
		for i, want := range []struct {
			hits, misses uint64
			rate         float64
		}{{3, 1, 0.75}, {7, 3, 0.7}} {
			a := sums[i].Attrs
			if a["cache.hits"].Kind() != slog.KindUint64 || a["cache.misses"].Kind() != slog.KindUint64 || a["cache.hit_rate"].Kind() != slog.KindFloat64 {
				t.Errorf("%s %+v: want cache.hits, cache.misses and cache.hit_rate", sums[i].Msg, a)
				continue
			}
			if a["cache.hits"].Uint64() != want.hits || a["cache.misses"].Uint64() != want.misses || a["cache.hit_rate"].Float64() != want.rate {
				t.Errorf("%s %+v: want cache hits %d, misses %d, hit rate %v", sums[i].Msg, a, want.hits, want.misses, want.rate)
			}
		}
	})
}

// TestReceiveFailureLoggedAtOnce: the first failed receive is logged at
// WARN before any backoff has passed, and recovery at INFO.
func TestReceiveFailureLoggedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver("after")
		r.FailReceives(&azservicebus.Error{Code: azservicebus.CodeConnectionLost})
		logs := workertest.NewCapture(slog.LevelDebug)
		w, err := worker.New(r, worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		}), slog.New(logs), worker.Options{SummaryInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		synctest.Wait() // the loop now waits out its backoff; no time has passed
		failed := logs.Matching("receive failed")
		if len(failed) != 1 || failed[0].Level != slog.LevelWarn || failed[0].Attrs["failed_receives"].Int64() != 1 || failed[0].Attrs["backoff"].String() != "1s" {
			t.Fatalf("records at once after the failure: %+v; want one WARN with failed_receives 1 and backoff 1s", failed)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if again := logs.Matching("receiving again"); len(again) != 1 || again[0].Level != slog.LevelInfo {
			t.Errorf("recovery records %+v, want one INFO", again)
		}
		if s := w.Stats(); s.ReceiveFailed != 1 || s.Outcomes[idempotent.Created] != 1 {
			t.Errorf("stats = %+v, want 1 failed receive and the message created", s)
		}
		checkNoDurations(t, logs)
	})
}

// teeHandler sends every record to each handler that is enabled for it.
type teeHandler []slog.Handler

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range t {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range t {
		if h.Enabled(ctx, r.Level) {
			if err := h.Handle(ctx, r.Clone()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(teeHandler, len(t))
	for i, h := range t {
		out[i] = h.WithAttrs(as)
	}
	return out
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	out := make(teeHandler, len(t))
	for i, h := range t {
		out[i] = h.WithGroup(name)
	}
	return out
}
