package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrForced is wrapped by the error RunUntilForced returns when a second
// signal cut the shutdown short: in-flight work was left unsettled (its
// locks lapse and the messages are redelivered), so the command exits
// non-zero.
var ErrForced = errors.New("stopped at once by a second signal")

// SignalError is the cause of a context that Stages cancelled: the signal
// and whether it was the first (drain) or the second (stop at once).
type SignalError struct {
	Signal os.Signal
	N      int // 1 for the first signal, 2 for the second
}

func (e SignalError) Error() string {
	if e.N == 1 {
		return fmt.Sprintf("%v signal received", e.Signal)
	}
	return fmt.Sprintf("second signal (%v) received", e.Signal)
}

// Is makes a SignalError match context.Canceled, as signal.NotifyContext's
// cause does.
func (e SignalError) Is(target error) bool { return target == context.Canceled }

type forceKey struct{}

// DuplicateGap is how long after the first signal the same signal again is
// taken for a duplicate of it rather than for "stop at once" (see Stages).
const DuplicateGap = time.Second

// Stages turns the signals read from sigs into the two stages of a
// shutdown: the returned context is cancelled at the first signal (its
// context.Cause is a SignalError), and the context Force returns for it is
// cancelled at the second. main passes a channel given to signal.Notify
// (buffered, so that no signal is lost before run reads it); tests send on
// a channel of their own. stop releases the goroutine that reads sigs and
// cancels both contexts. Safe for concurrent use.
//
// A duplicate is not a second signal: a supervisor that signals the
// process and its process group (timeout(1), some init systems) delivers
// the same signal twice within a millisecond, and the drain must not be
// cut short by it. So the same signal again less than DuplicateGap after
// the first is ignored, once; the next signal after it, or any other
// signal, or the same one DuplicateGap or more after the first, is the
// second. An operator who presses Ctrl-C twice at once stops at once with
// a third.
func Stages(parent context.Context, sigs <-chan os.Signal) (ctx context.Context, stop func()) {
	return StagesWithClock(parent, sigs, time.Now)
}

// StagesWithClock is Stages with the time read from now, which tests
// inject to place signals inside or outside DuplicateGap.
func StagesWithClock(parent context.Context, sigs <-chan os.Signal, now func() time.Time) (ctx context.Context, stop func()) {
	drain, cancelDrain := context.WithCancelCause(parent)
	force, cancelForce := context.WithCancelCause(context.WithoutCancel(parent))
	done := make(chan struct{})
	go func() {
		var first os.Signal
		var at time.Time
		duplicates := 0
		for {
			select {
			case s := <-sigs:
				switch {
				case first == nil:
					first, at = s, now()
					cancelDrain(SignalError{Signal: s, N: 1})
				case s == first && duplicates == 0 && now().Sub(at) < DuplicateGap:
					duplicates++ // the same delivery again: keep draining
				default:
					cancelForce(SignalError{Signal: s, N: 2})
					return
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return WithForce(drain, force), func() {
		once.Do(func() { close(done) })
		cancelDrain(context.Canceled)
		cancelForce(context.Canceled)
	}
}

// WithForce returns ctx carrying force, the second stage of a shutdown: a
// context whose end means "stop at once, do not wait for in-flight work".
func WithForce(ctx, force context.Context) context.Context {
	return context.WithValue(ctx, forceKey{}, force)
}

// Force returns the second-stage context ctx carries (see Stages and
// WithForce), or a context that never ends when it carries none.
func Force(ctx context.Context) context.Context {
	if f, ok := ctx.Value(forceKey{}).(context.Context); ok {
		return f
	}
	return context.Background()
}

// RunUntilForced runs fn(ctx) and returns its result, unless the second
// stage of ctx (Force) ends first: then it returns at once an error
// wrapping ErrForced and the signal, leaving fn running (the process is
// about to exit; its deferred clean-up is what a forced stop skips).
func RunUntilForced(ctx context.Context, fn func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	force := Force(ctx)
	select {
	case err := <-done:
		return err
	case <-force.Done():
		return fmt.Errorf("%w: %v", ErrForced, context.Cause(force))
	}
}
