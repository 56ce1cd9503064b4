// Package startup is the start-up that the project's commands share, so that
// each main and run says only what is its own:
//
//   - Main is a command's whole main: SIGINT and SIGTERM in the two stages
//     of cli.Stages (the first cancels the context, the second its
//     cli.Force stage), then os.Exit with cli.Exit's status.
//   - Version answers -version (cli.VersionArg) before any configuration
//     is read, so that it works without one.
//   - Start builds the logger (cli.Logging), fanned out to the
//     OpenTelemetry log bridge a command hands it, if it exports logs; logs
//     the first and second signal; and returns what Close flushes at exit:
//     the telemetry providers a command built (telemetry.New), if it
//     exports any.
//
// It does not import internal/telemetry, so that a command that exports no
// telemetry (orderctl) links no OpenTelemetry SDK or exporter.
package startup

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

// FlushTimeout bounds the flush at exit (Process.Close): the run's context
// has usually ended by then.
const FlushTimeout = 5 * time.Second

// Flusher is what Close flushes at exit; *telemetry.Providers is one.
type Flusher interface {
	Shutdown(ctx context.Context) error
}

// Main runs run with a context that ends at the first SIGINT or SIGTERM
// and whose second stage (cli.Force) ends at the second, then exits the
// process with the status cli.Exit gives run's error, printed on stderr as
// "name: error". run is the command's run with the process's arguments,
// environment and streams bound.
func Main(name string, run func(ctx context.Context) error) {
	sigs := make(chan os.Signal, 2) // buffered: no signal is lost before Stages reads it
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := cli.Stages(context.Background(), sigs)
	err := run(ctx)
	stop()
	os.Exit(cli.Exit(name, err, os.Stderr))
}

// Version reports whether args ask for the version (-version or --version,
// see cli.VersionArg) and, if they do, prints the version line of the
// command name to stdout. run returns err at once when asked is true:
//
//	if asked, err := startup.Version("orderworker", args, stdout); asked {
//		return err
//	}
func Version(name string, args []string, stdout io.Writer) (asked bool, err error) {
	if !cli.VersionArg(args) {
		return false, nil
	}
	return true, cli.PrintVersion(stdout, name)
}

// Process is what Start set up: the logger, and what Close flushes.
// Close it at exit.
type Process struct {
	Logger *slog.Logger

	flush Flusher // nil: nothing
	ctx   context.Context
	stops []func() bool
}

// Options are what Start sets up beside the logger.
type Options struct {
	// Flush is flushed by Close: the command's telemetry providers; nil
	// for a command that exports none.
	Flush Flusher
	// LogHandler, when not nil, receives every record the console handler
	// takes (at the console's level, LOG_LEVEL), with the same attributes
	// and groups: the OpenTelemetry log bridge that
	// telemetry.Providers.LogHandler returns when logs are exported. Nil
	// (logs not exported) leaves the logger the console's alone, at no
	// cost.
	LogHandler slog.Handler
	// Draining is logged at warn, with the signal as "cause", when ctx
	// ends (the first signal): what the command does now. Empty logs
	// nothing.
	Draining string
	// DrainingAttrs are logged with Draining.
	DrainingAttrs []any
	// Forced is logged at error, with the signal as "cause", when ctx's
	// second stage (cli.Force) ends: the second signal. Empty logs
	// nothing.
	Forced string
}

// Start returns the logger logging describes, writing to stderr, and
// arranges the logs of the first and second signal o asks for. ctx is the
// run's context (from Main, or a test's). On an error nothing is left to
// close but o.Flush, which is the caller's.
func Start(ctx context.Context, logging cli.Logging, stderr io.Writer, o Options) (*Process, error) {
	logger, err := logging.NewLogger(stderr)
	if err != nil {
		return nil, err
	}
	if o.LogHandler != nil {
		console := logger.Handler()
		logger = slog.New(slog.NewMultiHandler(console, gated{h: o.LogHandler, gate: console}))
	}
	p := &Process{Logger: logger, flush: o.Flush, ctx: ctx}
	if o.Draining != "" {
		p.stops = append(p.stops, context.AfterFunc(ctx, func() {
			logger.Warn(o.Draining, append([]any{"cause", context.Cause(ctx).Error()}, o.DrainingAttrs...)...)
		}))
	}
	if o.Forced != "" {
		force := cli.Force(ctx)
		p.stops = append(p.stops, context.AfterFunc(force, func() {
			logger.Error(o.Forced, "cause", context.Cause(force).Error())
		}))
	}
	return p, nil
}

// Close stops the signal logs and flushes Options.Flush, with a deadline of
// its own (FlushTimeout); a failed flush is logged as a warning. After a
// second signal (cli.Force of the run's context ended) it flushes nothing,
// to exit at once.
func (p *Process) Close() {
	for _, stop := range p.stops {
		stop()
	}
	if p.flush == nil || cli.Force(p.ctx).Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
	defer cancel()
	if err := p.flush.Shutdown(ctx); err != nil {
		p.Logger.Warn("telemetry not flushed", "error", err)
	}
}

// gated is h, taking only the records gate is enabled for: the exported logs
// follow the console's level.
type gated struct{ h, gate slog.Handler }

func (g gated) Enabled(ctx context.Context, l slog.Level) bool {
	return g.gate.Enabled(ctx, l) && g.h.Enabled(ctx, l)
}

func (g gated) Handle(ctx context.Context, r slog.Record) error { return g.h.Handle(ctx, r) }

func (g gated) WithAttrs(attrs []slog.Attr) slog.Handler {
	return gated{h: g.h.WithAttrs(attrs), gate: g.gate}
}

func (g gated) WithGroup(name string) slog.Handler {
	return gated{h: g.h.WithGroup(name), gate: g.gate}
}
