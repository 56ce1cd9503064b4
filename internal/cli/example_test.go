package cli_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func ExampleParseDuration() {
	for _, s := range []string{"35d", "1d12h", "PT1M30S", "P10675199DT2H48M5.4775807S", "P213504D"} {
		d, err := cli.ParseDuration(s)
		switch {
		case errors.Is(err, cli.ErrOverflow):
			fmt.Println(s, "overflows")
		case err != nil:
			fmt.Println(s, err)
		case d == cli.Unlimited:
			fmt.Println(s, "is unlimited")
		default:
			fmt.Println(s, "=", cli.FormatDuration(d))
		}
	}
	// Output:
	// 35d = 35d
	// 1d12h = 1d12h
	// PT1M30S = 1m30s
	// P10675199DT2H48M5.4775807S is unlimited
	// P213504D overflows
}

func ExampleExit() {
	fs := flag.NewFlagSet("mycmd", flag.ContinueOnError)
	fs.Int("n", 1, "a number")
	err := cli.ParseFlags(fs, []string{"-m", "2"})
	fmt.Println("exit status", cli.Exit("mycmd", err, os.Stdout))
	// Output:
	// mycmd: flag provided but not defined: -m
	// Run 'mycmd -h' for the flags and the environment variables they default to.
	// exit status 2
}

func ExampleStages() {
	sigs := make(chan os.Signal, 3)
	// In main: signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := cli.Stages(context.Background(), sigs)
	defer stop()
	stuck := make(chan struct{})
	defer close(stuck)
	go func() {
		sigs <- os.Interrupt // the first: drain
		<-ctx.Done()
		sigs <- os.Interrupt // the same within cli.DuplicateGap: a duplicate, ignored
		sigs <- os.Interrupt // the second: stop at once
	}()
	err := cli.RunUntilForced(ctx, func(ctx context.Context) error {
		<-ctx.Done() // the drain starts…
		<-stuck      // …and would never end
		return nil
	})
	fmt.Println(context.Cause(ctx))
	fmt.Println(errors.Is(err, cli.ErrForced))
	// Output:
	// interrupt signal received
	// true
}
