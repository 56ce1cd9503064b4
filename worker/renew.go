package worker

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// minRenewWait keeps a failing renewal from spinning as the lock's
// expiry approaches.
const minRenewWait = 100 * time.Millisecond

// renewLock keeps m's lock until ctx ends and reports whether the lock was
// lost. It is called when the next renewal is due (see renewWait; *last is
// the receipt or the last successful renewal, which it updates) and renews
// at once, then when half of the time left until
// m.LockedUntil has passed, reading LockedUntil again after every renewal
// (the SDK's RenewMessageLock updates it), so the queue's real lock
// duration sets the pace whatever the configuration says. It never waits
// longer than half the configured LockDuration after the last renewal
// either, which bounds the damage of a skewed clock; without LockedUntil
// that is the only rule.
func (w *Worker) renewLock(ctx context.Context, m *azservicebus.ReceivedMessage, last *time.Time) bool {
	var t *time.Timer
	for {
		if ctx.Err() != nil {
			return false
		}
		err := w.r.RenewMessageLock(ctx, m, nil)
		now := time.Now()
		switch {
		case err == nil:
			w.renewed.Add(1)
			*last = now
			w.checkGrantedLock(m, now)
		case isLockLost(err):
			return true
		case ctx.Err() != nil:
			return false
		default:
			w.renewFailed.Add(1)
			w.log.Warn("lock renewal failed; will try again", "message_id", m.MessageID, "error", err)
		}
		wait := w.renewWait(m, *last, time.Now())
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// renewWait is how long after now the next renewal of m is due. A
// LockedUntil already past by the local clock says nothing usable (the lock
// is lost, or the clocks disagree): then only the configured rule applies.
func (w *Worker) renewWait(m *azservicebus.ReceivedMessage, last, now time.Time) time.Duration {
	d := w.opts.LockDuration/2 - now.Sub(last)
	if m.LockedUntil != nil {
		if left := m.LockedUntil.Sub(now); left > 0 {
			d = min(d, left/2)
		}
	}
	return max(d, minRenewWait)
}

// checkGrantedLock compares the lock the broker granted m (its LockedUntil,
// seen at now, just after it was received or renewed) with the configured
// LockDuration and warns, once per worker, when they disagree by more than
// network latency and ordinary clock skew can explain.
func (w *Worker) checkGrantedLock(m *azservicebus.ReceivedMessage, now time.Time) {
	if m.LockedUntil == nil || w.lockWarned.Load() {
		return
	}
	granted := m.LockedUntil.Sub(now)
	if granted <= 0 {
		if w.lockWarned.CompareAndSwap(false, true) {
			w.log.Warn("a message's lock had expired by the local clock when it was received or renewed: the local clock is ahead of the broker's; locks are renewed every half of the configured lock duration",
				"locked_until", m.LockedUntil.UTC().Format(time.RFC3339Nano), "configured_lock", w.opts.LockDuration.String(), "message_id", m.MessageID)
		}
		return
	}
	diff := granted - w.opts.LockDuration
	if diff < 0 {
		diff = -diff
	}
	if diff <= max(2*time.Second, w.opts.LockDuration/10) {
		return
	}
	if !w.lockWarned.CompareAndSwap(false, true) {
		return
	}
	rounding := time.Second
	if granted < 10*time.Second {
		rounding = 100 * time.Millisecond
	}
	w.log.Warn("the queue's lock duration disagrees with the configured one: set Options.LockDuration (the deployment's lock duration setting) to the queue's lockDuration; locks are renewed from LockedUntil meanwhile",
		"granted_lock", granted.Round(rounding).String(), "configured_lock", w.opts.LockDuration.String(), "message_id", m.MessageID)
}
