package sbqueue

import (
	"errors"
	"fmt"
	"time"
)

// The limits Service Bus puts on an entity's timings, which CreateQueue,
// CreateTopic and Topic.CreateSubscription enforce:
//   - A lock duration is at most 5 minutes (the documented maximum of
//     LockDuration) and at least 5 seconds (the least the Azure portal and
//     the Service Bus emulator accept; what the broker does below it is
//     undocumented, and one report has a subscription with a 1 s lock that
//     delivered nothing).
//   - A duplicate-detection window is 20 seconds to 7 days
//     (duplicateDetectionHistoryTimeWindow in the resource provider's
//     schema).
//   - A MaxDeliveryCount is 1 to 2000 (Service Bus's quotas); the override
//     for compressed timings does not change it.
//
// A model that accepted more would let a test pass with settings no
// deployment can have.
const (
	MinLockDuration             = 5 * time.Second
	MaxLockDuration             = 5 * time.Minute
	MinDuplicateDetectionWindow = 20 * time.Second
	MaxDuplicateDetectionWindow = 7 * 24 * time.Hour
	MaxMaxDeliveryCount         = 2000
)

// ErrOutOfRange is wrapped by the errors of CreateQueue, CreateTopic and
// Topic.CreateSubscription for a lock duration or duplicate-detection
// window that Service Bus would refuse.
var ErrOutOfRange = errors.New("sbqueue: outside the range Service Bus accepts")

// NamespaceOptions are the model's own settings for a namespace, which
// Service Bus has no counterpart for.
type NamespaceOptions struct {
	// AllowUnrealisticTimings lets the namespace's entities have a lock
	// duration shorter than MinLockDuration and a duplicate-detection
	// window shorter than MinDuplicateDetectionWindow (still positive; the
	// maximums hold). It is for tests and simulations that run the pattern
	// at a compressed scale, such as 1 s locks on a testing/synctest
	// bubble's virtual clock or a short wall-clock run. It cannot hide a
	// defect, because it changes no rule of the model: a lock still lapses
	// after its duration, a resend inside the window is still dropped, and
	// the code under test reads the durations from the entity as it would
	// from Service Bus. It only shortens the clock of behaviour that other
	// tests cover at real values (the worker's and the order example's
	// tests with the Service Bus defaults, the simulation's runs at
	// production scale); a defect that appears only at real durations is
	// still found there.
	AllowUnrealisticTimings bool
}

// NewNamespaceWith is NewNamespace with the model's own options.
func NewNamespaceWith(clock Clock, o NamespaceOptions) *Namespace {
	n := NewNamespace(clock)
	n.allowUnrealistic = o.AllowUnrealisticTimings
	return n
}

// checkLockDuration reports a lock duration (defaults applied) outside
// Service Bus's range, naming the entity; below the minimum is allowed
// with allowShort.
func checkLockDuration(entity string, d time.Duration, allowShort bool) error {
	if d > MaxLockDuration || d < MinLockDuration && !allowShort {
		return fmt.Errorf("%s: lock duration %v: Service Bus accepts %v to %v "+
			"(NamespaceOptions.AllowUnrealisticTimings allows shorter ones at a compressed scale): %w",
			entity, d, MinLockDuration, "5m", ErrOutOfRange)
	}
	return nil
}

// checkMaxDeliveryCount reports a MaxDeliveryCount (defaults applied)
// outside Service Bus's range, naming the entity.
func checkMaxDeliveryCount(entity string, n int) error {
	if n < 1 || n > MaxMaxDeliveryCount {
		return fmt.Errorf("%s: MaxDeliveryCount %d: Service Bus accepts 1 to %d: %w", entity, n, MaxMaxDeliveryCount, ErrOutOfRange)
	}
	return nil
}

// checkDuplicateWindow is checkLockDuration for a duplicate-detection
// window.
func checkDuplicateWindow(entity string, d time.Duration, allowShort bool) error {
	if d > MaxDuplicateDetectionWindow || d < MinDuplicateDetectionWindow && !allowShort {
		return fmt.Errorf("%s: duplicate-detection window %v: Service Bus accepts %v to %s "+
			"(NamespaceOptions.AllowUnrealisticTimings allows shorter ones at a compressed scale): %w",
			entity, d, MinDuplicateDetectionWindow, "7 days", ErrOutOfRange)
	}
	return nil
}

// checkSubscriptionName reports a subscription name Azure refuses: it has
// 1 to 50 characters, each a letter, a digit, '.', '-' or '_', and starts
// and ends with a letter or digit (the naming rules of
// Microsoft.ServiceBus/namespaces/topics/subscriptions).
func checkSubscriptionName(name string) error {
	if name == "" || len(name) > maxSubscriptionNameLength {
		return fmt.Errorf("sbqueue: invalid subscription name %q: Service Bus allows 1 to %d characters", name, maxSubscriptionNameLength)
	}
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	for i := 0; i < len(name); i++ {
		if c := name[i]; !alnum(c) && c != '.' && c != '-' && c != '_' {
			return fmt.Errorf("sbqueue: invalid subscription name %q: character %q is not a letter, digit, '.', '-' or '_'", name, c)
		}
	}
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return fmt.Errorf("sbqueue: invalid subscription name %q: it must start and end with a letter or digit", name)
	}
	return nil
}
