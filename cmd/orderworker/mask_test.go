package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// A PAYMENTS_URL with credentials (user info, an Azure Functions ?code=)
// is never logged or shown in an error verbatim: it used to be, in the
// start-up configuration log and in the errors that quote it.
func TestPaymentsURLIsMasked(t *testing.T) {
	const secretURL = "http://user:SECRET@payments.example:8090/api/?code=SECRET"
	t.Run("start-up log", func(t *testing.T) {
		var b strings.Builder
		slog.New(slog.NewJSONHandler(&b, nil)).Info("start", "config", config{PaymentsURL: secretURL})
		if strings.Contains(b.String(), "SECRET") || !strings.Contains(b.String(), `"payments_url":"http://***@payments.example:8090/api/?***"`) {
			t.Errorf("logged %s", b.String())
		}
	})
	base := map[string]string{"SERVICEBUS_NAMESPACE": "sb-x.servicebus.windows.net", "COSMOS_ENDPOINT": "https://x.documents.azure.com:443/"}
	for _, tt := range []struct {
		name string
		env  map[string]string
	}{
		{"not an http URL", map[string]string{"PAYMENTS_URL": "ftp://user:SECRET@payments.example/?code=SECRET"}},
		{"unparsable", map[string]string{"PAYMENTS_URL": "http://user:SECRET@payments.example:port/?code=SECRET"}},
		{"refused in the inbox variant", map[string]string{"PAYMENTS_URL": secretURL, "SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			fs := flag.NewFlagSet("orderworker", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			_, err := parseConfig(fs, nil, func(k string) string { return env[k] })
			if err == nil || !strings.Contains(err.Error(), "PAYMENTS_URL") {
				t.Fatalf("err = %v, want one naming PAYMENTS_URL", err)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}
