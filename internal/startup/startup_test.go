package startup_test

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
)

func TestVersion(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		asked bool
	}{
		{[]string{"-version"}, true},
		{[]string{"-queue", "q", "--version"}, true},
		{[]string{"-queue", "q"}, false},
		{[]string{"--", "-version"}, false},
	} {
		var out strings.Builder
		asked, err := startup.Version("cmd", tt.args, &out)
		if asked != tt.asked || err != nil {
			t.Errorf("Version(%q) = %v, %v; want %v, nil", tt.args, asked, err, tt.asked)
		}
		if tt.asked != strings.HasPrefix(out.String(), "cmd github.com/idempotent-consumer/sbcosmos") {
			t.Errorf("Version(%q) printed %q", tt.args, out.String())
		}
	}
}

func TestStartRefusesBadSettings(t *testing.T) {
	for _, tt := range []struct {
		name    string
		logging cli.Logging
		o       startup.Options
		want    string
	}{
		{"log format", cli.Logging{Format: "xml", Level: "info"}, startup.Options{}, "log format"},
		{"log level", cli.Logging{Format: "json", Level: "loud"}, startup.Options{}, "log level"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := startup.Start(context.Background(), tt.logging, &strings.Builder{}, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start = %v, %v; want an error naming %s", p, err, tt.want)
			}
		})
	}
}

// flusher counts its flushes.
type flusher struct{ n int }

func (f *flusher) Shutdown(context.Context) error { f.n++; return nil }

// TestCloseFlushes: Close flushes what the command handed Start once, and
// nothing after a second signal, to exit at once.
func TestCloseFlushes(t *testing.T) {
	for _, forced := range []bool{false, true} {
		sigs := make(chan os.Signal, 2)
		ctx, stop := cli.Stages(context.Background(), sigs)
		var f flusher
		p, err := startup.Start(ctx, cli.Logging{Format: "json", Level: "info"}, &strings.Builder{}, startup.Options{Flush: &f})
		if err != nil {
			t.Fatal(err)
		}
		if forced {
			sigs <- os.Interrupt
			<-ctx.Done()
			sigs <- syscall.SIGTERM
			<-cli.Force(ctx).Done()
		}
		p.Close()
		stop()
		if want := map[bool]int{false: 1, true: 0}[forced]; f.n != want {
			t.Errorf("second signal %v: %d flushes, want %d", forced, f.n, want)
		}
	}
}

// TestStartLinksNoTelemetry: the start-up every command shares links no
// OpenTelemetry SDK, so that a command that exports nothing (orderctl) does
// not carry one.
func TestStartLinksNoTelemetry(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "go.opentelemetry.io/") || p == "github.com/idempotent-consumer/sbcosmos/internal/telemetry" {
			t.Errorf("internal/startup links %s", p)
		}
	}
}

// TestStartLogsBothSignals checks the logs of the first signal (warn, with
// the cause and the attributes given) and of the second (error).
func TestStartLogsBothSignals(t *testing.T) {
	var logs syncBuffer
	sigs := make(chan os.Signal, 2)
	ctx, stop := cli.Stages(context.Background(), sigs)
	defer stop()
	p, err := startup.Start(ctx, cli.Logging{Format: "json", Level: "warn"}, &logs, startup.Options{
		Draining: "draining now", DrainingAttrs: []any{"grace", "30s"}, Forced: "stopping at once",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sigs <- os.Interrupt
	<-ctx.Done()
	sigs <- syscall.SIGTERM
	<-cli.Force(ctx).Done()
	// AfterFunc runs the log calls in goroutines of their own: wait for both lines.
	for !strings.Contains(logs.String(), "stopping at once") || !strings.Contains(logs.String(), "draining now") {
		runtime.Gosched()
	}
	for _, want := range []string{`"level":"WARN","msg":"draining now","cause":"interrupt signal received","grace":"30s"`,
		`"level":"ERROR","msg":"stopping at once","cause":"second signal (terminated) received"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
}

// TestCloseStopsTheSignalLogs checks that a signal after Close logs nothing.
func TestCloseStopsTheSignalLogs(t *testing.T) {
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	p, err := startup.Start(ctx, cli.Logging{Format: "json", Level: "info"}, &logs, startup.Options{Draining: "draining now"})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	cancel()
	if logs.String() != "" {
		t.Errorf("logged after Close:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
