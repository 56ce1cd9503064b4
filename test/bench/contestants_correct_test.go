package bench_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// TestContestantsDoTheSameWork: every contestant of the matrix, given the
// same stream of new orders and copies of stored ones, stores each new
// order's document and event once and reports each copy as a duplicate (the
// upsert baseline, which cannot tell, writes every message), directly and
// through the latency proxy. It is what makes their throughputs comparable.
func TestContestantsDoTheSameWork(t *testing.T) {
	srv := cosmiumtest.Start(t)
	for _, latency := range []time.Duration{0, time.Millisecond} {
		c := newCosmos(t, srv, latency)
		for _, k := range contestants {
			t.Run(fmt.Sprintf("latency=%v/%s", latency, k.name), func(t *testing.T) {
				ctx := t.Context()
				const n, conc = 40, 8
				prefix := uniquePrefix(k.name)
				pool := stream(prefix+"p", 8, 0, nil)
				if err := k.seed(ctx, c, conc, pool); err != nil {
					t.Fatal(err)
				}
				msgs := stream(prefix, n, 0.5, pool)
				got, err := k.run(ctx, c, conc, msgs)
				if err != nil {
					t.Fatal(err)
				}
				want := [4]int64{n / 2, n / 2, 0, 0}
				if k.name == "upsert" {
					want = [4]int64{0, 0, 0, n}
				}
				if g := [4]int64{got.created.Load(), got.duplicate.Load(), got.raced.Load(), got.upserted.Load()}; g != want {
					t.Errorf("created, duplicate, raced, upserted = %v, want %v", g, want)
				}
				for _, m := range append(msgs, pool...) {
					pk := azcosmos.NewPartitionKeyString(m.ID)
					for _, id := range []string{m.ID, order.EventID(m.ID)} {
						if _, err := c.container.ReadItem(ctx, pk, id, nil); err != nil {
							t.Errorf("document %s: %v", id, err)
						}
					}
				}
			})
		}
		if c.proxy != nil && c.proxy.Requests() < 2*int64(len(contestants))*40 {
			t.Errorf("only %d requests passed the latency proxy", c.proxy.Requests())
		}
	}
}
