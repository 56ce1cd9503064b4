//go:build unix

package simulation_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// BenchmarkCPUPerOrder runs the simulation as `go run ./test/simulate`
// does (default faults, status changes, payments, inbox consumers) at 1k,
// 4k and 16k orders and reports the process's CPU time (user + system,
// from getrusage, not wall time) per order: a simulation whose cost grows
// linearly shows the same cpu-ms/order at every size. Run it with
// -benchtime 1x; the 16k case takes minutes.
func BenchmarkCPUPerOrder(b *testing.B) {
	for _, orders := range []int{1000, 4000, 16000} {
		b.Run(fmt.Sprintf("orders=%d", orders), func(b *testing.B) {
			cfg := simulation.Config{Orders: orders, Faults: simulation.DefaultFaultRates(), StatusChanges: 0.3}
			var cpu time.Duration
			var n int
			for i := 0; b.Loop(); i++ {
				cfg.Seed = uint64(42 + i)
				before := processCPU(b)
				rep, err := runSim(b, cfg)
				cpu += processCPU(b) - before
				if err != nil {
					b.Fatal(err)
				}
				if err := rep.Verdict(); err != nil {
					b.Fatal(err)
				}
				n += orders
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms/order")
		})
	}
}

// processCPU returns the CPU time the process has used, in user and system
// mode, on every thread.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
