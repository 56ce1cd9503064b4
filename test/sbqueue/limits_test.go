package sbqueue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestTimingLimits: an entity gets only the lock durations and
// duplicate-detection windows Service Bus accepts (lock 5 s to 5 min,
// window 20 s to 7 days); the model used to accept any. The override
// admits shorter values, never longer ones.
func TestTimingLimits(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name        string
		lock        time.Duration
		window      time.Duration
		allowShort  bool
		wantErr     bool
		wantMention string
	}{
		{name: "defaults"},
		{name: "shortest lock", lock: 5 * time.Second},
		{name: "longest lock", lock: 5 * time.Minute},
		{name: "lock below 5 s", lock: 4 * time.Second, wantErr: true, wantMention: "lock duration 4s"},
		{name: "sub-second lock", lock: 500 * time.Millisecond, wantErr: true, wantMention: "AllowUnrealisticTimings"},
		{name: "lock above 5 min", lock: 5*time.Minute + time.Second, wantErr: true, wantMention: "lock duration 5m1s"},
		{name: "shortest window", window: 20 * time.Second},
		{name: "longest window", window: 7 * day},
		{name: "window below 20 s", window: 19 * time.Second, wantErr: true, wantMention: "duplicate-detection window 19s"},
		{name: "window above 7 days", window: 7*day + time.Second, wantErr: true, wantMention: "7 days"},
		{name: "override: sub-second lock", lock: 500 * time.Millisecond, allowShort: true},
		{name: "override: 1 s window", window: time.Second, allowShort: true},
		{name: "override keeps the lock maximum", lock: 6 * time.Minute, allowShort: true, wantErr: true},
		{name: "override keeps the window maximum", window: 8 * day, allowShort: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := sbqueue.NewNamespaceWith(sbqueue.NewVirtualClock(t0), sbqueue.NamespaceOptions{AllowUnrealisticTimings: tt.allowShort})
			check := func(what string, err error) {
				t.Helper()
				switch {
				case !tt.wantErr && err != nil:
					t.Errorf("%s: %v, want it created", what, err)
				case tt.wantErr && !errors.Is(err, sbqueue.ErrOutOfRange):
					t.Errorf("%s: err = %v, want ErrOutOfRange", what, err)
				case tt.wantErr && !strings.Contains(err.Error(), tt.wantMention):
					t.Errorf("%s: err = %v, want it to mention %q", what, err, tt.wantMention)
				}
			}
			q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: tt.lock, RequiresDuplicateDetection: true, DuplicateDetectionWindow: tt.window})
			check("queue", err)
			if err == nil && tt.lock != 0 && q.Options().LockDuration != tt.lock {
				t.Errorf("queue lock %v, want %v", q.Options().LockDuration, tt.lock)
			}
			topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: tt.window})
			if tt.lock == 0 {
				check("topic", err)
			} else if err != nil {
				t.Fatalf("topic: %v", err)
			}
			if topic == nil {
				return
			}
			_, err = topic.CreateSubscription("loyalty", sbqueue.SubscriptionOptions{LockDuration: tt.lock})
			if tt.window == 0 {
				check("subscription", err)
			} else if err != nil {
				t.Errorf("subscription: %v", err)
			}
		})
	}
}

// TestSubscriptionNames: a subscription name is checked as Azure checks it:
// 1 to 50 letters, digits, '.', '-' and '_', starting and ending with a
// letter or digit. The model used to accept any character but "/" and "$".
func TestSubscriptionNames(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"loyalty", true},
		{"a", true},
		{"Shipping.v2-eu_1", true},
		{"9lives", true},
		{strings.Repeat("s", 50), true},
		{"", false},
		{strings.Repeat("s", 51), false},
		{"-loyalty", false},
		{"loyalty-", false},
		{"_loyalty", false},
		{"loyalty.", false},
		{"loy alty", false},
		{"loyalty~1", false},
		{"a/b", false},
		{"a$b", false},
		{"café", false},
	}
	for _, tt := range tests {
		ns := sbqueue.NewNamespace(sbqueue.NewVirtualClock(t0))
		topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = topic.CreateSubscription(tt.name, sbqueue.SubscriptionOptions{})
		if (err == nil) != tt.ok {
			t.Errorf("CreateSubscription(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "invalid subscription name") {
			t.Errorf("CreateSubscription(%q) = %v, want it to say the name is invalid", tt.name, err)
		}
	}
}

// TestMaxDeliveryCountLimits: a queue or subscription gets only a
// MaxDeliveryCount Service Bus accepts, 1 to 2000 (its quotas page and the
// resource provider's maxDeliveryCount); the model accepted 2001 and more,
// which would let a test pass with a setting no deployment can have. The
// override for compressed timings does not lift it.
func TestMaxDeliveryCountLimits(t *testing.T) {
	tests := []struct {
		count   int
		wantErr bool
	}{
		{1, false}, {10, false}, {2000, false}, {2001, true}, {1 << 30, true},
	}
	for _, tt := range tests {
		for _, allowShort := range []bool{false, true} {
			ns := sbqueue.NewNamespaceWith(sbqueue.NewVirtualClock(t0), sbqueue.NamespaceOptions{AllowUnrealisticTimings: allowShort})
			_, qerr := ns.CreateQueue("orders", sbqueue.QueueOptions{MaxDeliveryCount: tt.count})
			topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, serr := topic.CreateSubscription("loyalty", sbqueue.SubscriptionOptions{MaxDeliveryCount: tt.count})
			for what, err := range map[string]error{"queue": qerr, "subscription": serr} {
				switch {
				case !tt.wantErr && err != nil:
					t.Errorf("%s with MaxDeliveryCount %d: %v, want it created", what, tt.count, err)
				case tt.wantErr && (!errors.Is(err, sbqueue.ErrOutOfRange) || !strings.Contains(err.Error(), "1 to 2000")):
					t.Errorf("%s with MaxDeliveryCount %d: err = %v, want ErrOutOfRange naming 1 to 2000", what, tt.count, err)
				}
			}
		}
	}
}
