package bench_test

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/bench"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

const (
	cpuPhases      = 6 // three of each consumer
	cpuConcurrency = 16
	cpuWarmUp      = 200 // settlements before the measured window opens
	cpuQueue       = "orders"
)

// BenchmarkCPUPerMessage measures, in one run, the CPU time and the
// allocations per settled message of the whole worker (worker.Worker,
// order.Processor, cosmosstore.Store, a JSON logger to io.Discard)
// receiving from the project's Service Bus test broker through the real
// azservicebus client, and of a bare loop making the same SDK calls: an
// azservicebus receive and complete per message and the sdk contestant's
// azcosmos calls (one transactional batch; on a conflict a point read). The
// broker and cosmium run as child processes, so this process's CPU time
// (getrusage) is the consumer's own, the garbage collector included.
//
// The two run in six phases, bare and worker in the order ABBAAB, so that a
// drift of the machine's load weighs on both alike, and each one's CPU per
// message is the median of its three phases. Each phase consumes b.N/6
// messages inside a window that opens after cpuWarmUp settlements and closes
// at the b.N/6-th after that, with 2·concurrency more messages behind it so
// that the handlers stay busy to the end: start-up, warm-up and shut-down are
// not counted. Allocations are counted over all three phases. The peak
// resident set (VmHWM, reset before each phase) is reported too, the highest
// of each one's phases.
//
// Metrics: worker- and sdk-cpu-µs/msg, worker/sdk (the target is ≤ 1.1),
// own-cpu-µs/msg and own-allocs/msg (worker minus bare loop: the project's
// own code above the SDK; the targets are ≤ 25 µs and ≤ 60 allocations),
// worker- and sdk-allocs/msg, worker- and sdk-VmHWM-MB.
func BenchmarkCPUPerMessage(b *testing.B) {
	srv := cosmiumtest.Start(b)
	c := newCosmos(b, srv, 0)
	conn := startBroker(b)
	for _, dup := range []float64{0, 0.5} {
		b.Run(fmt.Sprintf("dup=%d%%/conc=%d", int(dup*100), cpuConcurrency), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			client, err := azservicebus.NewClientFromConnectionString(conn, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close(context.Background())
			b.StopTimer()
			bare := func(r *azservicebus.Receiver, total int, settled func()) error {
				return bareLoop(ctx, r, cpuConcurrency, total, sdkHandler(c.container), settled)
			}
			whole := func(r *azservicebus.Receiver, total int, settled func()) error {
				_, err := runWorker(ctx, r, c.proc, c.store, cpuConcurrency, total, &tally{}, settled)
				return err
			}
			// Six phases, bare and worker in the order ABBAAB, so that a
			// drift of the machine's load weighs on both alike; each one's
			// CPU per message is the median of its three phases, so that a
			// burst of load from other processes in one phase does not
			// decide it.
			part := max(b.N/cpuPhases, 1)
			var sdk, wk phaseResults
			for _, bareFirst := range []bool{true, false, true} {
				if bareFirst {
					sdk.add(cpuPhase(b, ctx, c, client, "sdk", dup, part, bare))
				}
				wk.add(cpuPhase(b, ctx, c, client, "worker", dup, part, whole))
				if !bareFirst {
					sdk.add(cpuPhase(b, ctx, c, client, "sdk", dup, part, bare))
				}
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(sdk.cpuPerMsg(), "sdk-cpu-µs/msg")
			b.ReportMetric(wk.cpuPerMsg(), "worker-cpu-µs/msg")
			b.ReportMetric(wk.cpuPerMsg()/sdk.cpuPerMsg(), "worker/sdk")
			b.ReportMetric(wk.cpuPerMsg()-sdk.cpuPerMsg(), "own-cpu-µs/msg")
			b.ReportMetric(sdk.allocsPerMsg(), "sdk-allocs/msg")
			b.ReportMetric(wk.allocsPerMsg(), "worker-allocs/msg")
			b.ReportMetric(wk.allocsPerMsg()-sdk.allocsPerMsg(), "own-allocs/msg")
			b.ReportMetric(float64(sdk.peakRSS())/(1<<20), "sdk-VmHWM-MB")
			b.ReportMetric(float64(wk.peakRSS())/(1<<20), "worker-VmHWM-MB")
		})
	}
}

// phaseResult is what one phase measured over its window of n messages.
type phaseResult struct {
	n       int
	cpu     time.Duration
	allocs  uint64
	peakRSS int64
}

// phaseResults are the phases of one consumer.
type phaseResults []phaseResult

func (rs *phaseResults) add(r phaseResult) { *rs = append(*rs, r) }

// cpuPerMsg is the median of the phases' CPU µs per message.
func (rs phaseResults) cpuPerMsg() float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = float64(r.cpu) / 1e3 / float64(r.n)
	}
	return median(xs)
}

// allocsPerMsg is the phases' allocations per message, over all of them:
// allocations do not depend on the machine's load.
func (rs phaseResults) allocsPerMsg() float64 {
	var allocs uint64
	var n int
	for _, r := range rs {
		allocs, n = allocs+r.allocs, n+r.n
	}
	return float64(allocs) / float64(n)
}

// peakRSS is the highest peak of the phases.
func (rs phaseResults) peakRSS() int64 {
	var peak int64
	for _, r := range rs {
		peak = max(peak, r.peakRSS)
	}
	return peak
}

// cpuPhase queues cpuWarmUp + n + 2·concurrency messages (the share dup
// of them copies, each of another order stored first with the
// contestant's handler), runs consume on a new receiver until it has
// settled them all, and returns what the window of n settlements after the
// warm-up cost.
func cpuPhase(b *testing.B, ctx context.Context, c *cosmos, client *azservicebus.Client, name string, dup float64, n int,
	consume func(r *azservicebus.Receiver, total int, settled func()) error) phaseResult {
	b.Helper()
	k := contestantNamed(name)
	prefix := uniquePrefix("cpu" + name)
	total := cpuWarmUp + n + 2*cpuConcurrency
	var pool []idempotent.Message
	if dup > 0 {
		pool = stream(prefix+"p", max(copiesOf(total, dup), 1), 0, nil)
		if err := k.seed(ctx, c, seedConcurrency, pool); err != nil {
			b.Fatalf("%s: seed: %v", name, err)
		}
	}
	sendAll(b, ctx, client, stream(prefix, total, dup, pool))

	r, err := client.NewReceiverForQueue(cpuQueue, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(context.Background())
	runtime.GC()
	if err := bench.ResetPeakRSS(0); err != nil {
		b.Fatal(err)
	}
	var (
		count      atomic.Int64
		mu         sync.Mutex
		start, end sample
	)
	settled := func() {
		switch count.Add(1) {
		case cpuWarmUp:
			s := takeSample(b)
			mu.Lock()
			start = s
			mu.Unlock()
		case int64(cpuWarmUp + n):
			s := takeSample(b)
			mu.Lock()
			end = s
			mu.Unlock()
		}
	}
	b.StartTimer()
	if err := consume(r, total, settled); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	b.StopTimer()
	rss, err := bench.PeakRSS(0)
	if err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return phaseResult{n: n, cpu: end.cpu - start.cpu, allocs: end.allocs - start.allocs, peakRSS: rss}
}

// sample is the process's CPU time and heap allocations at one moment.
type sample struct {
	cpu    time.Duration
	allocs uint64
}

func takeSample(b *testing.B) sample {
	cpu, err := bench.SelfCPU()
	if err != nil {
		b.Error(err)
	}
	m := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(m)
	return sample{cpu: cpu, allocs: m[0].Value.Uint64()}
}

func contestantNamed(name string) contestant {
	for _, k := range contestants {
		if k.name == name {
			return k
		}
	}
	panic("no contestant " + name)
}

// bareLoop is the least a PeekLock consumer does with the SDK: one
// goroutine receives as many messages as there are free handlers, and each
// message is handled by h and completed, by at most conc at once. No
// deadline per message, no lock renewal, no logging: the floor the worker
// is measured against. It returns after total settlements.
func bareLoop(ctx context.Context, r worker.Receiver, conc, total int, h handler, settled func()) error {
	sem := make(chan struct{}, conc)
	var done atomic.Int64
	var wg sync.WaitGroup
	var errOnce sync.Once
	var first error
	fail := func(err error) { errOnce.Do(func() { first = err }) }
	for received := 0; received < total; {
		sem <- struct{}{} // one free handler at least
		ms, err := r.ReceiveMessages(ctx, min(1+conc-len(sem), total-received), nil)
		if err != nil {
			<-sem
			fail(err)
			break
		}
		for i, m := range ms {
			if i > 0 {
				sem <- struct{}{}
			}
			wg.Go(func() {
				defer func() { <-sem }()
				msg := idempotent.Message{ID: m.MessageID, Body: m.Body, DeliveryCount: m.DeliveryCount}
				if _, err := h(ctx, msg); err != nil {
					fail(fmt.Errorf("message %s: %w", m.MessageID, err))
					return
				}
				if err := r.CompleteMessage(ctx, m, nil); err != nil {
					fail(fmt.Errorf("complete %s: %w", m.MessageID, err))
					return
				}
				done.Add(1)
				settled()
			})
		}
		if len(ms) == 0 {
			<-sem
		}
		received += len(ms)
	}
	wg.Wait()
	if first == nil && done.Load() != int64(total) {
		first = fmt.Errorf("settled %d of %d messages", done.Load(), total)
	}
	return first
}

// sendAll sends msgs to the broker's queue in batches.
func sendAll(b *testing.B, ctx context.Context, client *azservicebus.Client, msgs []idempotent.Message) {
	b.Helper()
	s, err := client.NewSender(cpuQueue, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := 0; i < len(msgs); {
		batch, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for ; i < len(msgs) && batch.NumMessages() < 100; i++ {
			id := msgs[i].ID
			if err := batch.AddMessage(&azservicebus.Message{MessageID: &id, Body: msgs[i].Body}, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// startBroker builds and starts the test broker as a child process, with
// duplicate detection off (every copy reaches the consumer) and a one-minute
// lock, and returns its connection string.
func startBroker(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	build := exec.Command("go", "build", "-o", dir, "github.com/idempotent-consumer/sbcosmos/test/sbbroker/cmd/sbbroker")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the broker: %v\n%s", err, out)
	}
	cmd := exec.Command(dir+"/sbbroker", "-addr", "127.0.0.1:0", "-queue", cpuQueue,
		"-duplicate-detection-window", "0", "-lock-duration", "1m")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &syncWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "Endpoint=") {
		b.Fatalf("the broker printed %q (%v), want its connection string\n%s", line, err, stderr.String())
	}
	return strings.TrimSpace(line)
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
