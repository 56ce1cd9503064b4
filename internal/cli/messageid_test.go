package cli_test

import (
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

// TestCheckMessageID: the bound is 128 UTF-16 code units, not bytes and
// not characters: 64 emoji (128 units) pass, 65 (130 units, 65 characters)
// are refused; counting characters accepted them.
func TestCheckMessageID(t *testing.T) {
	tests := []struct {
		id        string
		wantUnits int
		wantErr   bool
	}{
		{"ord-1", 5, false},
		{strings.Repeat("x", 128), 128, false},
		{strings.Repeat("é", 128), 128, false}, // units, not bytes
		{strings.Repeat("x", 129), 129, true},
		{strings.Repeat("😀", 64), 128, false},
		{strings.Repeat("😀", 65), 130, true},            // 65 characters
		{strings.Repeat("a", 127) + "😀", 129, true},     // 128 characters
		{strings.Repeat("a", 126) + "😀", 128, false},    // the longest with one emoji
		{strings.Repeat("a", 127) + "\xff", 128, false}, // an invalid byte: one U+FFFD
	}
	for _, tt := range tests {
		if n := cli.MessageIDLength(tt.id); n != tt.wantUnits {
			t.Errorf("MessageIDLength(%q) = %d, want %d", tt.id, n, tt.wantUnits)
		}
		err := cli.CheckMessageID(tt.id)
		if (err != nil) != tt.wantErr {
			t.Errorf("CheckMessageID(%d characters, %d units) = %v, want error %v", len([]rune(tt.id)), tt.wantUnits, err, tt.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "128") || !strings.Contains(err.Error(), tt.id)) {
			t.Errorf("CheckMessageID: %v, want the limit and the id named", err)
		}
	}
}
