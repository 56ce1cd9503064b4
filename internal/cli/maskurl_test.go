package cli_test

import (
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func TestMaskURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"http://127.0.0.1:8090/", "http://127.0.0.1:8090/"},
		{"https://payments.example/api/v1", "https://payments.example/api/v1"},
		{"http://user:SECRET@payments.example:8090/?code=SECRET", "http://***@payments.example:8090/?***"},
		{"http://SECRET@payments.example/", "http://***@payments.example/"},
		{"https://payments.example/api?code=SECRET&x=1#SECRET", "https://payments.example/api?***#***"},
		{"https://payments.example/api?", "https://payments.example/api?***"},
		{"http://user:SECRET@host:port/?code=SECRET", "http://***@host:port/?***"}, // does not parse
		{"http://user:SEC%zzRET@host/", "http://***@host/"},                        // does not parse
		{"user:SECRET@host", "user:***"},                                           // opaque
	}
	for _, tt := range tests {
		got := cli.MaskURL(tt.in)
		if got != tt.want {
			t.Errorf("MaskURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "SEC") {
			t.Errorf("MaskURL(%q) = %q shows the secret", tt.in, got)
		}
	}
}

// TestCheckEndpointHidesSecrets: the error for a bad endpoint names it
// masked, since PAYMENTS_URL may carry credentials.
func TestCheckEndpointHidesSecrets(t *testing.T) {
	for _, bad := range []string{"ftp://user:SECRET@host/?code=SECRET", "http://user:SECRET@host:port/?code=SECRET", "user:SECRET@host"} {
		err := cli.CheckEndpoint(bad)
		if err == nil {
			t.Errorf("CheckEndpoint(%q) = nil", bad)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("CheckEndpoint(%q) = %v shows the secret", bad, err)
		}
	}
}
