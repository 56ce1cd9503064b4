package cli_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func TestStagesFirstSignalDrainsSecondForces(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	ctx, stop := cli.Stages(context.Background(), sigs)
	defer stop()
	force := cli.Force(ctx)

	sigs <- os.Interrupt
	<-ctx.Done()
	var se cli.SignalError
	if cause := context.Cause(ctx); !errors.As(cause, &se) || se.Signal != os.Interrupt || se.N != 1 || !errors.Is(cause, context.Canceled) {
		t.Fatalf("drain cause = %v, want the first SIGINT", cause)
	}
	if force.Err() != nil {
		t.Fatal("the first signal ended the second stage too")
	}

	sigs <- syscall.SIGTERM
	<-force.Done()
	if cause := context.Cause(force); !errors.As(cause, &se) || se.Signal != syscall.SIGTERM || se.N != 2 {
		t.Fatalf("force cause = %v, want the second signal", cause)
	}
}

func TestRunUntilForced(t *testing.T) {
	t.Run("fn returns", func(t *testing.T) {
		want := errors.New("done")
		if err := cli.RunUntilForced(context.Background(), func(context.Context) error { return want }); err != want {
			t.Errorf("err = %v, want %v", err, want)
		}
	})
	t.Run("a second signal returns while fn still drains", func(t *testing.T) {
		sigs := make(chan os.Signal, 2)
		ctx, stop := cli.Stages(context.Background(), sigs)
		defer stop()
		release := make(chan struct{})
		defer close(release)
		started := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			errc <- cli.RunUntilForced(ctx, func(ctx context.Context) error {
				close(started)
				<-ctx.Done() // drain begins at the first signal…
				<-release    // …and never ends by itself
				return nil
			})
		}()
		<-started
		sigs <- os.Interrupt
		sigs <- os.Interrupt
		err := <-errc
		if !errors.Is(err, cli.ErrForced) {
			t.Fatalf("err = %v, want ErrForced", err)
		}
		if cli.Exit("x", err, discard{}) == 0 {
			t.Error("a forced stop exits 0")
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
