package cli_test

import (
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func TestCheckMessageID(t *testing.T) {
	tests := []struct {
		id      string
		wantErr bool
	}{
		{"ord-1", false},
		{strings.Repeat("x", 128), false},
		{strings.Repeat("é", 128), false}, // characters, not bytes
		{strings.Repeat("x", 129), true},
	}
	for _, tt := range tests {
		err := cli.CheckMessageID(tt.id)
		if (err != nil) != tt.wantErr {
			t.Errorf("CheckMessageID(%d characters) = %v, want error %v", len([]rune(tt.id)), err, tt.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "128") || !strings.Contains(err.Error(), tt.id)) {
			t.Errorf("CheckMessageID: %v, want the limit and the id named", err)
		}
	}
}
