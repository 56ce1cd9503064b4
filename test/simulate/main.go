// Command simulate is the project's main job with no Azure and no Docker:
// the worker's real receive loop and decision code against in-process
// models of Service Bus, Cosmos DB and a payments service, under injected
// faults, ending with a report and the verdict of every invariant.
//
//	go run ./test/simulate -seed 42
//
// It is proof tooling: no production binary links it (the dependency test
// in test/layout enforces that). It exits with status 1 if an invariant
// fails, 2 on a flag mistake, and 3 if the machine was too busy for the
// compressed time scale (every violation explained by measured scheduling
// delay: see simulation.ErrTiming); -h lists the flags.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := cli.Stages(context.Background(), sigs)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// The exit statuses besides 0 (every invariant holds), 1 (an invariant
// failed: simulation.ErrViolations) and 2 (a mistake on the command line).
const (
	// exitTiming is the exit status of a run whose timing assumptions the
	// machine broke: neither a pass nor a correctness failure.
	exitTiming = 3
	// exitNoVerdict is the exit status of a run that ended without a
	// verdict: interrupted, or stopped by an error of its own, with no
	// report. Status 1 means a failed invariant and nothing else.
	exitNoVerdict = 4
)

// exitCode is cli.Exit, with exitTiming for a run that matches
// simulation.ErrTiming and exitNoVerdict for any other error that is not
// simulation.ErrViolations.
func exitCode(err error, stderr io.Writer) int {
	code := cli.Exit("simulate", err, stderr)
	switch {
	case code != 1:
		return code
	case errors.Is(err, simulation.ErrTiming):
		return exitTiming
	case !errors.Is(err, simulation.ErrViolations):
		return exitNoVerdict
	}
	return code
}

// run is the whole program; main supplies the process's context, arguments,
// environment and output streams.
func run(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	if cli.VersionArg(args) {
		return cli.PrintVersion(stdout, "simulate")
	}
	return runSimulation(ctx, args, stdout, stderr)
}
