package cli_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

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

// TestStagesIgnoreADuplicateSignal: the same signal again within
// cli.DuplicateGap of the first (a supervisor that signals the process and
// its group) is ignored once and the drain goes on; the same signal after
// the gap, another signal, or a third signal stops at once. The clock is
// injected; sigs is unbuffered, so each send returns once Stages has taken
// the signal, and a send that Stages no longer reads loses to force.Done.
func TestStagesIgnoreADuplicateSignal(t *testing.T) {
	tests := []struct {
		name   string
		second os.Signal
		after  time.Duration // of the second signal after the first
		forces bool          // whether the second signal stops at once
	}{
		{"same signal in the same millisecond", syscall.SIGTERM, 0, false},
		{"same signal just inside the gap", syscall.SIGTERM, cli.DuplicateGap - time.Millisecond, false},
		{"same signal at the gap", syscall.SIGTERM, cli.DuplicateGap, true},
		{"same signal long after", syscall.SIGTERM, time.Minute, true},
		{"another signal at once", os.Interrupt, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clock := start // written before each send, read by Stages after it receives
			sigs := make(chan os.Signal)
			ctx, stop := cli.StagesWithClock(context.Background(), sigs, func() time.Time { return clock })
			defer stop()
			force := cli.Force(ctx)

			sigs <- syscall.SIGTERM
			<-ctx.Done()
			clock = start.Add(tt.after)
			sigs <- tt.second

			third := syscall.SIGHUP
			forcedBySecond := false
			select {
			case sigs <- third:
			case <-force.Done():
				forcedBySecond = true
			}
			if forcedBySecond != tt.forces {
				t.Fatalf("the second signal stopped at once: %v, want %v", forcedBySecond, tt.forces)
			}
			<-force.Done()
			want := tt.second
			if !tt.forces {
				want = third
			}
			var se cli.SignalError
			if cause := context.Cause(force); !errors.As(cause, &se) || se.Signal != want || se.N != 2 {
				t.Errorf("force cause = %v, want the second signal %v", cause, want)
			}
		})
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
		sigs <- syscall.SIGTERM
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
