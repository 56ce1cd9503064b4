package cli_test

import (
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"PT1M", time.Minute, true},
		{"PT1M30S", 90 * time.Second, true},
		{"PT0.5S", 500 * time.Millisecond, true},
		{"P1DT2H", 26 * time.Hour, true},
		{"P14D", 14 * 24 * time.Hour, true},
		{"P2W", 14 * 24 * time.Hour, true},
		{"PT10M", 10 * time.Minute, true},
		{"P", 0, false},
		{"PT", 0, false},
		{"P1M", 0, false}, // months are not a fixed length
		{"1 minute", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := cli.ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestNamespaceHost(t *testing.T) {
	for in, want := range map[string]string{
		"sb-x":                                "sb-x.servicebus.windows.net",
		"sb-x.servicebus.windows.net":         "sb-x.servicebus.windows.net",
		"sb://sb-x.servicebus.windows.net/":   "sb-x.servicebus.windows.net",
		"https://sb-x.servicebus.windows.net": "sb-x.servicebus.windows.net",
	} {
		if got := cli.NamespaceHost(in); got != want {
			t.Errorf("NamespaceHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewLogger(t *testing.T) {
	if _, err := cli.NewLogger(nil, "xml", "info"); err == nil {
		t.Error("format xml accepted")
	}
	if _, err := cli.NewLogger(nil, "json", "loud"); err == nil {
		t.Error("level loud accepted")
	}
}
