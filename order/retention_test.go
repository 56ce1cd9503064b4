package order_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
)

func TestMinRetention(t *testing.T) {
	tests := []struct {
		name string
		h    order.RedeliveryHorizon
		want time.Duration
	}{
		// L = 14d (TTL beats 1m × 10); min = 14d + max(10m, 14d + 7d) = 35d.
		{"production defaults", order.RedeliveryHorizon{time.Minute, 10, 14 * 24 * time.Hour, 10 * time.Minute, 7 * 24 * time.Hour}, 35 * 24 * time.Hour},
		// Unlimited TTL: L = 1m × 10 = 10m; min = 10m + max(10m, 10m + 0) = 20m.
		{"unlimited TTL", order.RedeliveryHorizon{time.Minute, 10, 0, 10 * time.Minute, 0}, 20 * time.Minute},
		// The window dominates: L = 5m × 2 = 10m (TTL 1m is shorter); min = 10m + max(1h, 10m) = 70m.
		{"long window", order.RedeliveryHorizon{5 * time.Minute, 2, time.Minute, time.Hour, 0}, 70 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := tt.h.MinRetention()
			if got != tt.want {
				t.Errorf("MinRetention = %v, want %v (%s)", got, tt.want, why)
			}
			if err := tt.h.CheckRetention(tt.want); err != nil {
				t.Errorf("CheckRetention(minimum) = %v", err)
			}
			err := tt.h.CheckRetention(tt.want - time.Second)
			if err == nil || !strings.Contains(err.Error(), tt.want.String()) || !strings.Contains(err.Error(), "max delivery count") {
				t.Errorf("CheckRetention(minimum - 1s) = %v, want a refusal that shows the computation", err)
			}
		})
	}
}
