package memstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// Check refuses a container default TTL other than -1, naming the fix, as
// cosmosstore's Check does; the store applies the default as Cosmos DB does.
func TestCheck_DefaultTTLMustBeMinusOne(t *testing.T) {
	fix := []string{"--ttl -1", "defaultTtl: -1"}
	tests := []struct {
		name string
		set  *int32 // nil: New's default
		want []string
		// expires reports whether a document without a ttl of its own
		// and one with ttl 10 are gone after an hour and a second.
		plainGone, ttlGone bool
	}{
		{name: "default", ttlGone: true},
		{name: "-1", set: ptr(int32(-1)), ttlGone: true},
		{name: "absent: TTL off", set: ptr(int32(memstore.TTLOff)), want: append([]string{"time to live off", "never expire"}, fix...)},
		{name: "3600", set: ptr(int32(3600)), want: append([]string{"3600", "orders, events, payment records, leases"}, fix...), plainGone: true, ttlGone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			s := memstore.NewWithClock("/orderId", func() time.Time { return now })
			if tt.set != nil {
				s.SetDefaultTTL(*tt.set)
			}
			res, err := s.Check(t.Context())
			if len(tt.want) == 0 {
				if err != nil || res.DefaultTTL == nil || *res.DefaultTTL != -1 {
					t.Errorf("Check = %+v, %v; want defaultTtl -1 and no error", res, err)
				}
			} else {
				if err == nil {
					t.Fatalf("Check = %+v, nil; want the default TTL refused", res)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Check error %q does not contain %q", err, w)
					}
				}
			}
			docs := []idempotent.Document{
				{ID: "plain", Body: []byte(`{"id":"plain","orderId":"p"}`)},
				{ID: "marker", Body: []byte(`{"id":"marker","orderId":"p","ttl":10}`)},
				{ID: "never", Body: []byte(`{"id":"never","orderId":"p","ttl":-1}`)},
			}
			if _, err := s.CreateBatch(t.Context(), "p", docs); err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Hour + time.Second)
			for id, wantGone := range map[string]bool{"plain": tt.plainGone, "marker": tt.ttlGone, "never": false} {
				if _, ok := s.Get("p", id); ok == wantGone {
					t.Errorf("document %s there after an hour: %v; want %v", id, ok, !wantGone)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
