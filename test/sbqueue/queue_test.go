package sbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const lockDuration = 60 * time.Second

// newTestQueue returns a queue called "orders" on a virtual clock at t0.
func newTestQueue(t testing.TB, o sbqueue.QueueOptions) (*sbqueue.Queue, *sbqueue.VirtualClock) {
	t.Helper()
	clock := sbqueue.NewVirtualClock(t0)
	q, err := sbqueue.NewNamespace(clock).CreateQueue("orders", o)
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	return q, clock
}

func send(t testing.TB, q *sbqueue.Queue, m sbqueue.Message) bool {
	t.Helper()
	enqueued, err := q.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("Send(%q): %v", m.MessageID, err)
	}
	return enqueued
}

// receiveOne receives exactly one message without blocking.
func receiveOne(t testing.TB, q *sbqueue.Queue) sbqueue.ReceivedMessage {
	t.Helper()
	got := q.TryReceive(1)
	if len(got) != 1 {
		t.Fatalf("TryReceive(1) on %s returned %d messages, want 1", q.Name(), len(got))
	}
	return got[0]
}

// waitBlocked yields until n Receive calls are blocked on q. It has no
// deadline: if the receivers never block, the test times out.
func waitBlocked(q *sbqueue.Queue, n int) {
	for q.Snapshot().BlockedReceivers != n {
		runtime.Gosched()
	}
}

func expectEmpty(t testing.TB, q *sbqueue.Queue) {
	t.Helper()
	if got := q.TryReceive(10); len(got) != 0 {
		t.Fatalf("TryReceive on %s returned %d messages (first %q, delivery %d), want none",
			q.Name(), len(got), got[0].MessageID, got[0].DeliveryCount)
	}
}

func TestNamespace(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.NewVirtualClock(t0))
	q, err := ns.CreateQueue("Orders", sbqueue.QueueOptions{})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	want := sbqueue.QueueOptions{
		LockDuration:             sbqueue.DefaultLockDuration,
		MaxDeliveryCount:         sbqueue.DefaultMaxDeliveryCount,
		DuplicateDetectionWindow: sbqueue.DefaultDuplicateDetectionWindow,
	}
	if got := q.Options(); got != want {
		t.Errorf("Options() = %+v, want defaults %+v", got, want)
	}
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{}); !errors.Is(err, sbqueue.ErrQueueExists) {
		t.Errorf("second CreateQueue: err = %v, want ErrQueueExists", err)
	}
	for _, bad := range []string{"", "a/$DeadLetterQueue", "/a", "a/"} {
		if _, err := ns.CreateQueue(bad, sbqueue.QueueOptions{}); err == nil {
			t.Errorf("CreateQueue(%q) succeeded, want an error", bad)
		}
	}
	if _, err := ns.CreateQueue("neg", sbqueue.QueueOptions{LockDuration: -time.Second}); err == nil {
		t.Error("CreateQueue with a negative LockDuration succeeded, want an error")
	}

	tests := []struct {
		name string
		want *sbqueue.Queue
	}{
		{"Orders", q},
		{"orders", q},
		{"orders/$DeadLetterQueue", q.DeadLetterQueue()},
		{"ORDERS/$deadletterqueue", q.DeadLetterQueue()},
	}
	for _, tt := range tests {
		got, ok := ns.Queue(tt.name)
		if !ok || got != tt.want {
			t.Errorf("Queue(%q) = %v, %v; want %s", tt.name, got, ok, tt.want.Name())
		}
	}
	if _, ok := ns.Queue("payments"); ok {
		t.Error(`Queue("payments") found a queue that was never created`)
	}
	if got := q.DeadLetterQueue().Name(); got != "Orders/$DeadLetterQueue" {
		t.Errorf("DLQ name = %q", got)
	}
	if q.DeadLetterQueue().DeadLetterQueue() != nil {
		t.Error("a dead-letter queue has a dead-letter queue")
	}
	if got := q.DeadLetterQueue().Options().LockDuration; got != sbqueue.DefaultLockDuration {
		t.Errorf("DLQ LockDuration = %v, want the parent's %v", got, sbqueue.DefaultLockDuration)
	}
}

func TestSendAssignsSequenceNumbersAndIDs(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{})
	send(t, q, sbqueue.Message{MessageID: "a", Body: []byte("1"), ContentType: "application/json",
		ApplicationProperties: map[string]any{"k": "v"}})
	clock.Advance(time.Second)
	send(t, q, sbqueue.Message{Body: []byte("2")})
	send(t, q, sbqueue.Message{Body: []byte("3")})

	got := q.TryReceive(10)
	if len(got) != 3 {
		t.Fatalf("received %d messages, want 3", len(got))
	}
	for i, m := range got {
		if m.SequenceNumber != int64(i+1) {
			t.Errorf("message %d: SequenceNumber = %d, want %d", i, m.SequenceNumber, i+1)
		}
		if m.DeliveryCount != 1 {
			t.Errorf("message %d: DeliveryCount = %d, want 1", i, m.DeliveryCount)
		}
		if want := t0.Add(time.Second + lockDuration); !m.LockedUntil.Equal(want) {
			t.Errorf("message %d: LockedUntil = %v", i, m.LockedUntil)
		}
	}
	if got[0].MessageID != "a" || string(got[0].Body) != "1" || got[0].ContentType != "application/json" ||
		got[0].ApplicationProperties["k"] != "v" || !got[0].EnqueuedTime.Equal(t0) || !got[0].ExpiresAt.IsZero() {
		t.Errorf("first message = %+v", got[0])
	}
	if got[1].MessageID == "" || got[1].MessageID == got[2].MessageID || len(got[1].MessageID) != 36 {
		t.Errorf("assigned MessageIDs %q and %q, want two distinct UUID strings", got[1].MessageID, got[2].MessageID)
	}
	if got[0].LockToken == got[1].LockToken || got[0].LockToken == [16]byte{} {
		t.Error("lock tokens are not distinct and non-zero")
	}
	// Received messages are copies: changing one does not change the queue.
	got[0].Body[0] = 'X'
	got[0].ApplicationProperties["k"] = "changed"
	if p := q.Peek(1)[0]; string(p.Body) != "1" || p.ApplicationProperties["k"] != "v" {
		t.Errorf("modifying a received message changed the queue: %+v", p)
	}
}

func TestLockExpiryRedeliversWithNextDeliveryCount(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{})
	send(t, q, sbqueue.Message{MessageID: "m"})

	first := receiveOne(t, q)
	if first.DeliveryCount != 1 || !first.LockedUntil.Equal(t0.Add(lockDuration)) {
		t.Fatalf("first delivery: count %d, locked until %v", first.DeliveryCount, first.LockedUntil)
	}
	clock.Advance(lockDuration - time.Nanosecond)
	expectEmpty(t, q) // still locked one nanosecond before LockedUntil

	clock.Advance(time.Nanosecond) // the lock ends at LockedUntil
	second := receiveOne(t, q)
	if second.MessageID != "m" || second.DeliveryCount != 2 {
		t.Errorf("redelivery: id %q count %d, want m and 2", second.MessageID, second.DeliveryCount)
	}
	if second.LockToken == first.LockToken {
		t.Error("redelivery reused the lock token")
	}
	if err := q.Complete(first.LockToken); !errors.Is(err, sbqueue.ErrLockLost) {
		t.Errorf("Complete with the expired token: err = %v, want ErrLockLost", err)
	}
	if err := q.Complete(second.LockToken); err != nil {
		t.Errorf("Complete with the current token: %v", err)
	}
	if q.ExpireLock(second.LockToken) {
		t.Error("ExpireLock of a completed message's token reported true")
	}
	s := q.Snapshot()
	if len(s.Active)+len(s.Locked)+len(s.DeadLetters) != 0 {
		t.Errorf("after Complete the queue still holds %+v", s)
	}
	if s.Delivered != 2 || s.LockExpired != 1 || s.Completed != 1 || s.LockLost != 1 {
		t.Errorf("counters = %+v", s.Counters)
	}
}

func TestSettlingAStaleTokenFailsWithLockLost(t *testing.T) {
	ops := []struct {
		name string
		do   func(q *sbqueue.Queue, token [16]byte) error
	}{
		{"Complete", func(q *sbqueue.Queue, tok [16]byte) error { return q.Complete(tok) }},
		{"Abandon", func(q *sbqueue.Queue, tok [16]byte) error { return q.Abandon(tok, nil) }},
		{"Release", func(q *sbqueue.Queue, tok [16]byte) error { return q.Release(tok) }},
		{"DeadLetter", func(q *sbqueue.Queue, tok [16]byte) error { return q.DeadLetter(tok, "r", "d", nil) }},
		{"RenewLock", func(q *sbqueue.Queue, tok [16]byte) error { _, err := q.RenewLock(tok); return err }},
	}
	stale := []struct {
		name string
		// make returns a token that is no longer valid.
		make func(q *sbqueue.Queue, clock *sbqueue.VirtualClock, m sbqueue.ReceivedMessage) [16]byte
	}{
		{"unknown", func(*sbqueue.Queue, *sbqueue.VirtualClock, sbqueue.ReceivedMessage) [16]byte {
			return [16]byte{1, 2, 3}
		}},
		{"expired", func(_ *sbqueue.Queue, clock *sbqueue.VirtualClock, m sbqueue.ReceivedMessage) [16]byte {
			clock.Advance(lockDuration)
			return m.LockToken
		}},
		{"expired by ExpireLock", func(q *sbqueue.Queue, _ *sbqueue.VirtualClock, m sbqueue.ReceivedMessage) [16]byte {
			if !q.ExpireLock(m.LockToken) {
				panic("ExpireLock found no lock")
			}
			return m.LockToken
		}},
		{"expired by ExpireLocks", func(q *sbqueue.Queue, _ *sbqueue.VirtualClock, m sbqueue.ReceivedMessage) [16]byte {
			q.ExpireLocks()
			return m.LockToken
		}},
		{"redelivered", func(q *sbqueue.Queue, clock *sbqueue.VirtualClock, m sbqueue.ReceivedMessage) [16]byte {
			clock.Advance(lockDuration)
			if len(q.TryReceive(1)) != 1 {
				panic("no redelivery")
			}
			return m.LockToken
		}},
		{"already completed", func(q *sbqueue.Queue, _ *sbqueue.VirtualClock, m sbqueue.ReceivedMessage) [16]byte {
			if err := q.Complete(m.LockToken); err != nil {
				panic(err)
			}
			return m.LockToken
		}},
	}
	for _, op := range ops {
		for _, st := range stale {
			t.Run(op.name+"/"+st.name, func(t *testing.T) {
				q, clock := newTestQueue(t, sbqueue.QueueOptions{})
				send(t, q, sbqueue.Message{MessageID: "m"})
				token := st.make(q, clock, receiveOne(t, q))
				before := q.Snapshot()
				if err := op.do(q, token); !errors.Is(err, sbqueue.ErrLockLost) {
					t.Fatalf("err = %v, want ErrLockLost", err)
				}
				after := q.Snapshot()
				if after.LockLost != before.LockLost+1 {
					t.Errorf("LockLost counter went from %d to %d", before.LockLost, after.LockLost)
				}
				if len(after.Active) != len(before.Active) || len(after.Locked) != len(before.Locked) ||
					len(after.DeadLetters) != len(before.DeadLetters) {
					t.Errorf("a rejected settlement changed the queue: before %+v, after %+v", before, after)
				}
			})
		}
	}
}

func TestAbandonAndRelease(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	send(t, q, sbqueue.Message{MessageID: "m", ApplicationProperties: map[string]any{"keep": 1}})

	m := receiveOne(t, q)
	if err := q.Abandon(m.LockToken, map[string]any{"attempt": "first"}); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	m = receiveOne(t, q)
	if m.DeliveryCount != 2 {
		t.Errorf("after Abandon: DeliveryCount = %d, want 2", m.DeliveryCount)
	}
	if m.ApplicationProperties["attempt"] != "first" || m.ApplicationProperties["keep"] != 1 {
		t.Errorf("after Abandon: properties = %v, want attempt=first merged into keep=1", m.ApplicationProperties)
	}
	if err := q.Release(m.LockToken); err != nil {
		t.Fatalf("Release: %v", err)
	}
	m = receiveOne(t, q)
	if m.DeliveryCount != 2 {
		t.Errorf("after Release: DeliveryCount = %d, want 2 (a released delivery does not count)", m.DeliveryCount)
	}
	s := q.Snapshot()
	if s.Abandoned != 1 || s.Released != 1 || s.Delivered != 3 {
		t.Errorf("counters = %+v", s.Counters)
	}
}

func TestDeadLetter(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.NewVirtualClock(t0))
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	send(t, q, sbqueue.Message{MessageID: "m", Body: []byte("body"), ApplicationProperties: map[string]any{"a": 1}})
	send(t, q, sbqueue.Message{MessageID: "other"})

	m := receiveOne(t, q)
	if err := q.DeadLetter(m.LockToken, "HashMismatch", "stored abc, got def", map[string]any{"b": 2}); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	if p := q.Peek(10); len(p) != 1 || p[0].MessageID != "other" {
		t.Errorf("main queue holds %v, want only \"other\"", p)
	}

	dlq, ok := ns.Queue("orders/$DeadLetterQueue")
	if !ok || dlq != q.DeadLetterQueue() {
		t.Fatal("dead-letter queue not found by name")
	}
	d := receiveOne(t, dlq)
	if d.MessageID != "m" || string(d.Body) != "body" || d.SequenceNumber != m.SequenceNumber {
		t.Errorf("DLQ message = %+v, want the original", d)
	}
	if d.DeadLetterReason != "HashMismatch" || d.DeadLetterErrorDescription != "stored abc, got def" || d.DeadLetterSource != "" {
		t.Errorf("DLQ fields: reason %q, description %q, source %q", d.DeadLetterReason, d.DeadLetterErrorDescription, d.DeadLetterSource)
	}
	wantProps := map[string]any{"a": 1, "b": 2, "DeadLetterReason": "HashMismatch", "DeadLetterErrorDescription": "stored abc, got def"}
	if fmt.Sprint(d.ApplicationProperties) != fmt.Sprint(wantProps) {
		t.Errorf("DLQ properties = %v, want %v", d.ApplicationProperties, wantProps)
	}
	if d.DeliveryCount != 1 || !d.LockedUntil.Equal(t0.Add(lockDuration)) {
		t.Errorf("DLQ delivery: count %d, locked until %v", d.DeliveryCount, d.LockedUntil)
	}
	if err := dlq.DeadLetter(d.LockToken, "again", "", nil); !errors.Is(err, sbqueue.ErrDeadLetterQueue) {
		t.Errorf("DeadLetter in the DLQ: err = %v, want ErrDeadLetterQueue", err)
	}
	if _, err := dlq.Send(context.Background(), sbqueue.Message{}); !errors.Is(err, sbqueue.ErrDeadLetterQueue) {
		t.Errorf("Send to the DLQ: err = %v, want ErrDeadLetterQueue", err)
	}
	if err := dlq.Complete(d.LockToken); err != nil {
		t.Fatalf("Complete in the DLQ: %v", err)
	}
	expectEmpty(t, dlq)
	if s := q.Snapshot(); s.DeadLettered != 1 || len(s.DeadLetters) != 0 {
		t.Errorf("main snapshot: DeadLettered %d, DeadLetters %v", s.DeadLettered, s.DeadLetters)
	}
	if s := dlq.Snapshot(); s.Sent != 1 || s.Completed != 1 {
		t.Errorf("DLQ counters = %+v", s.Counters)
	}
}

func TestDeadLetterQueueLocksExpireWithoutDeadLettering(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{MaxDeliveryCount: 1})
	send(t, q, sbqueue.Message{MessageID: "m"})
	m := receiveOne(t, q)
	if err := q.DeadLetter(m.LockToken, "r", "d", nil); err != nil {
		t.Fatal(err)
	}
	dlq := q.DeadLetterQueue()
	for want := uint32(1); want <= 3; want++ {
		d := receiveOne(t, dlq)
		if d.DeliveryCount != want {
			t.Fatalf("DLQ delivery %d: DeliveryCount = %d", want, d.DeliveryCount)
		}
		if want%2 == 0 {
			clock.Advance(lockDuration)
		} else if err := dlq.Abandon(d.LockToken, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMaxDeliveryCountExceeded(t *testing.T) {
	const max = 3
	endings := []struct {
		name string
		end  func(t *testing.T, q *sbqueue.Queue, clock *sbqueue.VirtualClock, m sbqueue.ReceivedMessage)
	}{
		{"abandon", func(t *testing.T, q *sbqueue.Queue, _ *sbqueue.VirtualClock, m sbqueue.ReceivedMessage) {
			if err := q.Abandon(m.LockToken, nil); err != nil {
				t.Fatalf("Abandon: %v", err)
			}
		}},
		{"lock expiry", func(_ *testing.T, _ *sbqueue.Queue, clock *sbqueue.VirtualClock, _ sbqueue.ReceivedMessage) {
			clock.Advance(lockDuration)
		}},
		{"ExpireLock", func(t *testing.T, q *sbqueue.Queue, _ *sbqueue.VirtualClock, m sbqueue.ReceivedMessage) {
			if !q.ExpireLock(m.LockToken) {
				t.Fatal("ExpireLock found no lock")
			}
		}},
	}
	for _, tt := range endings {
		t.Run(tt.name, func(t *testing.T) {
			q, clock := newTestQueue(t, sbqueue.QueueOptions{MaxDeliveryCount: max})
			send(t, q, sbqueue.Message{MessageID: "poison"})
			for want := uint32(1); want <= max; want++ {
				m := receiveOne(t, q)
				if m.DeliveryCount != want {
					t.Fatalf("DeliveryCount = %d, want %d", m.DeliveryCount, want)
				}
				tt.end(t, q, clock, m)
			}
			expectEmpty(t, q)
			d := receiveOne(t, q.DeadLetterQueue())
			const wantDesc = "Message could not be consumed after 3 delivery attempts."
			if d.MessageID != "poison" || d.DeadLetterReason != "MaxDeliveryCountExceeded" || d.DeadLetterErrorDescription != wantDesc {
				t.Errorf("DLQ message %q: reason %q, description %q", d.MessageID, d.DeadLetterReason, d.DeadLetterErrorDescription)
			}
			if d.ApplicationProperties["DeadLetterReason"] != "MaxDeliveryCountExceeded" ||
				d.ApplicationProperties["DeadLetterErrorDescription"] != wantDesc {
				t.Errorf("DLQ properties = %v", d.ApplicationProperties)
			}
		})
	}
}

func TestReleaseNeverDeadLetters(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{MaxDeliveryCount: 1})
	send(t, q, sbqueue.Message{MessageID: "m"})
	for range 5 {
		m := receiveOne(t, q)
		if m.DeliveryCount != 1 {
			t.Fatalf("DeliveryCount = %d, want 1", m.DeliveryCount)
		}
		if err := q.Release(m.LockToken); err != nil {
			t.Fatal(err)
		}
	}
	expectEmpty(t, q.DeadLetterQueue())
}

func TestRenewLock(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{})
	send(t, q, sbqueue.Message{MessageID: "m"})
	m := receiveOne(t, q)

	clock.Advance(40 * time.Second)
	until, err := q.RenewLock(m.LockToken)
	if err != nil {
		t.Fatalf("RenewLock: %v", err)
	}
	if want := t0.Add(40*time.Second + lockDuration); !until.Equal(want) {
		t.Errorf("RenewLock = %v, want %v", until, want)
	}
	clock.Advance(30 * time.Second) // past the original LockedUntil, before the renewed one
	expectEmpty(t, q)
	if p := q.Snapshot().Locked; len(p) != 1 || !p[0].LockedUntil.Equal(until) || p[0].LockToken != m.LockToken {
		t.Errorf("Snapshot().Locked = %+v, want the renewed lock", p)
	}

	clock.Advance(30 * time.Second) // reaches the renewed LockedUntil
	if _, err := q.RenewLock(m.LockToken); !errors.Is(err, sbqueue.ErrLockLost) {
		t.Errorf("RenewLock after expiry: err = %v, want ErrLockLost", err)
	}
	if r := receiveOne(t, q); r.DeliveryCount != 2 {
		t.Errorf("after the renewed lock expired: DeliveryCount = %d, want 2", r.DeliveryCount)
	}
	if s := q.Snapshot(); s.Renewed != 1 || s.LockLost != 1 {
		t.Errorf("counters = %+v", s.Counters)
	}
}

func TestTimeToLive(t *testing.T) {
	tests := []struct {
		name       string
		opts       sbqueue.QueueOptions
		messageTTL time.Duration
		wantTTL    time.Duration
		deadLetter bool
	}{
		{"message TTL, dropped", sbqueue.QueueOptions{}, 10 * time.Second, 10 * time.Second, false},
		{"message TTL, dead-lettered", sbqueue.QueueOptions{DeadLetteringOnMessageExpiration: true}, 10 * time.Second, 10 * time.Second, true},
		{"queue default", sbqueue.QueueOptions{DefaultMessageTimeToLive: 20 * time.Second}, 0, 20 * time.Second, false},
		{"capped by queue default", sbqueue.QueueOptions{DefaultMessageTimeToLive: 20 * time.Second, DeadLetteringOnMessageExpiration: true}, time.Hour, 20 * time.Second, true},
		{"shorter than queue default", sbqueue.QueueOptions{DefaultMessageTimeToLive: 20 * time.Second}, 5 * time.Second, 5 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, clock := newTestQueue(t, tt.opts)
			send(t, q, sbqueue.Message{MessageID: "m", TimeToLive: tt.messageTTL})

			p := q.Peek(1)
			if len(p) != 1 || p[0].TimeToLive != tt.wantTTL || !p[0].ExpiresAt.Equal(t0.Add(tt.wantTTL)) {
				t.Fatalf("Peek = %+v, want TTL %v expiring at %v", p, tt.wantTTL, t0.Add(tt.wantTTL))
			}
			clock.Advance(tt.wantTTL - time.Nanosecond)
			if len(q.Peek(1)) != 1 {
				t.Fatal("message gone one nanosecond before ExpiresAt")
			}
			clock.Advance(time.Nanosecond)
			expectEmpty(t, q)
			s := q.Snapshot()
			if s.Expired != 1 {
				t.Errorf("Expired = %d, want 1", s.Expired)
			}
			if !tt.deadLetter {
				if len(s.DeadLetters) != 0 || s.DeadLettered != 0 {
					t.Errorf("expired message dead-lettered without DeadLetteringOnMessageExpiration: %+v", s)
				}
				return
			}
			d := receiveOne(t, q.DeadLetterQueue())
			if d.MessageID != "m" || d.DeadLetterReason != "TTLExpiredException" || d.DeadLetterErrorDescription == "" {
				t.Errorf("DLQ message %q: reason %q, description %q", d.MessageID, d.DeadLetterReason, d.DeadLetterErrorDescription)
			}
			// Messages in the dead-letter queue do not expire.
			if err := q.DeadLetterQueue().Abandon(d.LockToken, nil); err != nil {
				t.Fatal(err)
			}
			clock.Advance(24 * time.Hour)
			if len(q.DeadLetterQueue().Peek(10)) != 1 {
				t.Error("a message expired in the dead-letter queue")
			}
		})
	}
}

func TestLockedMessageExpiresOnlyAfterItsLock(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{DeadLetteringOnMessageExpiration: true})
	send(t, q, sbqueue.Message{MessageID: "kept", TimeToLive: 10 * time.Second})
	send(t, q, sbqueue.Message{MessageID: "abandoned", TimeToLive: 10 * time.Second})
	got := q.TryReceive(2)
	if len(got) != 2 {
		t.Fatalf("received %d, want 2", len(got))
	}
	clock.Advance(30 * time.Second) // past the TTL, within the lock
	if err := q.Complete(got[0].LockToken); err != nil {
		t.Errorf("Complete after the TTL, within the lock: %v", err)
	}
	if err := q.Abandon(got[1].LockToken, nil); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	expectEmpty(t, q)
	if d := receiveOne(t, q.DeadLetterQueue()); d.MessageID != "abandoned" || d.DeadLetterReason != "TTLExpiredException" {
		t.Errorf("DLQ got %q with reason %q", d.MessageID, d.DeadLetterReason)
	}
}

func TestDuplicateDetection(t *testing.T) {
	const window = 10 * time.Minute
	tests := []struct {
		name         string
		detection    bool
		after        time.Duration // between the first and the second send
		secondBody   string
		wantEnqueued bool
	}{
		{"just inside the window", true, window - time.Nanosecond, "same", false},
		{"at the window edge", true, window, "same", true},
		{"after the window", true, window + time.Nanosecond, "same", true},
		{"immediately", true, 0, "same", false},
		{"different content inside the window", true, time.Minute, "different", false},
		{"detection disabled", false, 0, "same", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, clock := newTestQueue(t, sbqueue.QueueOptions{RequiresDuplicateDetection: tt.detection, DuplicateDetectionWindow: window})
			if !send(t, q, sbqueue.Message{MessageID: "order-1", Body: []byte("same")}) {
				t.Fatal("first send dropped")
			}
			// Settling the first copy does not end the window.
			if err := q.Complete(receiveOne(t, q).LockToken); err != nil {
				t.Fatal(err)
			}
			clock.Advance(tt.after)
			if got := send(t, q, sbqueue.Message{MessageID: "order-1", Body: []byte(tt.secondBody)}); got != tt.wantEnqueued {
				t.Fatalf("second Send enqueued = %v, want %v", got, tt.wantEnqueued)
			}
			s := q.Snapshot()
			wantActive, wantDropped := 0, int64(1)
			if tt.wantEnqueued {
				wantActive, wantDropped = 1, 0
			}
			if len(s.Active) != wantActive || s.DuplicatesDropped != wantDropped {
				t.Errorf("active %d, DuplicatesDropped %d; want %d, %d", len(s.Active), s.DuplicatesDropped, wantActive, wantDropped)
			}
		})
	}
}

func TestDuplicateDetectionWindowRestartsOnAcceptedResend(t *testing.T) {
	const window = time.Minute
	q, clock := newTestQueue(t, sbqueue.QueueOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: window})
	steps := []struct {
		advance      time.Duration
		wantEnqueued bool
	}{
		{0, true},
		{window - time.Nanosecond, false}, // a drop does not restart the window
		{time.Nanosecond, true},           // exactly one window after the first accept
		{window - time.Nanosecond, false}, // inside the restarted window
		{time.Nanosecond, true},
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		if got := send(t, q, sbqueue.Message{MessageID: "x"}); got != st.wantEnqueued {
			t.Errorf("step %d: enqueued = %v, want %v", i, got, st.wantEnqueued)
		}
	}
}

func TestSendBatch(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{RequiresDuplicateDetection: true})
	ctx := context.Background()
	n, err := q.SendBatch(ctx, []sbqueue.Message{{MessageID: "a"}, {MessageID: "b"}, {MessageID: "a"}})
	if err != nil || n != 2 {
		t.Fatalf("SendBatch = %d, %v; want 2, nil", n, err)
	}
	n, err = q.SendBatch(ctx, []sbqueue.Message{{MessageID: "c"}, {MessageID: "d", TimeToLive: -time.Second}})
	if err == nil || n != 0 {
		t.Fatalf("SendBatch with an invalid message = %d, %v; want 0 and an error", n, err)
	}
	if got := len(q.Peek(10)); got != 2 {
		t.Errorf("queue holds %d messages, want 2 (a failed batch enqueues nothing)", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := q.Send(cancelled, sbqueue.Message{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Send with a cancelled context: err = %v", err)
	}
}

func TestPeekAndSnapshot(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	for _, id := range []string{"a", "b", "c"} {
		send(t, q, sbqueue.Message{MessageID: id})
	}
	locked := receiveOne(t, q) // "a"
	p := q.Peek(10)
	if len(p) != 3 || p[0].MessageID != "a" || p[1].MessageID != "b" {
		t.Fatalf("Peek = %+v", p)
	}
	if p[0].LockToken != ([16]byte{}) || !p[0].LockedUntil.Equal(locked.LockedUntil) || p[0].DeliveryCount != 1 {
		t.Errorf("peeked locked message = %+v", p[0])
	}
	if got := len(q.Peek(2)); got != 2 {
		t.Errorf("Peek(2) returned %d", got)
	}
	if got := q.Peek(0); got != nil {
		t.Errorf("Peek(0) = %v", got)
	}
	s := q.Snapshot()
	if len(s.Active) != 2 || len(s.Locked) != 1 || s.Locked[0].LockToken != locked.LockToken || s.Sent != 3 || s.Delivered != 1 {
		t.Errorf("Snapshot = %+v", s)
	}
}

func TestReceiveBlocksUntilSend(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	got := make(chan []sbqueue.ReceivedMessage)
	go func() {
		msgs, err := q.Receive(context.Background(), 5)
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	waitBlocked(q, 1)
	send(t, q, sbqueue.Message{MessageID: "m"})
	if msgs := <-got; len(msgs) != 1 || msgs[0].MessageID != "m" {
		t.Errorf("Receive = %+v", msgs)
	}
}

func TestReceiveWakesWhenVirtualTimeExpiresALock(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{})
	send(t, q, sbqueue.Message{MessageID: "m"})
	receiveOne(t, q)

	got := make(chan []sbqueue.ReceivedMessage)
	go func() {
		msgs, err := q.Receive(context.Background(), 5)
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	waitBlocked(q, 1)
	clock.Advance(lockDuration - time.Nanosecond)
	if s := q.Snapshot(); s.BlockedReceivers != 1 || s.Delivered != 1 {
		t.Fatalf("Receive returned before the lock expired: %+v", s)
	}
	clock.Advance(time.Nanosecond)
	if msgs := <-got; len(msgs) != 1 || msgs[0].DeliveryCount != 2 {
		t.Errorf("Receive = %+v, want the redelivery", msgs)
	}
}

func TestDeadLetterReceiveWakesOnMaxDeliveryCountByLockExpiry(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{MaxDeliveryCount: 1})
	send(t, q, sbqueue.Message{MessageID: "m"})
	receiveOne(t, q)

	got := make(chan []sbqueue.ReceivedMessage)
	go func() {
		msgs, err := q.DeadLetterQueue().Receive(context.Background(), 1)
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	waitBlocked(q.DeadLetterQueue(), 1)
	clock.Advance(lockDuration)
	if msgs := <-got; len(msgs) != 1 || msgs[0].DeadLetterReason != "MaxDeliveryCountExceeded" {
		t.Errorf("DLQ Receive = %+v", msgs)
	}
}

func TestReceiveReturnsWhenContextEnds(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		msgs, err := q.Receive(ctx, 1)
		if msgs != nil {
			t.Errorf("Receive returned messages %v with an error", msgs)
		}
		done <- err
	}()
	waitBlocked(q, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Receive after cancel: err = %v, want context.Canceled", err)
	}

	// A context already done locks nothing.
	send(t, q, sbqueue.Message{MessageID: "m"})
	if _, err := q.Receive(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Receive with a done context: err = %v", err)
	}
	if s := q.Snapshot(); len(s.Active) != 1 {
		t.Errorf("Receive with a done context locked a message: %+v", s)
	}
	if _, err := q.Receive(context.Background(), 0); err == nil {
		t.Error("Receive(ctx, 0) succeeded")
	}
}

func TestConcurrentReceiversGetEachMessageOnce(t *testing.T) {
	const messages, receivers = 2000, 8
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu        sync.Mutex
		completed = make(map[string]int)
		wg        sync.WaitGroup
	)
	for range receivers {
		wg.Go(func() {
			for {
				msgs, err := q.Receive(ctx, 7)
				if err != nil {
					return // ctx cancelled: all done
				}
				for _, m := range msgs {
					if err := q.Complete(m.LockToken); err != nil {
						t.Errorf("Complete(%s): %v", m.MessageID, err)
					}
					mu.Lock()
					completed[m.MessageID]++
					if len(completed) == messages {
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
	waitBlocked(q, receivers) // so that sends must wake them
	for i := range messages {
		send(t, q, sbqueue.Message{MessageID: fmt.Sprint(i)})
	}
	wg.Wait()

	for i := range messages {
		if n := completed[fmt.Sprint(i)]; n != 1 {
			t.Errorf("message %d completed %d times", i, n)
		}
	}
	if s := q.Snapshot(); s.Delivered != messages || s.Completed != messages || len(s.Active)+len(s.Locked) != 0 {
		t.Errorf("counters = %+v", s.Counters)
	}
}

func TestDeadLetterReceiveWakesOnTTLExpiry(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{DeadLetteringOnMessageExpiration: true})
	send(t, q, sbqueue.Message{MessageID: "m", TimeToLive: time.Minute})

	got := make(chan []sbqueue.ReceivedMessage)
	go func() {
		msgs, err := q.DeadLetterQueue().Receive(context.Background(), 1)
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	waitBlocked(q.DeadLetterQueue(), 1)
	clock.Advance(time.Minute)
	if msgs := <-got; len(msgs) != 1 || msgs[0].DeadLetterReason != "TTLExpiredException" {
		t.Errorf("DLQ Receive = %+v", msgs)
	}
}
