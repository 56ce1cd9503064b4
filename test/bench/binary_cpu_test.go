package bench_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/bench"
	"github.com/idempotent-consumer/sbcosmos/test/bench/internal/bareloop"
	"github.com/idempotent-consumer/sbcosmos/test/bench/internal/deployenv"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// The settings of BenchmarkBinaryCPU, from the environment (go test passes
// its own environment on): how many phases each consumer runs, which
// consumers, whether the probe is built in, and where CPU profiles go.
const (
	envBinaryRounds   = "BINARY_CPU_ROUNDS"      // phases per consumer, default 5
	envBinaryVariants = "BINARY_CPU_VARIANTS"    // comma-separated, default bare,worker; all = every variant
	envBinaryProbe    = "BINARY_CPU_PROBE"       // 0: build without the probe (no allocations, no heap figures)
	envBinaryProfile  = "BINARY_CPU_PROFILE"     // a directory: write a CPU profile of every window there
	envBinaryWarmUp   = "BINARY_CPU_WARMUP"      // settlements before the window opens, default 300
	envBinaryGOGC     = "BINARY_CPU_GOGC"        // GOGC of every consumer process; unset: the runtime's default (100)
	envBinaryMemLimit = "BINARY_CPU_GOMEMLIMIT"  // GOMEMLIMIT of every consumer process; unset: none
	envBinaryHeapRate = "BINARY_CPU_HEAPRATE"    // with BINARY_CPU_PROFILE: bytes between heap profile samples (GODEBUG memprofilerate); unset: the runtime's 512 KB
	envBinaryOther    = "BINARY_CPU_OTHER"       // the root of another checkout of this module: its orderworker runs as the variant "other"
	envBinaryPerf     = "BINARY_CPU_PERF"        // a directory: record every window with Linux perf there (perf record -g, from outside the process)
	envBinaryBicep    = "BINARY_CPU_BICEP"       // the template the deployed variants read their environment from; unset: infra/bicep/modules/containerapps.bicep
	envBinaryTrace    = "BINARY_CPU_TRACEPARENT" // 1: every message carries a sampled W3C traceparent, as the deployed producer sends them
)

// binaryVariant is one consumer process BenchmarkBinaryCPU runs.
type binaryVariant struct {
	name   string
	binary string   // bareloop or orderworker
	env    []string // added to the common environment
	bare   bool     // seeds its copies' originals as the bare loop stores them
	floor  string   // the variant it is compared with: bare (when empty) or bare-deployed
	agent  bool     // exports to the OTLP/gRPC collector: count what arrives
}

// deployedEnv is what the deployed variants run with: the worker
// container's runtime variables from the Bicep (deployenv.Runtime: every
// OTEL_*, GO* and LOG_* variable it sets), and what the managed
// OpenTelemetry agent injects (the OTLP endpoint, here the benchmark's
// collector, over gRPC).
type deployedEnv struct {
	runtime []string // NAME=VALUE from the template
	agent   []string // NAME=VALUE the agent injects
}

// goRuntime returns the GO* variables of the deployed runtime: what the
// bare loop runs with as the deployed worker's floor.
func (d deployedEnv) goRuntime() []string {
	var out []string
	for _, kv := range d.runtime {
		if strings.HasPrefix(kv, "GO") {
			out = append(out, kv)
		}
	}
	return out
}

// readDeployedEnv reads the worker container's environment from the
// template BINARY_CPU_BICEP names (the repository's by default).
func readDeployedEnv(b *testing.B, agentEndpoint string) deployedEnv {
	b.Helper()
	path := os.Getenv(envBinaryBicep)
	if path == "" {
		root, err := moduleRoot()
		if err != nil {
			b.Fatal(err)
		}
		path = filepath.Join(root, "infra", "bicep", "modules", "containerapps.bicep")
	}
	vars, err := deployenv.Read(path, "worker", "worker")
	if err != nil {
		b.Fatal(err)
	}
	rt, err := deployenv.Runtime(vars)
	if err != nil {
		b.Fatalf("%s: %v", path, err)
	}
	b.Logf("worker-deployed: %s from %s, and the agent's OTLP endpoint over gRPC", strings.Join(rt, " "), path)
	return deployedEnv{runtime: rt, agent: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + agentEndpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
	}}
}

// binaryVariants returns the variants named by BINARY_CPU_VARIANTS; otlp is
// the endpoint of the no-op collector the telemetry variant exports to,
// dep the deployed environment.
func binaryVariants(b *testing.B, otlp string, dep deployedEnv) []binaryVariant {
	deployed := func(name string, override ...string) binaryVariant {
		env := append(append(slices.Clone(dep.runtime), dep.agent...), override...)
		return binaryVariant{name: name, binary: "orderworker", env: env, floor: "bare-deployed", agent: true}
	}
	all := []binaryVariant{
		{name: "bare", binary: "bareloop", bare: true},
		// Production defaults: LOG_FORMAT auto (JSON, stderr is not a
		// terminal), LOG_LEVEL info, telemetry off, no health listener,
		// the fact cache on.
		{name: "worker", binary: "orderworker"},
		// The bare loop at the deployed runtime settings (GOGC,
		// GOMEMLIMIT): the floor of the deployed worker, so that both
		// collect under the same rules.
		{name: "bare-deployed", binary: "bareloop", bare: true, env: dep.goRuntime()},
		// The worker as the Bicep deploys it, telemetry to the agent.
		deployed("worker-deployed"),
		{name: "worker-warn", binary: "orderworker", env: []string{"LOG_LEVEL=warn"}},
		// The fact cache off: what its memory costs the collector.
		{name: "worker-nocache", binary: "orderworker", env: []string{"WORKER_FACT_CACHE=0"}},
		// Traces, metrics and logs exported over OTLP http/protobuf to a
		// collector that answers every export with an empty 200.
		{name: "worker-otel", binary: "orderworker", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp}},
		// The levers, each the deployed worker with one setting changed.
		// Every trace sampled (the sampler's lever off):
		deployed("deployed-all-traces", "OTEL_TRACES_SAMPLER=parentbased_always_on"),
		// No ordinary trace, only what the worker keeps (redeliveries,
		// failures):
		deployed("deployed-kept-only", "OTEL_TRACES_SAMPLER_ARG=0"),
		// The log records exported over OTLP as well as to the console:
		deployed("deployed-logs-otlp", "OTEL_LOGS_EXPORTER=otlp"),
		// Larger export batches and queue than the SDK's 512 and 2048:
		deployed("deployed-batch-2048", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2048", "OTEL_BSP_MAX_QUEUE_SIZE=8192"),
		// Smaller export batches, sent sooner: fewer spans held live.
		deployed("deployed-batch-128", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=128", "OTEL_BSP_SCHEDULE_DELAY=1000"),
		// The Cosmos DB SDK's own spans off (AZURE_TRACING_DISABLED):
		deployed("deployed-no-azure-spans", "AZURE_TRACING_DISABLED=true"),
		// Both at GOGC=200 (the deployed GOMEMLIMIT kept): the setting
		// the deployment had before 400, twice the collections.
		{name: "bare-gogc200", binary: "bareloop", bare: true, env: append(dep.goRuntime(), "GOGC=200")},
		func() binaryVariant {
			v := deployed("deployed-gogc200", "GOGC=200")
			v.floor = "bare-gogc200"
			return v
		}(),
		// A parent-based ratio: it follows the sampled flag of the
		// producer's trace context (run with BINARY_CPU_TRACEPARENT=1).
		deployed("deployed-parentbased", "OTEL_TRACES_SAMPLER=parentbased_traceidratio"),
		// The deployed worker at the runtime's defaults, against the bare
		// loop at its defaults:
		func() binaryVariant {
			v := deployed("deployed-runtime-defaults", "GOGC=100", "GOMEMLIMIT=off")
			v.floor = ""
			return v
		}(),
	}
	defaults := all[:4:4]
	if os.Getenv(envBinaryOther) != "" {
		// The orderworker of another checkout, at production defaults: a
		// change against its base, side by side.
		other := binaryVariant{name: "other", binary: filepath.Join("other", "orderworker")}
		all = append(all, other)
		defaults = append(defaults, other)
	}
	spec := os.Getenv(envBinaryVariants)
	switch spec {
	case "":
		return defaults
	case "all":
		return all
	}
	var out []binaryVariant
	for name := range strings.SplitSeq(spec, ",") {
		i := slices.IndexFunc(all, func(v binaryVariant) bool { return v.name == strings.TrimSpace(name) })
		if i < 0 {
			var names []string
			for _, v := range all {
				names = append(names, v.name)
			}
			b.Fatalf("%s: no variant %q (%s, other with %s set, or all)", envBinaryVariants, name, strings.Join(names, ", "), envBinaryOther)
		}
		out = append(out, all[i])
	}
	return out
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// BenchmarkBinaryCPU measures the real orderworker binary, as the tree
// builds it, against the bare-loop binary (test/bench/cmd/bareloop: the same
// receive → one transactional batch, on a conflict a point read and a hash
// compare → complete, with the unmodified azservicebus and azcosmos SDKs
// and the worker's concurrency semantics), both as processes of their own,
// against the same test broker (in this process, package test/sbbroker) and
// the same cosmium (a child process), through a counting proxy (this
// process) that counts the Cosmos DB round trips.
//
// In each cell (concurrency 1 and 16, 0 % and 50 % copies) the consumers
// take turns, BINARY_CPU_ROUNDS (5) phases each, in the order AB BA AB …
// (with more variants ABC CBA …), so that a drift of the machine's load
// weighs on all alike. A phase prefills the queue with warm-up + b.N +
// 2·concurrency messages (the share of copies each of another order stored
// before, the way that consumer stores it, so a copy is the first the
// process sees of its order and the fact cache never answers it), starts
// the consumer, and reads its CPU time (utime + stime of /proc/PID/stat,
// every thread and the garbage collector, in 10 ms ticks) when the broker
// has counted the warm-up's completions (BINARY_CPU_WARMUP, 300) and again
// at warm-up + b.N: the window. Its CPU per message is the CPU between the
// two reads divided by the completions between them (both read back to
// back every millisecond, so the window is whatever lies between the two
// reads, not an assumed count); start-up, the connection set-up, the first
// messages and the shut-down lie outside it, and the 2·concurrency messages
// behind it keep the handlers busy to its end. b.N is the window's length
// in messages: run with -benchtime 2000x or more (b.N below 100, the
// framework's first probing call, measures nothing).
//
// Metrics per consumer V: V-cpu-µs/msg (the median of its phases) with
// V-min and V-max; for the workers V/bare (ratio of the medians), V-pair
// (the median ratio of a phase to the adjacent bare phase of the same round)
// and own-V-µs/msg (median minus the bare loop's median); V-rt/msg (Cosmos
// DB round trips per message in the window); V-allocs/msg, V-alloc-KB/msg,
// own-V-allocs/msg (minus the bare loop's), V-heap-MB (heap objects at the
// window's end), V-gc/kmsg (collections per 1000 messages), V-gc-µs/msg
// (the CPU the runtime estimates its collector spent, a part of
// V-cpu-µs/msg) and V-gcpause-µs/msg (the part of it that is the
// stop-the-world pauses, which the runtime counts as GOMAXPROCS times their
// wall time: a pause that waits for a thread the kernel has descheduled
// counts in full although no CPU is spent), V-live-MB (the heap the last
// collection found live) and V-goroutines (from the probe: runtime/metrics
// of the process); V-VmHWM-MB (the process's peak resident set, highest of
// its phases) and V-anon-MB / V-file-MB (RssAnon and RssFile at the
// window's end, median); for a variant that exports to the agent's
// stand-in, V-spans/kmsg and V-logs/kmsg (what the collector received over
// the whole phase, per 1000 messages).
//
// The deployed variants (worker-deployed and the levers deployed-*) run
// with the worker container's OTEL_*, GO* and LOG_* variables read from
// the Bicep when the benchmark starts (BINARY_CPU_BICEP names another
// template) and the agent's OTLP endpoint over gRPC, and are compared with
// bare-deployed, the bare loop at the same GO* settings (V/bare-deployed);
// BINARY_CPU_TRACEPARENT=1 gives every message a sampled traceparent, as
// the deployed producer's messages carry.
//
// The probe (test/bench/cmd/bareloop/probe.go) is compiled into both
// binaries with the build tag benchprobe, into orderworker as a
// go build -overlay file, so the tree is not touched; it only listens on a
// loopback port and answers the two reads at the window's ends (made
// outside the CPU window). BINARY_CPU_PROBE=0 builds both without it.
// BINARY_CPU_OTHER=DIR, the root of another checkout of this module (a
// git worktree of the base of a change, say), adds the variant "other":
// that tree's orderworker, built with the same probe, alternated with this
// tree's in the same run, so that a change is measured against its base
// under the same load rather than across two runs.
// BINARY_CPU_GOGC and BINARY_CPU_GOMEMLIMIT set GOGC and GOMEMLIMIT in
// every binary alike, to see how much of a difference is the collector's:
// at the runtime's 4 MB minimum heap goal, a process with more live heap
// collects more often. (GOGC=off leaves the collector out of the window,
// but every allocation then takes fresh memory from the kernel: on this
// project's 2-core VM that raised both consumers' CPU by half.)
// BINARY_CPU_PROFILE=DIR writes a CPU profile of every window there, and
// after it a heap profile of what was live at its end (NAME.heap.pprof,
// sampled every BINARY_CPU_HEAPRATE bytes, 4096 to see small holders;
// profiling costs CPU of its own, and a fine heap sample changes how often
// a process collects: read the figures of such a run for the profiles
// only). BINARY_CPU_PERF=DIR records every window with Linux perf (perf
// record -g -p PID, 1999 samples a second, kernel time included) into
// DIR/NAME.perf.data instead: a sampler outside the process, which leaves
// its heap and its collector as they are. Every phase is logged (all of them with -v; b.Log keeps
// the first ten otherwise). No figure is asserted.
func BenchmarkBinaryCPU(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads the consumer's CPU time from /proc")
	}
	rounds := envInt(b, envBinaryRounds, 5)
	warmUp := envInt(b, envBinaryWarmUp, 300)
	probe := os.Getenv(envBinaryProbe) != "0"
	profileDir := os.Getenv(envBinaryProfile)
	perfDir := os.Getenv(envBinaryPerf)
	if perfDir != "" {
		if _, err := exec.LookPath("perf"); err != nil {
			b.Fatalf("%s is set, but perf is not installed: %v", envBinaryPerf, err)
		}
	}
	bin := buildBinaries(b, probe)

	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty export response
	}))
	defer collector.Close()
	agent := startOTLPCollector(b)
	variants := binaryVariants(b, collector.URL, readDeployedEnv(b, agent.endpoint()))

	srv := cosmiumtest.Start(b)
	c := newCosmos(b, srv, 0)
	proxy, err := bench.NewLatencyProxy(srv.Endpoint, bench.ProxyOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()

	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	q, err := ns.CreateQueue(cpuQueue, sbqueue.QueueOptions{LockDuration: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer broker.Close()

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"SERVICEBUS_CONNECTION_STRING=" + broker.ConnectionString(),
		"SERVICEBUS_QUEUE=" + cpuQueue,
		"COSMOS_ENDPOINT=" + proxy.Endpoint(),
		"COSMOS_KEY=" + srv.Key,
		"COSMOS_DATABASE=" + benchDatabase,
		"COSMOS_CONTAINER=" + benchContainer,
	}
	if gogc := os.Getenv(envBinaryGOGC); gogc != "" {
		env = append(env, "GOGC="+gogc)
	}
	if limit := os.Getenv(envBinaryMemLimit); limit != "" {
		env = append(env, "GOMEMLIMIT="+limit)
	}
	for _, conc := range []int{1, 16} {
		for _, dup := range []float64{0, 0.5} {
			cell := fmt.Sprintf("conc=%d/dup=%d%%", conc, int(dup*100))
			b.Run(cell, func(b *testing.B) {
				if b.N < 100 {
					return // the framework's probing call
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
				defer cancel()
				b.StopTimer()
				results := make(map[string][]binaryPhase)
				for r, order := range alternation(len(variants), rounds) {
					for _, i := range order {
						v := variants[i]
						p := binaryPhaseRun{
							b: b, ctx: ctx, c: c, q: q, proxy: proxy, bin: bin, env: env, v: v,
							conc: conc, dup: dup, warmUp: warmUp, n: b.N, probe: probe,
						}
						if v.agent {
							p.agent = agent
						}
						if profileDir != "" {
							p.profile = filepath.Join(profileDir, fmt.Sprintf("c%d-d%d-%s-%d.pprof", conc, int(dup*100), v.name, r))
						}
						if perfDir != "" {
							p.perf = filepath.Join(perfDir, fmt.Sprintf("c%d-d%d-%s-%d.perf.data", conc, int(dup*100), v.name, r))
						}
						res := p.run()
						results[v.name] = append(results[v.name], res)
						line := fmt.Sprintf("round %d %-11s %7.1f µs/msg, %s over %d msgs, %.2f rt/msg, %.1f allocs/msg, %.1f KB/msg, %.1f GCs/kmsg, GC %.1f µs/msg (pauses %.1f), live heap %.2f MB, VmHWM %.1f MB, anon %.1f MB, file %.1f MB, %d deliveries, %d renewals, load %s",
							r, v.name, res.cpuPerMsg(), res.exported(), res.n, res.rtPerMsg(), res.allocsPerMsg(), perMsg(res.allocBytes, res.allocN)/1024,
							1000*perMsg(res.gcCycles, res.allocN), 1e6*perMsg(res.gcCPU, res.allocN), 1e6*perMsg(res.gcPause, res.allocN), mb(int64(res.liveHeap)), mb(res.vmHWM), mb(res.rssAnon), mb(res.rssFile), res.delivered, res.renewed, loadAverage())
						// b.Logf keeps only the first ten lines of a
						// benchmark's log. With -v every line goes to
						// stdout, where the benchmark's name has a line
						// of its own and its results repeat it.
						if testing.Verbose() {
							fmt.Println(b.Name(), line)
						} else {
							b.Log(line)
						}
					}
				}
				reportBinaryCPU(b, variants, results)
			})
		}
	}
}

// alternation returns the order of the variants in each of rounds rounds:
// 0 1 … k−1 in even rounds, reversed in odd ones (AB BA AB …).
func alternation(k, rounds int) [][]int {
	out := make([][]int, rounds)
	for r := range out {
		out[r] = make([]int, k)
		for i := range k {
			out[r][i] = i
			if r%2 == 1 {
				out[r][i] = k - 1 - i
			}
		}
	}
	return out
}

// buildBinaries builds orderworker and bareloop into a temporary directory,
// with the probe (build tag benchprobe, an overlay file for orderworker)
// when probe is set.
func buildBinaries(b *testing.B, probe bool) string {
	b.Helper()
	dir := b.TempDir()
	root, err := moduleRoot()
	if err != nil {
		b.Fatal(err)
	}
	probeFile := filepath.Join(root, "test", "bench", "cmd", "bareloop", "probe.go")
	build := func(tree, out string, pkgs ...string) {
		args := []string{"build", "-o", out}
		if probe {
			overlay := filepath.Join(out, "overlay.json")
			o := map[string]map[string]string{"Replace": {
				filepath.Join(tree, "cmd", "orderworker", "zz_benchprobe.go"): probeFile,
			}}
			data, _ := json.Marshal(o)
			if err := os.WriteFile(overlay, data, 0o600); err != nil {
				b.Fatal(err)
			}
			args = append(args, "-tags", "benchprobe", "-overlay", overlay)
		}
		args = append(args, pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Dir = tree
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: go %s: %v\n%s", tree, strings.Join(args, " "), err, out)
		}
	}
	build(root, dir, "github.com/idempotent-consumer/sbcosmos/cmd/orderworker", "github.com/idempotent-consumer/sbcosmos/test/bench/cmd/bareloop")
	if other := os.Getenv(envBinaryOther); other != "" {
		// The same probe file, so that both workers answer the same reads.
		out := filepath.Join(dir, "other")
		if err := os.Mkdir(out, 0o755); err != nil {
			b.Fatal(err)
		}
		build(other, out, "./cmd/orderworker")
	}
	return dir
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// binaryPhaseRun is one phase: one consumer process on one prefilled
// backlog.
type binaryPhaseRun struct {
	b       *testing.B
	ctx     context.Context
	c       *cosmos
	q       *sbqueue.Queue
	proxy   *bench.LatencyProxy
	bin     string
	env     []string
	v       binaryVariant
	conc    int
	dup     float64
	warmUp  int
	n       int
	probe   bool
	profile string         // a file for the window's CPU profile, or empty
	perf    string         // a file for the window's perf record, or empty
	agent   *otlpCollector // the collector the variant exports to, or nil
}

// binaryPhase is what one phase measured. The window's ends are marks:
// what was read at the first poll at which the broker had counted the
// warm-up's completions, and at the first at warm-up + n.
type binaryPhase struct {
	n           int64 // completions between the CPU reads
	cpu         time.Duration
	requests    int64 // Cosmos DB round trips between the CPU reads
	allocN      int64 // completions between the probe's reads
	allocs      float64
	allocBytes  float64
	gcCycles    float64
	gcCPU       float64 // seconds of CPU the runtime estimates its collector spent in the window
	gcPause     float64 // the part of gcCPU that is stop-the-world pauses, counted as GOMAXPROCS × their wall time
	heap        float64 // bytes of heap objects at the window's end
	liveHeap    float64 // bytes the last collection before the window's end found live
	vmHWM       int64
	rssAnon     int64
	rssFile     int64
	goroutines  float64
	probeActive bool
	// The broker's counts over the whole phase: deliveries (more than
	// the messages when some were redelivered) and lock renewals.
	delivered, renewed int64
	// What the collector received over the whole phase (the exporters
	// flush at the drain), and of how many messages; total 0: no agent.
	received otlpCounts
	total    int64
}

// exported describes what reached the collector per 1000 messages.
func (p binaryPhase) exported() string {
	if p.total == 0 {
		return "no export"
	}
	k := float64(p.total) / 1000
	return fmt.Sprintf("exported %.1f spans, %.1f log records, %.1f metric points /kmsg", float64(p.received.spans)/k, float64(p.received.logs)/k, float64(p.received.points)/k)
}

func (p binaryPhase) cpuPerMsg() float64 { return perMsg(float64(p.cpu)/1e3, p.n) }
func (p binaryPhase) rtPerMsg() float64  { return perMsg(float64(p.requests), p.n) }
func (p binaryPhase) allocsPerMsg() float64 {
	return perMsg(p.allocs, p.allocN)
}

func perMsg(x float64, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return x / float64(n)
}

func (r binaryPhaseRun) run() binaryPhase {
	b := r.b
	b.Helper()
	prefix := uniquePrefix("bin" + strings.ReplaceAll(r.v.name, "-", ""))
	total := r.warmUp + r.n + 2*r.conc
	var pool []idempotent.Message
	if r.dup > 0 {
		pool = stream(prefix+"p", max(copiesOf(total, r.dup), 1), 0, nil)
		h := processorHandler(newProcessor(r.c.store))
		if r.v.bare {
			h = func(ctx context.Context, m idempotent.Message) (outcome, error) {
				_, err := bareloop.Handle(ctx, r.c.container, m.ID, m.Body)
				return created, err
			}
		}
		if err := drive(r.ctx, seedConcurrency, pool, h, &tally{}); err != nil {
			b.Fatalf("%s: seed: %v", r.v.name, err)
		}
	}
	msgs := stream(prefix, total, r.dup, pool)
	for i := 0; i < len(msgs); i += 100 {
		batch := make([]sbqueue.Message, 0, 100)
		for _, m := range msgs[i:min(i+100, len(msgs))] {
			sm := sbqueue.Message{MessageID: m.ID, Body: m.Body}
			if os.Getenv(envBinaryTrace) == "1" {
				sm.ApplicationProperties = map[string]any{"traceparent": sampledTraceparent(m.ID)}
			}
			batch = append(batch, sm)
		}
		if _, err := r.q.SendBatch(r.ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	base := r.q.Counts()
	var sent0 otlpCounts
	if r.agent != nil {
		sent0 = r.agent.counts()
	}
	dir := b.TempDir()
	env := append(slices.Clone(r.env), fmt.Sprintf("WORKER_CONCURRENCY=%d", r.conc))
	env = append(env, r.v.env...)
	probeFile := filepath.Join(dir, "probe")
	if r.probe {
		env = append(env, "BENCH_PROBE_FILE="+probeFile)
		if r.profile != "" && os.Getenv(envBinaryHeapRate) != "" {
			// A heap profile that sees small holders too, from the
			// packages' init on; its buckets are live heap of their own,
			// which changes how often the process collects.
			env = append(env, "GODEBUG=memprofilerate="+os.Getenv(envBinaryHeapRate))
		}
	}
	logFile, err := os.Create(filepath.Join(dir, "output"))
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(r.bin, r.v.binary))
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	fail := func(format string, args ...any) {
		out, _ := os.ReadFile(logFile.Name())
		b.Fatalf("%s: %s\noutput:\n%s", r.v.name, fmt.Sprintf(format, args...), tail(string(out), 4000))
	}
	pid := cmd.Process.Pid
	done := func() int64 { return r.q.Counts().Completed - base.Completed }

	var res binaryPhase
	var probeAddr string
	var m0 map[string]float64
	var done0 int64
	wait := func(what string, target int64) {
		for done() < target {
			select {
			case err := <-exited:
				exited <- err
				fail("exited (%v) before %s: %d of %d completed", err, what, done(), total)
			case <-r.ctx.Done():
				fail("waiting for %s: %v (%d of %d completed)", what, r.ctx.Err(), done(), total)
			case <-time.After(time.Millisecond):
			}
		}
	}

	// The window opens: the probe's read first (its CPU is not counted),
	// then the CPU and the broker's count, back to back.
	wait("the warm-up", int64(r.warmUp))
	if r.probe {
		addr, err := os.ReadFile(probeFile)
		if err != nil {
			fail("the probe's address: %v", err)
		}
		probeAddr = string(addr)
		if m0, err = probeMetrics(probeAddr); err != nil {
			fail("%v", err)
		}
		done0 = done()
		if r.profile != "" {
			if err := probeGet(probeAddr, "/bench/cpuprofile/start?file="+r.profile); err != nil {
				fail("%v", err)
			}
		}
	}
	var perf *exec.Cmd
	if r.perf != "" {
		// Sampled from outside: the process's heap and collector are
		// untouched, unlike with the runtime's profiler.
		perf = exec.Command("perf", "record", "-q", "-F", "1999", "-g", "-p", strconv.Itoa(pid), "-o", r.perf)
		if err := perf.Start(); err != nil {
			fail("perf record: %v", err)
		}
	}
	cpu0, err := bench.ProcessCPU(pid)
	if err != nil {
		fail("%v", err)
	}
	n0, req0 := done(), r.proxy.Requests()

	wait("the window's end", int64(r.warmUp+r.n))
	if perf != nil {
		// perf writes its file on SIGINT and then ends by the signal.
		_ = perf.Process.Signal(os.Interrupt)
		if err := perf.Wait(); err != nil && !interrupted(perf.ProcessState) {
			fail("perf record: %v", err)
		}
	}
	cpu1, err := bench.ProcessCPU(pid)
	if err != nil {
		fail("%v", err)
	}
	n1, req1 := done(), r.proxy.Requests()
	res.n, res.cpu, res.requests = n1-n0, cpu1-cpu0, req1-req0
	st, err := procStatus(pid)
	if err != nil {
		fail("%v", err)
	}
	res.rssAnon, res.rssFile = st["RssAnon"], st["RssFile"]
	if r.probe {
		if r.profile != "" {
			if err := probeGet(probeAddr, "/bench/cpuprofile/stop"); err != nil {
				fail("%v", err)
			}
		}
		m1, err := probeMetrics(probeAddr)
		if err != nil {
			fail("%v", err)
		}
		if r.profile != "" { // after the metrics: it runs a collection
			heap := strings.TrimSuffix(r.profile, ".pprof") + ".heap.pprof"
			if err := probeGet(probeAddr, "/bench/heapprofile?file="+heap); err != nil {
				fail("%v", err)
			}
		}
		res.probeActive = true
		res.allocN = done() - done0
		res.allocs = m1["/gc/heap/allocs:objects"] - m0["/gc/heap/allocs:objects"]
		res.allocBytes = m1["/gc/heap/allocs:bytes"] - m0["/gc/heap/allocs:bytes"]
		res.gcCycles = m1["/gc/cycles/total:gc-cycles"] - m0["/gc/cycles/total:gc-cycles"]
		res.gcCPU = m1["/cpu/classes/gc/total:cpu-seconds"] - m0["/cpu/classes/gc/total:cpu-seconds"]
		res.gcPause = m1["/cpu/classes/gc/pause:cpu-seconds"] - m0["/cpu/classes/gc/pause:cpu-seconds"]
		res.heap = m1["/memory/classes/heap/objects:bytes"]
		res.liveHeap = m1["/gc/heap/live:bytes"]
		res.goroutines = m1["/sched/goroutines:goroutines"]
	}

	// The rest of the backlog, then a drain: SIGTERM, exit status 0.
	wait("the whole backlog", int64(total))
	if st, err = procStatus(pid); err == nil {
		res.vmHWM = st["VmHWM"]
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		fail("SIGTERM: %v", err)
	}
	select {
	case err := <-exited:
		killed = true
		if err != nil {
			fail("after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		fail("still running a minute after SIGTERM")
	}
	got := r.q.Counts()
	if got.Completed-base.Completed != int64(total) || got.DeadLettered != base.DeadLettered {
		fail("completed %d, dead-lettered %d of %d messages, want all completed", got.Completed-base.Completed, got.DeadLettered-base.DeadLettered, total)
	}
	res.delivered, res.renewed = got.Delivered-base.Delivered, got.Renewed-base.Renewed
	if r.agent != nil {
		sent1 := r.agent.counts()
		res.received = otlpCounts{sent1.spans - sent0.spans, sent1.logs - sent0.logs, sent1.points - sent0.points}
		res.total = int64(total)
	}
	return res
}

// sampledTraceparent returns a W3C traceparent with the sampled flag set,
// its trace id and parent id derived from id: what a producer whose sampler
// keeps every trace sends with each message.
func sampledTraceparent(id string) string {
	sum := sha256.Sum256([]byte(id))
	return fmt.Sprintf("00-%x-%x-01", sum[:16], sum[16:24])
}

// interrupted reports whether a process ended by SIGINT.
func interrupted(st *os.ProcessState) bool {
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func mb(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// procStatus returns the kB fields of /proc/PID/status (VmHWM, VmRSS,
// RssAnon, RssFile, …) in bytes.
func procStatus(pid int) (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64)
	for line := range strings.SplitSeq(string(data), "\n") {
		name, v, ok := strings.Cut(line, ":")
		f := strings.Fields(v)
		if !ok || len(f) != 2 || f[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[name] = kb << 10
		}
	}
	return out, nil
}

func probeMetrics(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/bench/metrics")
	if err != nil {
		return nil, fmt.Errorf("the probe: %w", err)
	}
	defer resp.Body.Close()
	var m map[string]float64
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("the probe's metrics: %w", err)
	}
	return m, nil
}

func probeGet(addr, path string) error {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return fmt.Errorf("the probe: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the probe: %s: %s", path, resp.Status)
	}
	return nil
}

// loadAverage is the first field of /proc/loadavg, the 1-minute load.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

// spread is the median, minimum and maximum of some figures.
type spread struct{ median, min, max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	return spread{median: median(slices.Clone(xs)), min: slices.Min(xs), max: slices.Max(xs)}
}

// pairedRatios returns, for each round, the ratio of a's phase to b's phase
// of the same round (adjacent in the alternation).
func pairedRatios(a, b []float64) []float64 {
	out := make([]float64, 0, min(len(a), len(b)))
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// floorOf is the variant v is compared with: its floor when that ran,
// else the bare loop.
func floorOf(v binaryVariant, results map[string][]binaryPhase) string {
	if v.floor != "" && len(results[v.floor]) > 0 {
		return v.floor
	}
	return "bare"
}

// reportBinaryCPU reports the metrics of BenchmarkBinaryCPU for one cell.
func reportBinaryCPU(b *testing.B, variants []binaryVariant, results map[string][]binaryPhase) {
	b.ReportMetric(0, "ns/op")
	field := func(name string, f func(binaryPhase) float64) []float64 {
		var xs []float64
		for _, p := range results[name] {
			xs = append(xs, f(p))
		}
		return xs
	}
	for _, v := range variants {
		floorName := floorOf(v, results)
		bare := field(floorName, binaryPhase.cpuPerMsg)
		cpu := spreadOf(field(v.name, binaryPhase.cpuPerMsg))
		b.ReportMetric(cpu.median, v.name+"-cpu-µs/msg")
		b.ReportMetric(cpu.min, v.name+"-min")
		b.ReportMetric(cpu.max, v.name+"-max")
		b.ReportMetric(spreadOf(field(v.name, binaryPhase.rtPerMsg)).median, v.name+"-rt/msg")
		if !v.bare && len(bare) > 0 {
			floor := spreadOf(bare).median
			b.ReportMetric(cpu.median/floor, v.name+"/"+floorName)
			b.ReportMetric(spreadOf(pairedRatios(field(v.name, binaryPhase.cpuPerMsg), bare)).median, v.name+"-pair")
			b.ReportMetric(cpu.median-floor, "own-"+v.name+"-µs/msg")
		}
		if v.name == "bare-deployed" && len(results["bare"]) > 0 {
			b.ReportMetric(cpu.median/spreadOf(field("bare", binaryPhase.cpuPerMsg)).median, "bare-deployed/bare")
		}
		if len(results[v.name]) > 0 && results[v.name][0].total > 0 {
			perK := func(f func(otlpCounts) int64) func(binaryPhase) float64 {
				return func(p binaryPhase) float64 { return 1000 * float64(f(p.received)) / float64(p.total) }
			}
			b.ReportMetric(spreadOf(field(v.name, perK(func(c otlpCounts) int64 { return c.spans }))).median, v.name+"-spans/kmsg")
			b.ReportMetric(spreadOf(field(v.name, perK(func(c otlpCounts) int64 { return c.logs }))).median, v.name+"-logs/kmsg")
		}
		if len(results[v.name]) > 0 && results[v.name][0].probeActive {
			allocs := spreadOf(field(v.name, binaryPhase.allocsPerMsg)).median
			b.ReportMetric(allocs, v.name+"-allocs/msg")
			if !v.bare && len(results[floorName]) > 0 && results[floorName][0].probeActive {
				b.ReportMetric(allocs-spreadOf(field(floorName, binaryPhase.allocsPerMsg)).median, "own-"+v.name+"-allocs/msg")
			}
			b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return perMsg(p.allocBytes, p.allocN) / 1024 })).median, v.name+"-alloc-KB/msg")
			b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return p.heap / (1 << 20) })).median, v.name+"-heap-MB")
			b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return 1000 * perMsg(p.gcCycles, p.allocN) })).median, v.name+"-gc/kmsg")
			b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return 1e6 * perMsg(p.gcCPU, p.allocN) })).median, v.name+"-gc-µs/msg")
			b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return 1e6 * perMsg(p.gcPause, p.allocN) })).median, v.name+"-gcpause-µs/msg")
			b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return p.liveHeap / (1 << 20) })).median, v.name+"-live-MB")
			b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return p.goroutines })).median, v.name+"-goroutines")
		}
		b.ReportMetric(slices.Max(field(v.name, func(p binaryPhase) float64 { return mb(p.vmHWM) })), v.name+"-VmHWM-MB")
		b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return mb(p.rssAnon) })).median, v.name+"-anon-MB")
		b.ReportMetric(spreadOf(field(v.name, func(p binaryPhase) float64 { return mb(p.rssFile) })).median, v.name+"-file-MB")
	}
}
