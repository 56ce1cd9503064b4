package simulation_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// BenchmarkPipeline runs the whole simulated pipeline (producer, queue
// models, three real worker loops per queue, the consumers, the in-memory
// store, the payments service and the checker) and reports messages per
// second (on every queue), per core, and allocations per message. The
// parts=orders cases run the order writers alone, without payments, status
// changes or inbox consumers.
func BenchmarkPipeline(b *testing.B) {
	for _, bc := range []struct {
		name        string
		faults      simulation.FaultRates
		ordersAlone bool
	}{
		{"faults=off", simulation.FaultRates{}, false},
		{"faults=on", simulation.DefaultFaultRates(), false},
		{"faults=off/parts=orders", simulation.FaultRates{}, true},
		{"faults=on/parts=orders", simulation.DefaultFaultRates(), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := simulation.Config{Orders: 1000, Workers: 3, Concurrency: 8, Faults: bc.faults,
				DisablePayments: bc.ordersAlone, DisableStatusChanges: bc.ordersAlone, DisableInbox: bc.ordersAlone}
			var msgs, deliveries int64
			var elapsed time.Duration
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; b.Loop(); i++ {
				cfg.Seed = uint64(i)
				start := time.Now()
				rep, err := runSim(b, cfg)
				elapsed += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if err := rep.Verdict(); err != nil {
					b.Fatal(err)
				}
				msgs += int64(rep.Enqueued)
				deliveries += rep.Deliveries
				for _, in := range rep.Inbox {
					msgs += int64(in.Enqueued)
					deliveries += in.Deliveries
				}
			}
			runtime.ReadMemStats(&after)
			perSec := float64(msgs) / elapsed.Seconds()
			b.ReportMetric(perSec, "msgs/s")
			b.ReportMetric(perSec/float64(runtime.GOMAXPROCS(0)), "msgs/s/core")
			b.ReportMetric(float64(deliveries)/float64(msgs), "deliveries/msg")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(msgs), "allocs/msg")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(msgs), "B/msg")
		})
	}
}
