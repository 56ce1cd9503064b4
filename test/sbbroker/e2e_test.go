package sbbroker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/bench"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// The end-to-end tests run the real orderproducer and orderworker binaries
// against this broker, a cosmium Cosmos DB emulator and an in-process
// payments service, and check the invariants of DESIGN.md §4 from the
// broker's queues, Cosmos DB and the payments service's charges.

const (
	e2eLock      = 3 * time.Second // short, so a killed worker's locks lapse quickly
	e2eDatabase  = "orders"
	e2eContainer = "orders"
)

// e2eEnv is a broker, a Cosmos emulator and the two binaries.
type e2eEnv struct {
	ns      *sbqueue.Namespace
	queue   *sbqueue.Queue
	broker  *sbbroker.Broker
	cosmos  *cosmiumtest.Server
	bin     string // directory holding orderworker and orderproducer
	baseEnv []string
}

func newE2E(t testing.TB) *e2eEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the real binaries and cosmium; skipped with -short")
	}
	bin := e2etest.BuildCommands(t)
	// e2eLock is below Service Bus's 5 s minimum, so that a killed worker's
	// locks lapse quickly; the workers read it as they would from Azure.
	ns := sbqueue.NewNamespaceWith(sbqueue.RealClock(), sbqueue.NamespaceOptions{AllowUnrealisticTimings: true})
	// No duplicate detection: every duplicate and reused id reaches the
	// workers, whose Cosmos DB check must handle them.
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: e2eLock})
	if err != nil {
		t.Fatal(err)
	}
	b := sbbroker.New(ns, sbbroker.Options{})
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	srv := cosmiumtest.Start(t)
	return &e2eEnv{
		ns: ns, queue: q, broker: b, cosmos: srv, bin: bin,
		baseEnv: []string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + os.Getenv("HOME"),
			"SERVICEBUS_CONNECTION_STRING=" + b.ConnectionString(),
			"SERVICEBUS_QUEUE=orders",
			"SERVICEBUS_LOCK_DURATION=" + e2eLock.String(),
			"COSMOS_ENDPOINT=" + srv.Endpoint,
			"COSMOS_KEY=" + srv.Key,
			"COSMOS_DATABASE=" + e2eDatabase,
			"COSMOS_CONTAINER=" + e2eContainer,
			"COSMOS_CREATE_CONTAINER=true",
			"LOG_FORMAT=json",
			"WORKER_SHUTDOWN_GRACE=20s",
			"WORKER_SUMMARY_INTERVAL=1s",
		},
	}
}

// start runs one of the binaries in this environment.
func (e *e2eEnv) start(tb testing.TB, name, binary string, args ...string) *e2etest.Process {
	tb.Helper()
	return e2etest.Start(tb, e.baseEnv, e.bin, name, binary, args...)
}

// runProducer runs orderproducer to completion in this environment.
func runProducer(tb testing.TB, ctx context.Context, e *e2eEnv, args ...string) e2etest.ProducerSummary {
	tb.Helper()
	return e2etest.RunProducer(tb, ctx, e.baseEnv, e.bin, args...)
}

func (e *e2eEnv) container(t testing.TB) *azcosmos.ContainerClient {
	t.Helper()
	cred, err := azcosmos.NewKeyCredential(e.cosmos.Key)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(e.cosmos.Endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := client.NewContainer(e2eDatabase, e2eContainer)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEndToEndWorkersSurviveSIGKILL(t *testing.T) {
	e := newE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cosmos := e.container(t)
	// The downstream payments service, in process: it counts the charges
	// each order caused, which must be exactly one.
	pay := paymentservice.NewService(nil)
	paySrv := httptest.NewServer(pay)
	defer paySrv.Close()
	e.baseEnv = append(e.baseEnv, "PAYMENTS_URL="+paySrv.URL)

	w1 := e.start(t, "worker 1", "orderworker", "-concurrency", "8")
	// The first worker creates the container; start the second after it.
	e2etest.Until(t, ctx, "the container", func() bool {
		_, err := cosmos.Read(ctx, nil)
		return err == nil
	})
	w2 := e.start(t, "worker 2", "orderworker", "-concurrency", "8")

	const count = 400
	produced := make(chan e2etest.ProducerSummary, 1)
	go func() {
		produced <- runProducer(t, ctx, e, "-count", fmt.Sprint(count), "-duplicates", "0.2", "-reused", "0.05",
			"-malformed", "0.03", "-status-changes", "0.1", "-seed", "42", "-id-prefix", "e2e", "-batch-size", "50")
	}()

	// Kill worker 2 mid-run, without warning, then start it again.
	e2etest.Until(t, ctx, "a third of the orders completed", func() bool {
		return e.queue.Snapshot().Counters.Completed >= count/3
	})
	if err := w2.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w2.Wait(ctx)
	killedAt := e.queue.Snapshot()
	t.Logf("worker 2 killed with %d messages locked, %d completed", len(killedAt.Locked), killedAt.Counters.Completed)
	w2 = e.start(t, "worker 2 (restarted)", "orderworker", "-concurrency", "8")

	pc := <-produced
	if pc.Orders != count {
		t.Fatalf("producer sent %d orders, want %d", pc.Orders, count)
	}
	e2etest.Until(t, ctx, "every message settled", func() bool {
		s := e.queue.Snapshot()
		// A status change handled before its order is completed and comes
		// back as a scheduled copy (the worker's delayed retry): the run is
		// over when no copy waits either, and every copy is settled too.
		copies := s.Counters.ScheduledAccepted - s.Counters.ScheduledCancelled
		return len(s.Active) == 0 && len(s.Locked) == 0 && len(s.Scheduled) == 0 &&
			s.Counters.Completed+int64(len(s.DeadLetters)) >= int64(pc.Sent)+copies
	})
	for _, w := range []*e2etest.Process{w1, w2} {
		w.Cmd.Process.Signal(syscall.SIGTERM)
		if err := w.Wait(ctx); err != nil {
			t.Errorf("%s after SIGTERM: %v", w.Name, err)
		}
	}

	snap := e.queue.Snapshot()
	// No message is lost: each was completed or dead-lettered, once; so was
	// each scheduled copy of a status change that came before its order.
	copies := snap.Counters.ScheduledAccepted - snap.Counters.ScheduledCancelled
	if got := snap.Counters.Completed + int64(len(snap.DeadLetters)); got != int64(pc.Sent)+copies {
		t.Errorf("completed %d + dead-lettered %d = %d, want the %d sent + %d scheduled copies", snap.Counters.Completed, len(snap.DeadLetters), got, pc.Sent, copies)
	}
	if want := int64(pc.Orders+pc.Duplicates+pc.StatusChanges) + copies; snap.Counters.Completed != want {
		t.Errorf("completed %d, want %d orders + duplicates + status changes + %d scheduled copies", snap.Counters.Completed, want-copies, copies)
	}
	if want := pc.Reused + pc.Malformed; len(snap.DeadLetters) != want {
		t.Errorf("dead letters %d, want %d reused ids + malformed", len(snap.DeadLetters), want)
	}
	// Every dead letter explains itself; mismatches keep the content that
	// lost, so the stored document is the other one.
	dead := make(map[string][]sbqueue.ReceivedMessage)
	withStatus := 0
	for _, d := range snap.DeadLetters {
		if d.DeadLetterReason == "" || d.DeadLetterErrorDescription == "" {
			t.Errorf("dead letter %s has reason %q, description %q", d.MessageID, d.DeadLetterReason, d.DeadLetterErrorDescription)
		}
		dead[d.MessageID] = append(dead[d.MessageID], d)
	}
	// Every valid order has exactly one document, from one of the bodies
	// sent with its id; a duplicate never changed it.
	gen := ordergen.New(pc.Seed, pc.Prefix)
	if got := pay.Charges(); got != pc.Orders {
		t.Errorf("%d charges in all, want one per order: %d", got, pc.Orders)
	}
	for i := range pc.Orders {
		want := gen.Order(i)
		doc, ok := e2etest.ReadOrder(t, ctx, cosmos, want.OrderID)
		if !ok {
			t.Errorf("order %s has no document", want.OrderID)
			continue
		}
		changed := ordergen.Changed(want)
		switch doc.RequestHash {
		case want.RequestHash():
		case changed.RequestHash():
			// The reused id was processed first (its original was locked by
			// the killed worker): then the original is the mismatch.
			if len(dead[want.OrderID]) != 1 {
				t.Errorf("order %s stores the reused content but the original is not dead-lettered", want.OrderID)
			}
		default:
			t.Errorf("order %s stores hash %s, neither its original nor its reused content", want.OrderID, doc.RequestHash)
		}
		if n := pay.ChargesFor(want.OrderID); n != 1 {
			t.Errorf("order %s was charged %d times, want exactly once", want.OrderID, n)
		}
		// Status changes were sent newest first. Against Cosmos DB version 3
		// wins over the late version 2: the ETag-conditioned replace of v2
		// fails with 412 and v2 is then stale. cosmium ignores If-Match, so
		// when v2 and v3 are handled concurrently here either may land last;
		// the ETag guard is proven on the in-memory store, in the
		// simulation and against a fake gateway. Here: a status change is
		// applied whole, and nothing else changes an order.
		switch {
		case doc.Version == 3 && doc.Status == "shipped", doc.Version == 2 && doc.Status == "paid":
			withStatus++
		case doc.Version != 1 || doc.Status != "accepted":
			t.Errorf("order %s is %s at version %d: want accepted v1, paid v2 or shipped v3", want.OrderID, doc.Status, doc.Version)
		}
		for _, d := range dead[want.OrderID] {
			o, err := order.Decode(d.Body)
			if err != nil {
				t.Errorf("dead letter %s: %v", want.OrderID, err)
				continue
			}
			if o.RequestHash() == doc.RequestHash {
				t.Errorf("dead letter %s carries the stored content: a duplicate was dead-lettered", want.OrderID)
			}
		}
	}
	if want := pc.StatusChanges / 2; withStatus != want {
		t.Errorf("%d orders changed status, want %d (the orders with status changes)", withStatus, want)
	}
	for i := range pc.Malformed {
		id := fmt.Sprintf("%s-bad-%06d", pc.Prefix, i)
		if len(dead[id]) != 1 {
			t.Errorf("malformed message %s: %d dead letters, want 1", id, len(dead[id]))
		}
		if _, ok := e2etest.ReadOrder(t, ctx, cosmos, id); ok {
			t.Errorf("malformed message %s created a document", id)
		}
		if n := pay.ChargesFor(id); n != 0 {
			t.Errorf("malformed message %s caused %d charges", id, n)
		}
	}
}

// TestEndToEndSIGTERMDrains stops a busy worker with SIGTERM: it must exit
// 0 having settled every message it received, with nothing left locked.
//
// The SDK leaves the credit of the ReceiveMessages call that shutdown
// cancelled on the link, and the broker (like Service Bus) fills it: the
// receive in progress collects what arrives within the worker's receive
// drain and hands it to handlers, and the SDK's releaser gives back what
// arrives later (AMQP released, no delivery counted), so nothing stays
// locked until its lock lapses.
func TestEndToEndSIGTERMDrains(t *testing.T) {
	e := newE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc := runProducer(t, ctx, e, "-count", "300", "-seed", "7", "-id-prefix", "drain")
	w := e.start(t, "worker", "orderworker", "-concurrency", "16")
	e2etest.Until(t, ctx, "the worker to start settling", func() bool {
		return e.queue.Snapshot().Counters.Completed > 0
	})
	if err := w.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(ctx); err != nil {
		t.Fatalf("worker after SIGTERM: %v, want exit status 0", err)
	}
	summary := e2etest.FinalSummary(w.Output())
	if summary == nil {
		t.Fatalf("the worker logged no final summary:\n%s", w.Output())
	}
	s := e.queue.Snapshot()
	if summary["received"] == 0 || s.Counters.Completed != summary["received"] || summary["created"] != summary["received"] {
		t.Errorf("worker received %d and created %d orders; the queue completed %d: want all equal and non-zero",
			summary["received"], summary["created"], s.Counters.Completed)
	}
	if len(s.Locked) != 0 {
		t.Errorf("%d messages left locked after the worker exited", len(s.Locked))
	}
	if got := s.Counters.Completed + int64(len(s.Active)); got != int64(pc.Sent) {
		t.Errorf("completed %d + active %d = %d, want the %d sent", s.Counters.Completed, len(s.Active), got, pc.Sent)
	}
	t.Logf("drained after %d of %d messages; %d prefetched deliveries abandoned at shutdown",
		s.Counters.Completed, pc.Sent, s.Counters.Abandoned)
}

// BenchmarkEndToEnd measures the real worker binary's throughput at
// concurrency 1 and 16: b.N orders are queued by orderproducer first, then
// one orderworker creates them in Cosmos DB (cosmium) through this broker,
// timed from its start to the last completion. In the same run it measures
// the ceiling: cosmium's own throughput for the same transactional batch
// of an order's documents (cosmosstore.Store.CreateBatch) from as many
// goroutines, with no broker and no worker. worker/ceiling is the fraction
// of the ceiling the worker reaches on this machine.
//
// Progress is polled with Queue.Counts, which copies no message: polling
// Snapshot, which copies every queued message under the queue's lock, cost
// the measured rate about 15 %. The worker process's CPU time per message
// (worker-cpu-µs/msg, from /proc/PID/stat, between the tenth of the orders
// and the last, so that start-up is not counted) and its peak resident set
// under load (worker-VmHWM-MB, read before it is stopped) are reported too.
func BenchmarkEndToEnd(b *testing.B) {
	for _, concurrency := range []int{1, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			e := newE2E(b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			store := e.store(b, ctx)
			runProducer(b, ctx, e, "-count", fmt.Sprint(b.N), "-seed", "1", "-id-prefix", fmt.Sprintf("bench%d", b.N), "-batch-size", "100")

			b.ResetTimer()
			start := time.Now()
			w := e.start(b, "worker", "orderworker", "-concurrency", fmt.Sprint(concurrency))
			pid := w.Cmd.Process.Pid
			var cpu0, cpu1 time.Duration
			var done0, done1 int64
			e2etest.Until(b, ctx, "every order completed", func() bool {
				done := e.queue.Counts().Completed
				if done0 == 0 && done >= int64(b.N)/10 && done > 0 {
					done0, cpu0 = done, processCPU(b, pid)
				}
				return done >= int64(b.N)
			})
			workerRate := float64(b.N) / time.Since(start).Seconds()
			b.StopTimer()
			done1, cpu1 = e.queue.Counts().Completed, processCPU(b, pid)
			rss, err := bench.PeakRSS(pid)
			if err != nil {
				b.Error(err)
			}
			w.Cmd.Process.Signal(syscall.SIGTERM)
			if err := w.Wait(ctx); err != nil {
				b.Errorf("worker after SIGTERM: %v", err)
			}

			ceiling := rawCreateRate(b, ctx, store, b.N, concurrency)
			b.ReportMetric(workerRate, "orders/s")
			b.ReportMetric(ceiling, "ceiling-orders/s")
			b.ReportMetric(workerRate/ceiling, "worker/ceiling")
			if done1 > done0 {
				b.ReportMetric(float64(cpu1-cpu0)/1e3/float64(done1-done0), "worker-cpu-µs/msg")
			}
			b.ReportMetric(float64(rss)/(1<<20), "worker-VmHWM-MB")
		})
	}
}

// processCPU returns the CPU time process pid has used so far.
func processCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	d, err := bench.ProcessCPU(pid)
	if err != nil {
		tb.Error(err)
	}
	return d
}

// store provisions the database and container and returns a store on them.
func (e *e2eEnv) store(tb testing.TB, ctx context.Context) *cosmosstore.Store {
	tb.Helper()
	client, err := cosmosstore.NewClientWithKey(e.cosmos.Endpoint, e.cosmos.Key, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, e2eDatabase, e2eContainer, order.PartitionKeyPath); err != nil {
		tb.Fatal(err)
	}
	s, err := cosmosstore.New(client, e2eDatabase, e2eContainer, order.PartitionKeyPath)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// rawCreateRate writes n new orders with concurrency goroutines straight to
// the store and returns the orders per second.
func rawCreateRate(tb testing.TB, ctx context.Context, s *cosmosstore.Store, n, concurrency int) float64 {
	tb.Helper()
	gen := ordergen.New(2, fmt.Sprintf("raw%d", n))
	now := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := gen.Order(i)
				docs, err := order.NewWrite(o, o.OrderID, o.RequestHash(), now).Documents()
				if err == nil {
					_, err = s.CreateBatch(ctx, o.OrderID, docs)
				}
				if err != nil {
					tb.Errorf("raw create %s: %v", o.OrderID, err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// TestEndToEndSecondSignalStopsAtOnce: the first SIGINT starts the drain
// (logged), and while a handler is still in flight (its payment call hangs)
// a second SIGINT makes the worker exit at once with a non-zero status
// instead of waiting out the shutdown grace; it used to ignore the second
// signal and log nothing.
func TestEndToEndSecondSignalStopsAtOnce(t *testing.T) {
	e := newE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	called := make(chan struct{}, 100)
	hang := make(chan struct{})
	paySrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called <- struct{}{}
		select { // never answers: the capture stays in flight
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer func() { close(hang); paySrv.Close() }() // release the handler first: Close waits for it
	e.baseEnv = append(e.baseEnv, "PAYMENTS_URL="+paySrv.URL, "WORKER_SHUTDOWN_GRACE=90s")
	// A long configured lock, so that the message deadline (80 % of it)
	// keeps the handler in flight for the whole test.
	w := e.start(t, "worker", "orderworker", "-concurrency", "1", "-lock-duration", "90s")
	runProducer(t, ctx, e, "-count", "1", "-id-prefix", "sig", "-seed", "1")
	select {
	case <-called:
	case <-ctx.Done():
		t.Fatal("the worker never called the payments service")
	}

	if err := w.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	e2etest.Until(t, ctx, "the drain logged", func() bool {
		return strings.Contains(w.Output(), "shutting down: draining")
	})
	// Another signal: the same one again within a second would be taken
	// for a supervisor's duplicate of the first and ignored (cli.Stages).
	if err := w.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := w.Wait(ctx)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("worker after a second signal: %v, want exit status 1", err)
	}
	// "stopped at once" is logged by run itself before it returns; the log of
	// the moment the second signal arrived (logShutdownStages) runs in a
	// goroutine of its own and may lose the race with the exit.
	for _, want := range []string{`"cause":"interrupt signal received"`, "orderworker stopped at once", "second signal (terminated) received"} {
		if !strings.Contains(w.Output(), want) {
			t.Errorf("the worker's output lacks %q", want)
		}
	}
}

// TestEndToEndMissingDatabaseStopsAtStart: a worker pointed at a database
// that does not exist stops at start with a message that names the setting,
// before it receives anything: a misconfiguration must cost no delivery,
// where it used to dead-letter every message after MaxDeliveryCount retries.
func TestEndToEndMissingDatabaseStopsAtStart(t *testing.T) {
	e := newE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runProducer(t, ctx, e, "-count", "3", "-id-prefix", "nodb", "-seed", "1")
	w := e.start(t, "worker", "orderworker", "-cosmos-create-container=false", "-cosmos-database", "no-such-database")
	err := w.Wait(ctx)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("worker with a missing database: %v, want a non-zero exit", err)
	}
	for _, want := range []string{"COSMOS_DATABASE", "no-such-database"} {
		if !strings.Contains(w.Output(), want) {
			t.Errorf("the worker's output does not name %q:\n%s", want, w.Output())
		}
	}
	if snap := e.queue.Snapshot(); snap.Delivered != 0 || len(snap.Active) != 3 {
		t.Errorf("after the refused start: %d deliveries, %d messages available; want 0 and 3", snap.Delivered, len(snap.Active))
	}
}
