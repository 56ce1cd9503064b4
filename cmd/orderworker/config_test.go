package main

import (
	"context"
	"flag"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfig(t *testing.T) {
	azure := map[string]string{
		"SERVICEBUS_NAMESPACE": "sb-x.servicebus.windows.net", "SERVICEBUS_QUEUE": "orders",
		"COSMOS_ENDPOINT": "https://x.documents.azure.com:443/", "COSMOS_DATABASE": "db", "COSMOS_CONTAINER": "c",
		"SERVICEBUS_LOCK_DURATION": "PT30S",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range azure {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr []string
		check   func(t *testing.T, c config)
	}{
		{name: "azd outputs are enough", env: azure, check: func(t *testing.T, c config) {
			if c.LockDuration != 30*time.Second || c.Queue != "orders" || c.CosmosDatabase != "db" {
				t.Errorf("config = %+v", c)
			}
		}},
		{name: "flags override the environment", env: azure, args: []string{"-queue", "other", "-lock-duration", "45s", "-concurrency", "3"},
			check: func(t *testing.T, c config) {
				if c.Queue != "other" || c.LockDuration != 45*time.Second || c.Concurrency != 3 {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "nothing set names every missing variable", env: map[string]string{},
			wantErr: []string{"SERVICEBUS_NAMESPACE", "SERVICEBUS_CONNECTION_STRING", "COSMOS_ENDPOINT"}},
		{name: "unparsable variable", env: with("WORKER_CONCURRENCY", "many"), wantErr: []string{`WORKER_CONCURRENCY="many"`}},
		{name: "unparsable duration", env: with("SERVICEBUS_LOCK_DURATION", "a minute"), wantErr: []string{"SERVICEBUS_LOCK_DURATION"}},
		{name: "message timeout not below lock", env: with("WORKER_MESSAGE_TIMEOUT", "PT30S"), wantErr: []string{"WORKER_MESSAGE_TIMEOUT"}},
		{name: "lock duration beyond Service Bus", env: with("SERVICEBUS_LOCK_DURATION", "PT6M"), wantErr: []string{"outside Service Bus"}},
		{name: "emulator-only switches need a key", env: with("COSMOS_CREATE_CONTAINER", "true", "COSMOS_INSECURE_SKIP_VERIFY", "true"),
			wantErr: []string{"COSMOS_CREATE_CONTAINER", "COSMOS_INSECURE_SKIP_VERIFY"}},
		{name: "two Service Bus identities", env: with("SERVICEBUS_CONNECTION_STRING", "Endpoint=sb://x"), wantErr: []string{"only one"}},
		{name: "stray argument", env: azure, args: []string{"extra"}, wantErr: []string{"unexpected arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseConfig(fs, tt.args, envOf(tt.env))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, c)
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %v", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestConfigLogMasksSecrets(t *testing.T) {
	c := config{ServiceBus: cli.ServiceBus{ConnectionString: "Endpoint=sb://h;SharedAccessKey=TOPSECRET", Queue: "orders"}, CosmosKey: "ALSOSECRET"}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("start", "config", c)
	if strings.Contains(b.String(), "SECRET") || !strings.Contains(b.String(), `"queue":"orders"`) {
		t.Errorf("logged %s", b.String())
	}
}

func TestRunHelpDocumentsVariables(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-h"}, envOf(nil), io.Discard, &out); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"SERVICEBUS_NAMESPACE", "SERVICEBUS_CONNECTION_STRING", "SERVICEBUS_QUEUE", "COSMOS_ENDPOINT", "COSMOS_DATABASE", "COSMOS_CONTAINER", "SERVICEBUS_LOCK_DURATION"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h does not mention %s", v)
		}
	}
	if err := run(context.Background(), nil, envOf(nil), io.Discard, io.Discard); err == nil {
		t.Error("run with no configuration succeeded")
	}
}

func TestInboxRetentionRefusal(t *testing.T) {
	base := map[string]string{
		"SERVICEBUS_NAMESPACE": "sb", "COSMOS_ENDPOINT": "https://x/", "WORKER_INBOX_CONSUMER": "loyalty",
		"SERVICEBUS_LOCK_DURATION": "PT1M", "SERVICEBUS_MAX_DELIVERY_COUNT": "10", "SERVICEBUS_MESSAGE_TTL": "P14D",
		"SERVICEBUS_DUPLICATE_DETECTION_WINDOW": "PT10M", "WORKER_RESUBMISSION_HORIZON": "P7D",
	}
	for ttl, wantErr := range map[string]bool{"P36D": false, "P35D": true, "P1D": true} {
		env := map[string]string{"WORKER_INBOX_TTL": ttl}
		for k, v := range base {
			env[k] = v
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		_, err := parseConfig(fs, nil, envOf(env))
		if wantErr != (err != nil) {
			t.Errorf("WORKER_INBOX_TTL=%s: err = %v, want error %v", ttl, err, wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "minimum 840h12m0s") || !strings.Contains(err.Error(), "resubmission horizon 168h0m0s")) {
			t.Errorf("the refusal does not show the computation: %v", err)
		}
	}
}
