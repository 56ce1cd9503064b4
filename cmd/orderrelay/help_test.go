package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestHelpSaysVersionAndLocalTools checks that -h documents -version and
// how to get the local stack's tools, which go install ./cmd/... does not
// build.
func TestHelpSaysVersionAndLocalTools(t *testing.T) {
	var help strings.Builder
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &help); err != nil {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"orderrelay -version", "scripts/local.sh up", "go install ./test/sbbroker/cmd/sbbroker ./test/paymentservice/cmd/paymentservice", "go -C test/cosmiumtest/tools install ./cmd/cosmium"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h does not say %q:\n%s", want, help.String())
		}
	}
}
