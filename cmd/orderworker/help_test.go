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
	for _, want := range []string{"orderworker -version", "scripts/local.sh up", "go install ./test/sbbroker/cmd/sbbroker ./test/paymentservice/cmd/paymentservice", "go -C test/cosmiumtest/tools install ./cmd/cosmium"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h does not say %q:\n%s", want, help.String())
		}
	}
}

// secretEnv holds a secret in every variable that can carry one, with
// markers that must never reach -h's text.
var secretEnv = map[string]string{
	"COSMOS_KEY":                   "czoUnMQ8HELPKEYSECRET==",
	"SERVICEBUS_CONNECTION_STRING": "Endpoint=sb://localhost:5672;SharedAccessKeyName=Root;SharedAccessKey=HELPSASSECRET;UseDevelopmentEmulator=true",
	"PAYMENTS_URL":                 "https://user:HELPURLPASS@pay.example/api?code=HELPURLCODE",
	"OTEL_EXPORTER_OTLP_ENDPOINT":  "https://otlp:HELPOTLPPASS@collector.example:4318/?token=HELPOTLPCODE",
}

// TestHelpMasksSecrets checks that -h prints the flags' defaults taken
// from secret variables masked, as the start-up log does (cli.Mask,
// cli.MaskURL), never the secrets themselves.
func TestHelpMasksSecrets(t *testing.T) {
	for _, args := range [][]string{{"-h"}} {
		var help strings.Builder
		if err := run(context.Background(), args, func(k string) string { return secretEnv[k] }, io.Discard, &help); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, secret := range []string{"czoUnMQ8", "HELPKEYSECRET", "HELPSASSECRET", "SharedAccessKey=", "HELPURLPASS", "HELPURLCODE", "HELPOTLPPASS", "HELPOTLPCODE"} {
			if strings.Contains(help.String(), secret) {
				t.Errorf("%v prints the secret %q:\n%s", args, secret, help.String())
			}
		}
		if !strings.Contains(help.String(), "***") {
			t.Errorf("%v prints no masked default:\n%s", args, help.String())
		}
	}
}
