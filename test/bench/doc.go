// Package bench measures what the idempotent consumer costs, side by side
// with the alternatives a reader would otherwise write, against cosmium (a
// real Cosmos DB NoSQL emulator, see test/cosmiumtest) through the
// unmodified azcosmos SDK. Its benchmarks are the figures of docs/cost.md,
// "What it costs"; nothing here is production code.
//
// # The matrix (BenchmarkMatrix)
//
// Every cell of the matrix, named
//
//	BenchmarkMatrix/latency=5ms/dup=25%/conc=16
//
// runs the same message stream (the same orders, the same duplicates) through
// six contestants in the same process, taking turns in a rotating order
// (five turns per cell unless -matrix.rounds says otherwise), so that their
// ratios come from one run on one machine load:
//
//   - project: order.Processor on cosmosstore.Store, the project's decision
//     path as the worker calls it (decode, validate, request hash, one
//     transactional batch; on a conflict a point read and a hash compare).
//   - worker: the whole worker.Worker loop (bounded handlers, deadlines,
//     lock renewal, settlement, logging) around the same processor, fed by
//     the in-process Service Bus model (test/sbqueue) through its
//     azservicebus-shaped receiver, so the messages are received, locked and
//     completed as the worker does it, without AMQP.
//   - sdk: the same calls made directly with azcosmos: decode the body,
//     marshal the order document and its event, one transactional batch;
//     on a conflict a point read and a compare of the stored hash. No
//     validation and no canonical hash: the floor for the same round trips.
//   - bare: the sdk contestant's calls in the least a queue consumer does:
//     one goroutine receives from the same in-process queue model as many
//     messages as there are free handlers, each is handled and completed
//     (bareLoop, the bare loop of BenchmarkCPUPerMessage). It is the
//     worker's floor: the worker pays for receiving and settling as any
//     queue consumer does, which the sdk contestant, handed its messages
//     in memory, does not.
//   - upsert: the non-idempotent baseline: the same two documents upserted
//     in one transactional batch; a duplicate overwrites the order.
//   - naive: the naive recipe of the RocketMQ business-key idempotency write-up (a point read of the idempotency key;
//     if absent, insert; its Redis look-up in front is left out): two round
//     trips for a new order, one for a duplicate, and a race between the
//     read and the insert that the recipe does not handle (counted as
//     naive-races/op when it happens).
//
// Duplicates are copies of orders that were stored before the timed part
// (for dup=100% every message is one), each of another order, so that each
// copy is the first the consumer sees of its order, as when the original
// went to another worker: a cell measures the store's path for a copy, not
// races and not a cache. BenchmarkRepeatedCopies is the other extreme: the
// same 64 orders copied over and over. Each contestant writes under its own
// order-id prefix.
//
// The latency=5ms cells put a LatencyProxy between the SDK and cosmium,
// which delays every HTTP round trip by 5 ms. azcosmos reads the account
// document from the endpoint it is given and then sends every request to the
// host the account advertises (azcosmos v1.5.0 replaces the request's host
// with the resolved endpoint's: cosmos_client_retry_policy.go lines
// 207-208), and cosmium v0.1.20 advertises https://<-Host>:<-Port>/, its own
// listener (api/config/config.go line 56; it has no flag to advertise
// another port), so the proxy rewrites the advertised endpoints of the
// account document to itself; without that, only the first request would be
// delayed.
//
// Metrics per cell: <contestant>-msgs/s; project/sdk, worker/sdk,
// worker/bare, project/naive and worker/naive, ratios of throughput; with latency,
// <contestant>-share, the throughput as a share of concurrency ÷ latency
// (the rate at which the handlers could issue one round trip each if
// nothing but the injected latency took time), and <contestant>-rt/msg, the
// Cosmos DB round trips per message the proxy counted. TestRoundTripsPerPath
// counts them exactly for each path of the processor.
//
// # CPU per message (BenchmarkCPUPerMessage)
//
// It runs, in one process and one run, taking turns (six phases, ABBAAB),
// the whole worker (worker.Worker, order.Processor, cosmosstore.Store, a
// JSON logger) receiving from the project's Service Bus test broker through
// the real azservicebus client, and a bare loop making the same SDK calls
// (azservicebus receive and complete, the sdk contestant's azcosmos calls).
// The broker and cosmium run as child processes, so the process's CPU time
// (getrusage) is the consumer's alone. It reports CPU µs and allocations
// per settled message for both, their ratio, the difference (the project's
// own code), and the peak resident set (VmHWM) of each.
//
// # The binaries (BenchmarkBinaryCPU)
//
// It builds the real orderworker binary and the bare-loop binary
// (test/bench/cmd/bareloop, the same SDK calls with the worker's concurrency
// semantics) and runs each as a process of its own against one test broker
// and one cosmium, taking turns (AB BA AB …, BINARY_CPU_ROUNDS phases each,
// at concurrency 1 and 16, 0 % and 50 % copies). A phase's CPU per message
// is the process's utime + stime (/proc/PID/stat) over a window of b.N
// completions after a warm-up, counted by the broker; a probe compiled in
// with the build tag benchprobe (into orderworker as an overlay file) serves
// runtime/metrics and CPU profiles from inside the process. It reports
// min/median/max per consumer, the ratios, the project's own CPU and
// allocations, round trips, heap, collections and resident set (VmHWM,
// RssAnon, RssFile). By default it runs bare, worker (both at the runtime's
// defaults, telemetry off), bare-deployed (the bare loop at the deployed GO*
// settings) and worker-deployed: orderworker with exactly the runtime
// environment the Bicep gives the worker container (every OTEL_*, GO* and
// LOG_* variable of infra/bicep/modules/containerapps.bicep, read at run
// time by test/bench/internal/deployenv, or of the template
// BINARY_CPU_BICEP names) plus what the managed OpenTelemetry agent injects,
// its OTLP endpoint over gRPC, here a collector in the benchmark's process
// that counts the spans and log records it receives. The deployed variants
// are compared with bare-deployed. BINARY_CPU_VARIANTS=all adds the levers
// (the deployed worker with one setting changed), the worker at
// LOG_LEVEL=warn and with telemetry exported to a no-op collector.
package bench
