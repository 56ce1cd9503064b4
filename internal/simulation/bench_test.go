package simulation_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/simulation"
)

// BenchmarkPipeline runs the whole simulated pipeline (producer, queue
// model, three real worker loops, the consumer, the in-memory store and the
// checker) and reports messages per second, per core, and allocations per
// message.
func BenchmarkPipeline(b *testing.B) {
	for _, bc := range []struct {
		name   string
		faults simulation.FaultRates
	}{
		{"faults=off", simulation.FaultRates{}},
		{"faults=on", simulation.DefaultFaultRates()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := simulation.Config{Orders: 1000, Workers: 3, Concurrency: 8, Faults: bc.faults}
			var msgs, deliveries int64
			var elapsed time.Duration
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; b.Loop(); i++ {
				cfg.Seed = uint64(i)
				start := time.Now()
				rep, err := simulation.Run(context.Background(), cfg, nil)
				elapsed += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if err := rep.Verdict(); err != nil {
					b.Fatal(err)
				}
				msgs += int64(rep.Enqueued)
				deliveries += rep.Deliveries
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
