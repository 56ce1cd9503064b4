package bench_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// The matrix's axes. A cell is selected with -bench, for instance
// -bench 'Matrix/latency=5ms/dup=50%/conc=16'.
var (
	matrixLatencies = []time.Duration{0, 5 * time.Millisecond}
	matrixDups      = []float64{0, 0.25, 0.5, 1}
	matrixConcs     = []int{1, 4, 16, 64}
)

// seedConcurrency is how many handlers store the orders that a cell's
// copies duplicate, before its timed part.
const seedConcurrency = 64

// copiesOf returns how many of n messages stream makes copies at share dup.
func copiesOf(n int, dup float64) int { return int(float64(n) * dup) }

// BenchmarkMatrix runs every contestant (see the package documentation) on
// the same stream of b.N messages per cell, taking turns, and reports
// each one's throughput and the ratios between them; with latency, also
// each one's Cosmos DB round trips per message, counted by the proxy
// (<name>-rt/msg). ns/op is suppressed: a cell's time is the sum of six
// contestants'.
func BenchmarkMatrix(b *testing.B) {
	srv := cosmiumtest.Start(b)
	for _, latency := range matrixLatencies {
		b.Run(fmt.Sprintf("latency=%dms", latency.Milliseconds()), func(b *testing.B) {
			c := newCosmos(b, srv, latency)
			for _, dup := range matrixDups {
				b.Run(fmt.Sprintf("dup=%d%%", int(dup*100)), func(b *testing.B) {
					for _, conc := range matrixConcs {
						b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
							matrixCell(b, c, dup, conc, 0)
						})
					}
				})
			}
		})
	}
}

// BenchmarkRepeatedCopies is the matrix's cell for a stream of nothing but
// copies of the same 64 orders, over and over, with 5 ms per round trip at
// concurrency 16: the case of a hot duplicate (a producer that resends in a
// loop, redeliveries to the worker that processed the original), which a
// consumer that remembers what the store confirmed can answer without a
// round trip.
func BenchmarkRepeatedCopies(b *testing.B) {
	srv := cosmiumtest.Start(b)
	c := newCosmos(b, srv, 5*time.Millisecond)
	b.Run("latency=5ms/dup=100%/conc=16/orders=64", func(b *testing.B) {
		matrixCell(b, c, 1, 16, 64)
	})
}

// matrixRounds is how many turns a cell's contestants take: each consumes
// an equal part of its b.N messages per turn. On a loaded machine more
// turns give a steadier median: go test ... ./test/bench -args -matrix.rounds=9.
var matrixRounds = flag.Int("matrix.rounds", 5, "turns each contestant of a matrix cell takes")

// matrixCell measures one cell: each contestant consumes b.N messages of
// which the share dup are copies of orders it stored before the timer ran:
// of as many orders as there are copies, so that each copy is the first
// this consumer sees of its order (as when the original went to another
// worker, or before a restart), or, with repeat > 0, of only that many
// orders, copied over and over.
// The contestants take turns, matrixRounds times (5 unless
// -matrix.rounds says otherwise), in an order that rotates
// from one turn to the next, so that a changing machine load weighs on all
// of them alike; each one's rate is the median of its turns' rates, so that
// a burst of load from other processes on the shared machine that spoils
// fewer than half of a contestant's turns does not decide its figure.
func matrixCell(b *testing.B, c *cosmos, dup float64, conc, repeat int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b.StopTimer()
	streams := make([][]idempotent.Message, len(contestants))
	for i, k := range contestants {
		prefix := uniquePrefix(k.name)
		var pool []idempotent.Message
		if dup > 0 {
			n := max(copiesOf(b.N, dup), 1)
			if repeat > 0 {
				n = min(n, repeat)
			}
			pool = stream(prefix+"p", n, 0, nil)
			if err := k.seed(ctx, c, seedConcurrency, pool); err != nil {
				b.Fatalf("%s: seed: %v", k.name, err)
			}
		}
		streams[i] = stream(prefix, b.N, dup, pool)
	}
	turns := make([][]float64, len(contestants)) // msgs/s of each turn
	reqs := make([]int64, len(contestants))
	var races int64
	rounds := min(max(*matrixRounds, 1), b.N)
	for r := range rounds {
		for j := range contestants {
			i := (j + r) % len(contestants)
			k := contestants[i]
			msgs := streams[i][r*b.N/rounds : (r+1)*b.N/rounds]
			consume, t, err := k.prepare(ctx, c, conc, msgs)
			if err != nil {
				b.Fatalf("%s: %v", k.name, err)
			}
			var before int64
			if c.proxy != nil {
				before = c.proxy.Requests()
			}
			b.StartTimer()
			d, err := consume()
			b.StopTimer()
			if err != nil {
				b.Fatalf("%s: %v", k.name, err)
			}
			if c.proxy != nil {
				reqs[i] += c.proxy.Requests() - before
			}
			turns[i] = append(turns[i], float64(len(msgs))/d.Seconds())
			races += t.raced.Load()
		}
	}
	b.ReportMetric(0, "ns/op")
	rates := make(map[string]float64, len(contestants))
	for i, k := range contestants {
		rates[k.name] = median(turns[i])
		b.ReportMetric(rates[k.name], k.name+"-msgs/s")
		if c.latency > 0 {
			// The rate conc handlers reach if each spends exactly one
			// injected latency per message and nothing else.
			bound := float64(conc) / c.latency.Seconds()
			b.ReportMetric(rates[k.name]/bound, k.name+"-share")
			b.ReportMetric(float64(reqs[i])/float64(b.N), k.name+"-rt/msg")
		}
	}
	for _, r := range []struct{ a, b string }{{"project", "sdk"}, {"worker", "sdk"}, {"worker", "bare"}, {"project", "naive"}, {"worker", "naive"}} {
		b.ReportMetric(rates[r.a]/rates[r.b], r.a+"/"+r.b)
	}
	if races > 0 {
		b.ReportMetric(float64(races)/float64(b.N), "naive-races/op")
	}
}

// median returns the median of xs, which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
