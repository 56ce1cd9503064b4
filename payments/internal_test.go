package payments

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleep(cancelled, 1h) = %v, want context.Canceled", err)
	}
	if err := sleep(context.Background(), 0); err != nil {
		t.Errorf("sleep(0) = %v, want nil", err)
	}
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"capture:ord-1", "capture:ord-1", true},
		{`"capture:ord-1"`, "capture:ord-1", true},
		{`"a \"b\" \\ c"`, `a "b" \ c`, true},
		{`"a"b"`, "", false},
		{`"a\"`, "", false},
		{`"a\x"`, "", false},
		{"a b", "", false},
		{"a\tb", "", false},
		{"caf\xc3\xa9", "", false},
		{"", "", false},
		{`""`, "", false},
		{strings.Repeat("k", MaxKeyLength), strings.Repeat("k", MaxKeyLength), true},
	}
	for _, tt := range tests {
		got, err := ParseKey(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseKey(%q) = %q, %v; want %q, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
