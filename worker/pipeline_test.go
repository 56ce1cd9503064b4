package worker_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// seenHandler records the order in which Process saw messages and
// completes each one.
type seenHandler struct {
	mu   sync.Mutex
	seen []string
}

func (h *seenHandler) Process(_ context.Context, m idempotent.Message) idempotent.Result {
	h.mu.Lock()
	h.seen = append(h.seen, m.ID)
	h.mu.Unlock()
	return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
}

func (h *seenHandler) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// TestSettlementDoesNotHoldTheHandlerSlot: with one handler, the next
// message is processed while the settlement of the one before is still in
// progress; the message after that is not received until a settlement slot
// frees, because a message waiting to be settled keeps its handler slot.
func TestSettlementDoesNotHoldTheHandlerSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver("a", "b", "c")
		release := make(chan struct{})
		r.CompleteErr = func(m *azservicebus.ReceivedMessage) error {
			if m.MessageID == "a" {
				<-release
			}
			return nil
		}
		h := &seenHandler{}
		w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: 1, SummaryInterval: -1})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		synctest.Wait()
		if got := h.ids(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("while a's settlement is in progress the handler saw %v, want [a b]", got)
		}
		if s := w.Stats(); s.Received != 2 {
			t.Errorf("received %d while a's settlement is in progress, want 2 (a settling, b waiting to settle)", s.Received)
		}
		close(release)
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b", "c"} {
			if got := r.Settlements(id); len(got) != 1 || got[0].Kind != "complete" {
				t.Errorf("%s settled %+v, want one complete", id, got)
			}
		}
		if n := r.MaxAsked(); n > 1 {
			t.Errorf("asked for %d messages at once with one handler", n)
		}
	})
}

// TestSettlementsAreBounded: when no settlement returns, a worker with
// Concurrency c has c settlements in progress and c processed messages
// waiting for them, and receives nothing more: at most 2c messages are
// received and not yet settled.
func TestSettlementsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const c, total = 3, 20
		r := workertest.NewReceiver(ids("m", total)...)
		release := make(chan struct{})
		var mu sync.Mutex
		settling, peak := 0, 0
		r.CompleteErr = func(*azservicebus.ReceivedMessage) error {
			mu.Lock()
			settling++
			peak = max(peak, settling)
			mu.Unlock()
			<-release
			mu.Lock()
			settling--
			mu.Unlock()
			return nil
		}
		h := &seenHandler{}
		w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: c, SummaryInterval: -1})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		synctest.Wait()
		if n, s := len(h.ids()), w.Stats(); n != 2*c || s.Received != 2*c {
			t.Errorf("with every settlement stuck: processed %d, received %d; want %d each", n, s.Received, 2*c)
		}
		mu.Lock()
		if settling != c {
			t.Errorf("%d settlements in progress, want %d", settling, c)
		}
		mu.Unlock()
		close(release)
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if peak != c {
			t.Errorf("peak settlements in progress %d, want %d", peak, c)
		}
		for _, id := range ids("m", total) {
			if got := r.Settlements(id); len(got) != 1 || got[0].Kind != "complete" {
				t.Errorf("%s settled %+v, want one complete", id, got)
			}
		}
	})
}

// TestLockRenewedWhileWaitingToSettle: a processed message waiting for a
// settlement slot keeps its lock renewed until its settlement begins; a
// message whose settlement begins right after Process is never renewed.
func TestLockRenewedWhileWaitingToSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver("slow-settle", "waits")
		r.CompleteErr = func(m *azservicebus.ReceivedMessage) error {
			if m.MessageID == "slow-settle" {
				time.Sleep(10 * time.Second) // within SettleTimeout (20 s)
			}
			return nil
		}
		done := workertest.SettledN(r, 2)
		w := workertest.NewWorker(t, r, &seenHandler{}, worker.Options{Concurrency: 1, SummaryInterval: -1,
			LockDuration: 2 * time.Second, MessageTimeout: time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		<-done
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		slow, waits := r.Renewals("slow-settle"), r.Renewals("waits")
		// A 2 s lock without LockedUntil is renewed every second: 9 or 10
		// times in the 10 s "waits" waits for the settlement slot.
		if slow != 0 || waits < 9 {
			t.Errorf("renewals: slow-settle %d, waits %d; want 0 and at least 9", slow, waits)
		}
		for _, id := range []string{"slow-settle", "waits"} {
			if got := r.Settlements(id); len(got) != 1 || got[0].Kind != "complete" {
				t.Errorf("%s settled %+v, want one complete", id, got)
			}
		}
		if s := w.Stats(); s.LockLost != 0 || s.Renewed != int64(waits) {
			t.Errorf("stats = %+v, want no lock lost and %d renewals", s, waits)
		}
	})
}

// TestShutdownSettlesWhatWaitsForASettlementSlot: a message processed before
// the shutdown grace ended and still waiting for a settlement slot when it
// ends is settled with its own outcome, not cut off, and Run returns only
// after that settlement and its report.
func TestShutdownSettlesWhatWaitsForASettlementSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver("slow-settle", "waits")
		r.CompleteErr = func(m *azservicebus.ReceivedMessage) error {
			if m.MessageID == "slow-settle" {
				time.Sleep(10 * time.Second) // within SettleTimeout, past the grace
			}
			return nil
		}
		var mu sync.Mutex
		var reports []worker.Report
		h := &seenHandler{}
		w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: 1, SummaryInterval: -1, ShutdownGrace: time.Second,
			Observe: func(rep worker.Report) { mu.Lock(); reports = append(reports, rep); mu.Unlock() }})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		synctest.Wait() // slow-settle settling, waits processed and waiting for the slot
		if got := h.ids(); !slices.Equal(got, []string{"slow-settle", "waits"}) {
			t.Fatalf("handled %v before shutdown, want [slow-settle waits]", got)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		// Run has returned: both settlements and both reports must be in.
		for _, id := range []string{"slow-settle", "waits"} {
			if got := r.Settlements(id); len(got) != 1 || got[0].Kind != "complete" {
				t.Errorf("%s settled %+v, want one complete", id, got)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(reports) != 2 {
			t.Fatalf("%d reports, want 2", len(reports))
		}
		for _, rep := range reports {
			if rep.CutOff || rep.LockLost || rep.SettleErr != nil || rep.Result.Outcome != idempotent.Created {
				t.Errorf("report %+v, want a completed Created", rep)
			}
		}
		if s := w.Stats(); s.CutOff != 0 || s.Outcomes[idempotent.Created] != 2 {
			t.Errorf("stats = %+v, want 2 created, none cut off", s)
		}
	})
}

// goroutineID returns the first line of the calling goroutine's stack
// trace, "goroutine 7 [running]:", which names it.
func goroutineID() string {
	var buf [64]byte
	line, _, _ := strings.Cut(string(buf[:runtime.Stack(buf[:], false)]), "\n")
	return line
}

// goroutineHandler completes every message and records on which goroutine
// Process ran.
type goroutineHandler struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (h *goroutineHandler) Process(_ context.Context, m idempotent.Message) idempotent.Result {
	h.mu.Lock()
	h.ids[goroutineID()] = true
	h.mu.Unlock()
	return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
}

// TestHandlerGoroutinesAreReused: deliveries are handled on goroutines
// that stay for the next one, never more of them than deliveries in flight
// at once (2*Concurrency), so that a message does not start on a fresh
// stack that the SDK's calls must grow again.
func TestHandlerGoroutinesAreReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const c, total = 2, 40
		r := workertest.NewReceiver(ids("m", total)...)
		h := &goroutineHandler{ids: map[string]bool{}}
		w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: c, SummaryInterval: -1})
		stop := workertest.Start(t, w)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if s := w.Stats(); s.Outcomes[idempotent.Created] != total {
			t.Fatalf("created %d of %d", s.Outcomes[idempotent.Created], total)
		}
		if n := len(h.ids); n > 2*c {
			t.Errorf("%d messages were handled on %d goroutines, want at most %d (2*Concurrency)", total, n, 2*c)
		}
	})
}
