package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
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
		{"35d", 35 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"1d", 24 * time.Hour, true},
		{"2d30m15s", 48*time.Hour + 30*time.Minute + 15*time.Second, true},
		{"unlimited", cli.Unlimited, true},
		{"1d12", 0, false},
		{"1d-1h", 0, false},
		{"d", 0, false},
		{"106752d", 0, false}, // beyond what a time.Duration holds
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

func TestParseISO8601Limits(t *testing.T) {
	tests := []struct {
		in       string
		want     time.Duration
		overflow bool
	}{
		// TimeSpan.MaxValue: what Service Bus reports for a TTL that never ends.
		{"P10675199DT2H48M5.4775807S", cli.Unlimited, false},
		{"P10675199DT2H48M5.4775808S", cli.Unlimited, false},
		{"P99999999999999999999999D", cli.Unlimited, false},
		{"P213504D", 0, true}, // wrapped around to 25 minutes before
		{"P106752D", 0, true},
		{"PT9223372036.854775807S", 0, true}, // exactly math.MaxInt64 ns: not a finite value Unlimited may stand for
		{"PT9223372036.854775806S", cli.Unlimited - 1, false},
		{"P106751D", 106751 * 24 * time.Hour, false},
		{"PT0.0000001S", 100 * time.Nanosecond, false},
		{"PT1.1234567891S", time.Second + 123456789*time.Nanosecond, false},
	}
	for _, tt := range tests {
		got, err := cli.ParseISO8601(tt.in)
		if tt.overflow {
			if !errors.Is(err, cli.ErrOverflow) || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("ParseISO8601(%q) = %v, %v; want an error wrapping ErrOverflow that names the value", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseISO8601(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		35 * 24 * time.Hour:                    "35d",
		36 * time.Hour:                         "1d12h",
		24*time.Hour + 90*time.Minute:          "1d1h30m",
		10 * time.Minute:                       "10m",
		30 * time.Second:                       "30s",
		1500 * time.Millisecond:                "1.5s",
		0:                                      "0s",
		cli.Unlimited:                          "unlimited",
		14*24*time.Hour + 500*time.Millisecond: "14d500ms",
	} {
		got := cli.FormatDuration(d)
		if got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := cli.ParseDuration(got); err != nil || back != d {
			t.Errorf("ParseDuration(FormatDuration(%v) = %q) = %v, %v", d, got, back, err)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "35d", "1d12h", "PT1M30S", "P10675199DT2H48M5.4775807S", "P213504D", "unlimited", "PT0.5S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := cli.ParseDuration(s)
		if err != nil {
			return
		}
		if strings.HasPrefix(s, "P") && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v: an ISO 8601 duration is never negative", s, d)
		}
		if d < 0 {
			return // Go durations may be negative; FormatDuration is for settings
		}
		back, err := cli.ParseDuration(cli.FormatDuration(d))
		if err != nil || back != d {
			t.Fatalf("ParseDuration(FormatDuration(%v) = %q) = %v, %v", d, cli.FormatDuration(d), back, err)
		}
	})
}

func TestEnvDurationDefaultInUsage(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	var d time.Duration
	cli.NewEnv(fs, func(string) string { return "" }).Duration(&d, "ttl", "X_TTL", 35*24*time.Hour, "marker ttl")
	fs.PrintDefaults()
	if !strings.Contains(out.String(), "(default 35d)") {
		t.Errorf("usage %q does not print the default as 35d", out.String())
	}
	if err := fs.Parse([]string{"-ttl", "35d"}); err != nil || d != 35*24*time.Hour {
		t.Errorf("-ttl 35d: %v, %v", d, err)
	}
}

func TestParseFlagsAndExit(t *testing.T) {
	tests := []struct {
		args       []string
		status     int
		wantOut    string // on the flag set's output
		wantStderr string // what Exit printed
		maxLines   int
	}{
		{args: nil, status: 0},
		{args: []string{"-h"}, status: 0, wantOut: "Usage: x"},
		{args: []string{"-help"}, status: 0, wantOut: "Usage: x"},
		{args: []string{"-nope"}, status: 2, wantStderr: "x: flag provided but not defined: -nope\nRun 'x -h'", maxLines: 2},
		{args: []string{"-n", "many"}, status: 2, wantStderr: `x: invalid value "many" for flag -n`, maxLines: 2},
		{args: []string{"stray"}, status: 2, wantStderr: `x: unexpected arguments ["stray"]`, maxLines: 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.args), func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			var out, stderr bytes.Buffer
			fs.SetOutput(&out)
			fs.Usage = func() { fmt.Fprintln(fs.Output(), "Usage: x [flags]"); fs.PrintDefaults() }
			fs.Int("n", 1, "a number")
			err := cli.ParseFlags(fs, tt.args)
			status := cli.Exit("x", err, &stderr)
			if status != tt.status {
				t.Errorf("status %d, want %d (err %v)", status, tt.status, err)
			}
			if !strings.Contains(out.String(), tt.wantOut) || tt.wantOut == "" && out.Len() > 0 {
				t.Errorf("flag output %q, want %q", out.String(), tt.wantOut)
			}
			if !strings.HasPrefix(stderr.String(), tt.wantStderr) || tt.wantStderr == "" && stderr.Len() > 0 {
				t.Errorf("stderr %q, want it to start with %q", stderr.String(), tt.wantStderr)
			}
			if n := strings.Count(stderr.String(), "\n"); tt.maxLines > 0 && n > tt.maxLines {
				t.Errorf("stderr has %d lines, want at most %d: the error must not be buried", n, tt.maxLines)
			}
		})
	}
}

func TestExitJoinsErrors(t *testing.T) {
	var w bytes.Buffer
	err := errors.Join(errors.New("set A"), errors.New("set B"))
	if got := cli.Exit("x", err, &w); got != 1 {
		t.Errorf("status %d, want 1", got)
	}
	if want := "x: \n  set A\n  set B\n"; w.String() != want {
		t.Errorf("printed %q, want %q", w.String(), want)
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

// TestNewLoggerTextHasNoColourOffATerminal checks that LOG_FORMAT=text
// writes no escape codes into a pipe, a file or a buffer.
func TestNewLoggerTextHasNoColourOffATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var buf strings.Builder
	for _, out := range []io.Writer{w, &buf} {
		l, err := cli.NewLogger(out, "text", "info")
		if err != nil {
			t.Fatal(err)
		}
		l.Warn("hello", "error", errors.New("boom"), "n", 1)
	}
	w.Close()
	piped, _ := io.ReadAll(r)
	for name, got := range map[string]string{"pipe": string(piped), "buffer": buf.String()} {
		if !strings.Contains(got, "hello") || strings.Contains(got, "\x1b[") {
			t.Errorf("text log into a %s: %q, want it without escape codes", name, got)
		}
	}
}

// TestNewLoggerJSONWritesDurationsAsStrings checks that a time.Duration,
// also inside a group, is logged as "8s", not as 8000000000.
func TestNewLoggerJSONWritesDurationsAsStrings(t *testing.T) {
	var buf strings.Builder
	l, err := cli.NewLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("waiting", "delay", 8*time.Second, slog.Group("g", slog.Duration("lock", time.Minute)), "n", 3)
	for _, want := range []string{`"delay":"8s"`, `"g":{"lock":"1m"}`, `"n":3`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("logged %s, want %s in it", buf.String(), want)
		}
	}
}

// TestNewLoggerJSONWritesLevelsAsSlog checks that the JSON logger writes
// a record's level, and a level logged as a value, as slog's JSON handler
// does without a ReplaceAttr function.
func TestNewLoggerJSONWritesLevelsAsSlog(t *testing.T) {
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2, slog.LevelError + 4} {
		var got, want strings.Builder
		l, err := cli.NewLogger(&got, "json", "debug")
		if err != nil {
			t.Fatal(err)
		}
		plain := slog.New(slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}))
		for _, log := range []*slog.Logger{l, plain} {
			log.Log(t.Context(), lv, "hello", "as_value", lv, slog.Group("g", "level", lv))
		}
		_, line, _ := strings.Cut(got.String(), `,"level"`) // after the time
		if line = `{"level"` + line; line != want.String() {
			t.Errorf("level %v: logged %s, want %s", lv, line, want.String())
		}
	}
}

// BenchmarkNewLoggerJSON is the cost of one record like the worker's
// per-delivery line, written to io.Discard.
func BenchmarkNewLoggerJSON(b *testing.B) {
	l, err := cli.NewLogger(io.Discard, "json", "info")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		l.LogAttrs(b.Context(), slog.LevelInfo, "processed", slog.String("order_id", "ord-1"), slog.String("message_id", "ord-1"),
			slog.Uint64("delivery_count", 1), slog.String("outcome", "created"), slog.Int64("duration_ms", 3))
	}
}

func TestServiceBusValidateNamesTheVariable(t *testing.T) {
	tests := []struct {
		name string
		sb   cli.ServiceBus
		want []string // substrings of the error; none for a valid setting
	}{
		{"test broker", cli.ServiceBus{Queue: "orders", ConnectionString: "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"}, nil},
		{"emulator", cli.ServiceBus{Queue: "orders", ConnectionString: "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;"}, nil},
		{"sas", cli.ServiceBus{Queue: "orders", ConnectionString: "Endpoint=sb://x.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=x&sig=y&se=1&skn=k"}, nil},
		{"namespace", cli.ServiceBus{Queue: "orders", Namespace: "sb-x"}, nil},
		{"http endpoint", cli.ServiceBus{Queue: "orders", ConnectionString: "Endpoint=http://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=v"},
			[]string{"SERVICEBUS_CONNECTION_STRING", `Endpoint "http://127.0.0.1:5672" is not sb://`}},
		{"no key", cli.ServiceBus{Queue: "orders", ConnectionString: "Endpoint=sb://127.0.0.1:5672"},
			[]string{"SERVICEBUS_CONNECTION_STRING", "SharedAccessKey"}},
		{"not key=value", cli.ServiceBus{Queue: "orders", ConnectionString: "sb://127.0.0.1:5672"},
			[]string{"SERVICEBUS_CONNECTION_STRING", "without '='"}},
		{"namespace with a path", cli.ServiceBus{Queue: "orders", Namespace: "https://sb-x.servicebus.windows.net/orders"},
			[]string{"SERVICEBUS_NAMESPACE"}},
		{"secret not echoed", cli.ServiceBus{Queue: "orders", ConnectionString: "Endpoint=ftp://h;SharedAccessKeyName=k;SharedAccessKey=TOPSECRET"},
			[]string{"SERVICEBUS_CONNECTION_STRING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sb.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "TOPSECRET") {
				t.Errorf("the error reveals the key: %v", err)
			}
		})
	}
}

func TestCheckEndpoint(t *testing.T) {
	for in, ok := range map[string]bool{
		"https://x.documents.azure.com:443/": true,
		"http://127.0.0.1:8081/":             true,
		"127.0.0.1:8081":                     false,
		"localhost":                          false,
		"https://":                           false,
		"ftp://x/":                           false,
	} {
		if err := cli.CheckEndpoint(in); (err == nil) != ok {
			t.Errorf("CheckEndpoint(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}
