package cli_test

import (
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want string // "" for accepted
	}{
		{"127.0.0.1:8090", ""},
		{"127.0.0.2:0", ""},
		{"[::1]:8090", ""},
		{"localhost:8090", ""},
		{":8090", "listens on every interface; give -allow-remote"},
		{"0.0.0.0:8090", "is not a loopback address; give -allow-remote"},
		{"[::]:8090", "is not a loopback address"},
		{"192.168.1.5:8090", "is not a loopback address"},
		{"payments.example:8090", "is not a loopback address"},
		{"nonsense", "missing port"},
	}
	for _, tt := range tests {
		err := cli.CheckLoopback("PAYMENTS_ADDR (-addr)", tt.addr)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckLoopback(%q) = %v, want nil", tt.addr, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "PAYMENTS_ADDR (-addr)")):
			t.Errorf("CheckLoopback(%q) = %v, want an error naming the setting and %q", tt.addr, err, tt.want)
		}
	}
}
