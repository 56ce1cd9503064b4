// Package startup is the start-up that the project's commands share, so that
// each main and run says only what is its own:
//
//   - Main is a command's whole main: SIGINT and SIGTERM in the two stages
//     of cli.Stages (the first cancels the context, the second its
//     cli.Force stage), then os.Exit with cli.Exit's status.
//   - Version answers -version (cli.VersionArg) before any configuration
//     is read, so that it works without one.
//   - Start builds the logger (cli.Logging) and the telemetry providers
//     (telemetry.Config), logs the first and second signal, and returns
//     what Close flushes at exit.
//
// It is a package of its own, not part of internal/cli, because it joins
// internal/cli and internal/telemetry, which imports internal/cli.
package startup

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
)

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

// Process is what Start set up: the logger and the telemetry providers.
// Close it at exit.
type Process struct {
	Logger    *slog.Logger
	Telemetry *telemetry.Providers

	ctx   context.Context
	stops []func() bool
}

// Options are what Start sets up beside the logger.
type Options struct {
	// Telemetry is the command's telemetry settings; nil for a command
	// that exports none (its Process has disabled providers).
	Telemetry *telemetry.Config
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

// Start returns the logger logging describes, writing to stderr, and the
// telemetry providers o.Telemetry asks for, and arranges the logs of the
// first and second signal o asks for. ctx is the run's context (from Main,
// or a test's); it bounds the set-up of the telemetry only. On an error
// nothing is left to close.
func Start(ctx context.Context, logging cli.Logging, stderr io.Writer, o Options) (*Process, error) {
	logger, err := logging.NewLogger(stderr)
	if err != nil {
		return nil, err
	}
	tel := telemetry.Disabled()
	if o.Telemetry != nil {
		if tel, err = telemetry.New(ctx, *o.Telemetry); err != nil {
			return nil, err
		}
	}
	p := &Process{Logger: logger, Telemetry: tel, ctx: ctx}
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

// Close stops the signal logs and flushes what the telemetry exporters
// hold, with a deadline of its own (telemetry.ShutdownTimeout), since the
// run's context has usually ended by then; a failed flush is logged as a
// warning. After a second signal (cli.Force of the run's context ended) it
// flushes nothing, to exit at once.
func (p *Process) Close() {
	for _, stop := range p.stops {
		stop()
	}
	if cli.Force(p.ctx).Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), telemetry.ShutdownTimeout)
	defer cancel()
	if err := p.Telemetry.Shutdown(ctx); err != nil {
		p.Logger.Warn("telemetry not flushed", "error", err)
	}
}
