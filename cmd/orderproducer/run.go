package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
)

// run is the whole program; main only supplies the process's context,
// arguments, environment and streams.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if asked, err := startup.Version("orderproducer", args, stdout); asked {
		return err
	}
	fs := flag.NewFlagSet("orderproducer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := parseConfig(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	tel, err := telemetry.New(ctx, cfg.Telemetry)
	if err != nil {
		return err
	}
	proc, err := startup.Start(ctx, cfg.Logging, stderr, startup.Options{
		Flush:      tel,
		LogHandler: tel.LogHandler(), // the logs as OpenTelemetry log records, when exported
		Draining:   "stopping: no more messages are sent; a second signal exits at once",
	})
	if err != nil {
		return err
	}
	defer proc.Close()
	logger := proc.Logger
	now := time.Now().UTC()
	if cfg.Seed == 0 {
		cfg.Seed = uint64(now.UnixNano())
	}
	if cfg.IDPrefix == "" {
		cfg.IDPrefix = "ord-" + now.Format("20060102T150405")
	}

	var orders []source
	if cfg.Input != "" {
		in := stdin
		if cfg.Input != "-" {
			f, err := os.Open(cfg.Input)
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		if orders, err = readOrders(in); err != nil {
			return err
		}
	} else {
		orders = generate(cfg, now)
	}
	first, second := plan(cfg, orders, now)
	if err := checkMessageIDs(first, second); err != nil {
		return err
	}
	logger.Info("orderproducer starting", "config", cfg, "messages", len(first)+len(second))
	return cli.RunUntilForced(ctx, func(ctx context.Context) error { return send(ctx, cfg, logger, tel, first, second, stdout, stderr) })
}

// send sends first, waits the resend delay, sends second, and prints what
// was sent to stdout.
func send(ctx context.Context, cfg config, logger *slog.Logger, tel *telemetry.Providers, first, second []outgoing, stdout, stderr io.Writer) error {
	sb, err := cfg.ServiceBus.NewClient()
	if err != nil {
		return err
	}
	defer closeWithTimeout(sb.Close)
	sender, err := sb.NewSender(cfg.Queue, nil)
	if err != nil {
		return fmt.Errorf("sender for queue %q: %w", cfg.Queue, err)
	}
	defer closeWithTimeout(sender.Close)
	// Opening the link (a batch asks for the queue's message size limit)
	// tells a missing queue, a refused key or an unreachable broker from a
	// failure on the way, and names the setting to fix.
	if _, err := sender.NewMessageBatch(ctx, nil); err != nil {
		return fmt.Errorf("start-up check of Service Bus: %w", cfg.ServiceBus.Explain(err, fmt.Sprintf("queue %q", cfg.Queue), cli.QueueSetting))
	}

	tr := newSendTracing(tel, cfg.Queue)
	bar := newProgress(cfg.Progress, stderr, len(first)+len(second))
	start := time.Now()
	sent, err := sendAll(ctx, sbSender{sender}, tr, first, cfg.BatchSize, func(n int) { bar.Add(n) })
	if err == nil && len(second) > 0 && cfg.ResendDelay > 0 {
		logger.Info("waiting before the resends", "delay", cli.FormatDuration(cfg.ResendDelay))
		select {
		case <-time.After(cfg.ResendDelay):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		var n int
		n, err = sendAll(ctx, sbSender{sender}, tr, second, cfg.BatchSize, func(n int) { bar.Add(n) })
		sent += n
	}
	bar.Finish()

	counts := map[kind]int{}
	for _, o := range append(first, second...) {
		counts[o.kind]++
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "sent %d of %d messages to %s in %v (%.0f msg/s): %d orders, %d duplicates, %d reused ids, %d malformed, %d status changes; id prefix %s, seed %d\n",
		sent, len(first)+len(second), cfg.Queue, elapsed.Round(time.Millisecond), float64(sent)/max(elapsed.Seconds(), 1e-9),
		counts[original], counts[duplicate], counts[reused], counts[malformed], counts[statusChange], cfg.IDPrefix, cfg.Seed)
	if err != nil {
		return fmt.Errorf("after %d messages: %w", sent, err)
	}
	return nil
}

// progressBar is the part of *progressbar.ProgressBar the producer uses.
type progressBar interface {
	Add(int) error
	Finish() error
}

// newProgress returns a progress bar on w when mode asks for one ("always",
// or "auto" on a terminal), else one that shows nothing. The bar starts its
// clock now: progressbar starts it at the first render otherwise, so that
// the first rate reading divides the first batch by the microseconds since
// that render (38,550,501 msg/s).
func newProgress(mode string, w io.Writer, total int) progressBar {
	f, isFile := w.(*os.File)
	if mode == "never" || mode == "auto" && !(isFile && term.IsTerminal(int(f.Fd()))) {
		return progressbar.DefaultSilent(int64(total))
	}
	bar := progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("sending"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	_ = bar.RenderBlank() // starts the clock; a failed write only loses the bar
	return bar
}

func closeWithTimeout(closeFn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = closeFn(ctx) // nothing is left to send; a failed close loses nothing
}
