package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/payments"
)

// syncBuffer is a bytes.Buffer safe for the server's concurrent log writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// logLines decodes JSON log lines.
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for line := range strings.Lines(s) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestRunCapturesOnceAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdoutR, stdoutW := io.Pipe()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-log-format", "json"}, env(map[string]string{"PAYMENTS_ADDR": "127.0.0.1:0"}), stdoutW, &stderr)
		stdoutW.Close()
	}()

	out := bufio.NewScanner(stdoutR)
	if !out.Scan() {
		t.Fatalf("no output; run returned %v; stderr:\n%s", <-done, stderr.String())
	}
	base, ok := strings.CutPrefix(out.Text(), "paymentservice listening on ")
	if !ok {
		t.Fatalf("first line %q does not name the address", out.Text())
	}
	go io.Copy(io.Discard, stdoutR)

	client, err := payments.NewClient(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 3998, Currency: "EUR"}
	first, err := client.Capture(ctx, payments.KeyFor("ord-1"), req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.Capture(ctx, payments.KeyFor("ord-1"), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || !second.Replayed || first.PaymentID != second.PaymentID {
		t.Errorf("captures %+v and %+v, want one payment, the second replayed", first, second)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("run did not return within a minute of the cancellation")
	}

	var requests int
	var stopped map[string]any
	for _, l := range logLines(t, stderr.String()) {
		switch l["msg"] {
		case "request":
			requests++
			if l["status"] != float64(201) || l["idempotency_key"] != "capture:ord-1" {
				t.Errorf("request log %v, want status 201 and the key", l)
			}
		case "paymentservice stopped":
			stopped = l
		}
	}
	if requests != 2 {
		t.Errorf("%d request log lines, want 2", requests)
	}
	if stopped == nil || stopped["charges"] != float64(1) {
		t.Errorf("stop log %v, want charges 1; stderr:\n%s", stopped, stderr.String())
	}
	if _, err := net.Dial("tcp", strings.TrimPrefix(base, "http://")); err == nil {
		t.Errorf("%s still accepts connections after run returned", base)
	}
}

func TestRunConfigErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		wantIs  error
	}{
		{"help", []string{"-h"}, nil, "", nil},
		{"unknown flag", []string{"-port", "1"}, nil, "flag provided but not defined", nil},
		{"argument", []string{"serve"}, nil, "unexpected arguments", nil},
		{"bad retention variable", nil, map[string]string{"PAYMENTS_KEY_RETENTION": "a day"}, "PAYMENTS_KEY_RETENTION", nil},
		{"zero retention", []string{"-key-retention", "0s"}, nil, "must be positive", nil},
		{"bad log format", []string{"-log-format", "xml"}, nil, "log format", nil},
		{"address in use", []string{"-addr", busy.Addr().String()}, nil, "", syscall.EADDRINUSE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			err := run(context.Background(), tt.args, env(tt.env), &stdout, &stderr)
			switch {
			case tt.wantIs != nil:
				if !errors.Is(err, tt.wantIs) {
					t.Errorf("run(%q) = %v, want %v", tt.args, err, tt.wantIs)
				}
			case tt.wantErr == "":
				if err != nil {
					t.Errorf("run(%q) = %v, want nil", tt.args, err)
				}
			case err == nil || !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("run(%q) = %v, want an error naming %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

// TestParseConfigRefusesNonLoopback: like the test broker, the service
// listens only where this machine reaches it unless -allow-remote is
// given, since it has no TLS and no authentication; an empty host, every
// interface, used to be taken without a word.
func TestParseConfigRefusesNonLoopback(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"every interface", []string{"-addr", ":0"}, nil, `PAYMENTS_ADDR (-addr) ":0" listens on every interface; give -allow-remote`},
		{"every interface from the environment", nil, map[string]string{"PAYMENTS_ADDR": ":8090"}, "listens on every interface"},
		{"a non-loopback address", []string{"-addr", "0.0.0.0:0"}, nil, `PAYMENTS_ADDR (-addr) "0.0.0.0:0" is not a loopback address; give -allow-remote`},
		{"a host name", []string{"-addr", "payments.example:8090"}, nil, "is not a loopback address"},
		{"no port", []string{"-addr", "127.0.0.1"}, nil, "missing port"},
		{"allowed by the flag", []string{"-addr", ":0", "-allow-remote"}, nil, ""},
		{"allowed by the environment", []string{"-addr", "0.0.0.0:0"}, map[string]string{"PAYMENTS_ALLOW_REMOTE": "true"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(newFlagSet(io.Discard), tt.args, env(tt.env))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("parseConfig(%q) = %v, want nil", tt.args, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("parseConfig(%q) = %v, want an error naming %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestParseConfigPrecedence(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want config
	}{
		{"defaults", nil, nil, config{Addr: "127.0.0.1:8090", KeyRetention: 30 * 24 * time.Hour, ShutdownGrace: 10 * time.Second, Telemetry: telemetry.Config{ServiceName: "paymentservice"}, Logging: cli.Logging{Format: "auto", Level: "info"}}},
		{"environment", nil, map[string]string{"PAYMENTS_ADDR": "127.0.0.1:9000", "PAYMENTS_KEY_RETENTION": "P7D", "LOG_LEVEL": "debug"},
			config{Addr: "127.0.0.1:9000", KeyRetention: 7 * 24 * time.Hour, ShutdownGrace: 10 * time.Second, Telemetry: telemetry.Config{ServiceName: "paymentservice"}, Logging: cli.Logging{Format: "auto", Level: "debug"}}},
		{"flags override the environment", []string{"-addr", "localhost:9001", "-key-retention", "36h"}, map[string]string{"PAYMENTS_ADDR": "127.0.0.1:9000", "PAYMENTS_KEY_RETENTION": "P7D"},
			config{Addr: "localhost:9001", KeyRetention: 36 * time.Hour, ShutdownGrace: 10 * time.Second, Telemetry: telemetry.Config{ServiceName: "paymentservice"}, Logging: cli.Logging{Format: "auto", Level: "info"}}},
		{"every interface when allowed", []string{"-addr", ":9002"}, map[string]string{"PAYMENTS_ALLOW_REMOTE": "true"},
			config{Addr: ":9002", AllowRemote: true, KeyRetention: 30 * 24 * time.Hour, ShutdownGrace: 10 * time.Second, Telemetry: telemetry.Config{ServiceName: "paymentservice"}, Logging: cli.Logging{Format: "auto", Level: "info"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFlagSet(io.Discard)
			got, err := parseConfig(fs, tt.args, env(tt.env))
			if err != nil || got != tt.want {
				t.Errorf("parseConfig = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// The help text states the default retention the service really uses, and
// the lookup that makes a retention shorter than the worker's redelivery
// horizon safe.
func TestHelpAgreesWithTheDefaults(t *testing.T) {
	var stderr syncBuffer
	if err := run(context.Background(), []string{"-h"}, env(nil), io.Discard, &stderr); err != nil {
		t.Fatal(err)
	}
	help := stderr.String()
	for _, want := range []string{"(default " + cli.FormatDuration(payments.DefaultKeyRetention) + ")", "GET /payments?orderId=", "must never assume longer"} {
		if !strings.Contains(help, want) {
			t.Errorf("help text does not contain %q:\n%s", want, help)
		}
	}
	if payments.DefaultKeyRetention != 30*24*time.Hour {
		t.Errorf("DefaultKeyRetention = %v, but the command's documentation says 30 days", payments.DefaultKeyRetention)
	}
}
