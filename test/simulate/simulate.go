package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// runSimulation is `simulate`: the worker's real receive loop
// and decision code against the in-process Service Bus queue model, the
// in-memory Cosmos DB model and the reference payments service, under
// injected delivery, store and payment faults, with status changes and
// inbox consumers, ending with a report and the invariant verdict. It needs no Azure and no Docker. It
// returns an error (so the process exits non-zero) if an invariant fails.
func runSimulation(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := simulation.Config{Faults: simulation.DefaultFaultRates()}
	fs.IntVar(&cfg.Orders, "orders", 2000, "orders to send")
	fs.IntVar(&cfg.Workers, "workers", 3, "competing workers on the queue")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "handlers per worker")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed that plans the orders and every fault; 0 picks one from the clock (the report prints it, to replay a run)")
	faults := fs.Bool("faults", true, "inject faults; -faults=false turns every fault off")
	r := &cfg.Faults
	for _, f := range []struct {
		p          *float64
		name, help string
	}{
		{&r.ProducerRetry, "producer-retry", "rate of messages the producer sends twice at once (dropped by duplicate detection)"},
		{&r.RetryOutsideWindow, "retry-outside-window", "rate of orders sent again after the duplicate-detection window"},
		{&r.Crash, "crash", "rate of settlements lost to a worker crash after handling"},
		{&r.LostSettlement, "lost-settlement", "rate of settlements reported as lock lost"},
		{&r.LockExpiry, "lock-expiry", "rate of deliveries whose lock lapses while the handler runs"},
		{&r.Transient, "transient", "rate of store calls failing with 429/503 before writing"},
		{&r.Ambiguous, "ambiguous", "rate of writes that commit but report a timeout"},
		{&r.Outage, "outage", "rate of orders whose every store call fails (dead-lettered after MaxDeliveryCount)"},
		{&r.Reuse, "reuse", "rate of order ids sent again with other content"},
		{&r.Malformed, "malformed", "rate of orders sent as invalid messages"},
		{&r.OutOfOrder, "out-of-order", "rate of orders whose status changes are sent shuffled, some before the order"},
		{&r.PaymentFailure, "payment-failure", "rate of capture requests failing with 5xx/429 before charging"},
		{&r.PaymentTimeout, "payment-timeout", "rate of capture requests charged whose answer is lost (dropped connection or client timeout)"},
		{&r.PaymentCrash, "payment-crash", "rate of captures after which the worker dies before marking the payment completed"},
		{&r.PaymentMarkFailure, "payment-mark-failure", "rate of completed-marks of a payment record that fail once (503) after the capture"},
		{&r.ResubmitEarly, "resubmit-early", "rate of dead-lettered order messages the operator resubmits before the payment key retention passes"},
		{&r.ResubmitLate, "resubmit-late", "rate of the dead-lettered order messages left that the operator resubmits after the key retention"},
		{&r.ReplicaLag, "replica-lag", "rate of orders whose reads lag up to 3 writes behind, as Cosmos DB reads without the session token may"},
		{&r.WorkerRestart, "worker-restart", "rate of settlements after which the order writer that settled restarts (SIGTERM, then a new worker)"},
	} {
		fs.Float64Var(f.p, f.name, *f.p, f.help)
	}
	payments := fs.Bool("payments", true, "capture each order's payment through an in-process payments service; -payments=false turns it off")
	statuses := fs.Bool("status-changes", true, "send status changes for some orders; -status-changes=false turns them off")
	inbox := fs.Bool("inbox", true, `run two inbox consumers ("loyalty" and "audit") on subscriptions of their own; -inbox=false turns them off`)
	fs.Float64Var(&cfg.StatusChanges, "status-rate", 0.3, "fraction of valid orders that get 1 to 3 status changes")
	scale := fs.Float64("scale", 1, "multiply the compressed time scale (locks, window, key retention, resubmission delays, latencies) by this factor, at least 1, for a busy machine")
	fs.DurationVar(&cfg.MarkerTTL, "marker-ttl", 0, "inbox marker TTL; 0 is the minimum retention the queue settings require (a shorter one shows what it breaks)")
	logLevel := fs.String("log-level", "off", "worker log level: off, debug, info, warn or error (logs go to stderr)")
	progress := fs.String("progress", "auto", "progress line on stderr: auto (on a terminal), always or never")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: simulate [flags]

Runs the worker's receive loop and decision code, with the worker's real
timing (retry backoff, lock renewal, message deadline, shutdown grace),
against an in-process model of Service Bus queues (with the SDK's link
credit), an in-memory Cosmos DB and an in-process payments service that
forgets idempotency keys after its retention, with no Azure and no Docker.
It injects the delivery faults of an at-least-once queue (producer retries,
crashes, lost settlements, lapsed locks, store errors, reused ids, malformed
messages), payment faults (5xx, answers lost after the charge, crashes and
failed marks before the payment is marked completed), out-of-order status
changes and an operator's dead-letter resubmissions, and runs two inbox
consumers on subscriptions of their own. It runs on the wall clock at a
compressed time scale, which the report states (1 s locks, a 1 s
duplicate-detection window, a 3 s key retention, resubmissions seconds
later). Then it proves from the final state of the queues, their
dead-letter queues, the store and the payments service that every order was
written and charged exactly once, ends at its highest status version, was
processed once by each inbox consumer, and that no message was lost. Exits
with status 1 if any invariant fails, and only then; with status 4 if the run
ended without a verdict (interrupted, or stopped by an error of its own,
with no report).

The run measures its own scheduling delay. If every violation coincides
with a timing assumption broken during a measured delay (a lock lost, or a
key forgotten, while the machine did not run the process), the verdict is
TIMING, not FAIL, and the exit status 3: the machine was too busy for the
time scale; rerun with the -scale it suggests, or under virtual time (go
test ./test/internal/simulation).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// A zero would select Run's default silently: refuse it, as a
	// negative.
	for _, f := range []struct {
		name   string
		n, max int
	}{{"orders", cfg.Orders, 1 << 30}, {"workers", cfg.Workers, 64}, {"concurrency", cfg.Concurrency, 5000}} {
		if f.n < 1 || f.n > f.max {
			return fmt.Errorf("-%s %d: want a number from 1 to %d", f.name, f.n, f.max)
		}
	}
	if !*faults {
		cfg.Faults = simulation.FaultRates{}
	}
	cfg.DisablePayments, cfg.DisableStatusChanges, cfg.DisableInbox = !*payments, !*statuses, !*inbox
	if !(*scale >= 1 && *scale <= 1000) {
		return fmt.Errorf("-scale %v: want a factor from 1 to 1000", *scale)
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	switch *progress {
	case "auto", "always", "never":
	default:
		return fmt.Errorf("-progress %q: want auto, always or never", *progress)
	}
	if *logLevel != "off" { // off: Run discards the workers' logs
		logger, err := cli.NewLogger(stderr, "auto", *logLevel)
		if err != nil {
			return err
		}
		cfg.Logger = logger
	}

	return simulate(ctx, cfg.ScaledTimeScale(*scale), *progress, stdout, stderr)
}

// simulate runs the simulation cfg, shows progress on stderr as mode says,
// writes the report to stdout and returns an error if an invariant failed:
// one matching simulation.ErrTiming if every violation is explained by
// measured scheduling delay, else simulation.ErrViolations.
func simulate(ctx context.Context, cfg simulation.Config, mode string, stdout, stderr io.Writer) error {
	show := newProgressLine(stderr, mode)
	var progress func(simulation.Progress) // nil when off: Run then starts no ticker
	if show.enabled {
		progress = show.update
	}
	rep, err := simulation.Run(ctx, cfg, progress)
	show.done()
	if err != nil { // interrupted or broken: a report of a partial run would mislead
		return err
	}
	if _, err := rep.WriteTo(stdout); err != nil {
		return err
	}
	if err := rep.Verdict(); err != nil {
		if errors.Is(err, simulation.ErrTiming) {
			fmt.Fprintf(stdout, "\nRerun: simulate -seed %d -orders %d -workers %d -concurrency %d -scale %d (with the same fault flags)\n",
				cfg.Seed, cfg.Orders, cfg.Workers, cfg.Concurrency, rep.Timing.SuggestedScale())
			return err
		}
		fmt.Fprintf(stdout, "\nReplay: simulate -seed %d -orders %d -workers %d -concurrency %d (with the same fault flags)\n",
			cfg.Seed, cfg.Orders, cfg.Workers, cfg.Concurrency)
		return err
	}
	return nil
}

// progressLine shows simulation progress on a writer: one line rewritten
// in place on a terminal, or (with "always" elsewhere) a line per phase and
// at most one a second.
type progressLine struct {
	w        io.Writer
	enabled  bool
	terminal bool
	last     simulation.Progress
	printed  time.Time
	dirty    bool
}

func newProgressLine(w io.Writer, mode string) *progressLine {
	f, ok := w.(*os.File)
	terminal := ok && term.IsTerminal(int(f.Fd()))
	return &progressLine{w: w, terminal: terminal, enabled: mode == "always" || mode == "auto" && terminal}
}

// update is the simulation's progress callback; Run calls it from one
// goroutine at a time.
func (p *progressLine) update(pr simulation.Progress) {
	if !p.enabled {
		return
	}
	line := fmt.Sprintf("%-20s %6d sent  %6d settled  %6d deliveries  %6.1fs", pr.Phase, pr.Sent, pr.Settled, pr.Deliveries, pr.Elapsed.Seconds())
	switch {
	case p.terminal:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.dirty = true
	case pr.Phase != p.last.Phase || time.Since(p.printed) >= time.Second:
		fmt.Fprintln(p.w, line)
		p.printed = time.Now()
	}
	p.last = pr
}

// done ends the progress line so that what follows starts on a line of its
// own.
func (p *progressLine) done() {
	if p.dirty {
		fmt.Fprintln(p.w)
	}
}
