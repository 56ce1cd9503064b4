package sbbroker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// fixture is a broker on a loopback port with one queue, and an SDK client
// connected to it.
type fixture struct {
	broker *sbbroker.Broker
	queue  *sbqueue.Queue
	client *azservicebus.Client
}

const queueName = "orders"

func newFixture(t testing.TB, o sbqueue.QueueOptions) *fixture {
	t.Helper()
	// Short locks let a test watch one lapse in a fraction of a second; the
	// broker forwards the queue's lock duration, whatever it is.
	ns := sbqueue.NewNamespaceWith(sbqueue.RealClock(), sbqueue.NamespaceOptions{AllowUnrealisticTimings: true})
	q, err := ns.CreateQueue(queueName, o)
	if err != nil {
		t.Fatal(err)
	}
	b := sbbroker.New(ns, sbbroker.Options{Logger: testLogger(t)})
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	client, err := azservicebus.NewClientFromConnectionString(b.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client.Close(ctx)
		b.Close()
	})
	return &fixture{broker: b, queue: q, client: client}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (f *fixture) send(t *testing.T, ctx context.Context, msgs ...*azservicebus.Message) {
	t.Helper()
	s, err := f.client.NewSender(queueName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for _, m := range msgs {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
	}
}

func (f *fixture) receiver(t *testing.T, entity string) *azservicebus.Receiver {
	t.Helper()
	var (
		r   *azservicebus.Receiver
		err error
	)
	if entity == queueName {
		r, err = f.client.NewReceiverForQueue(queueName, nil)
	} else {
		r, err = f.client.NewReceiverForQueue(queueName, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// receiveOne receives exactly one message.
func receiveOne(t *testing.T, ctx context.Context, r *azservicebus.Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	for {
		ms, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil {
			t.Fatalf("ReceiveMessages: %v", err)
		}
		if len(ms) == 1 {
			return ms[0]
		}
	}
}

func TestSendReceiveComplete(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	f.send(t, ctx, &azservicebus.Message{
		MessageID:             to("m-1"),
		Body:                  []byte("hello"),
		ApplicationProperties: map[string]any{"kind": "order", "n": int64(7)},
		ContentType:           to("text/plain"),
		CorrelationID:         to("c-1"),
		Subject:               to("subj"),
		TimeToLive:            to(time.Hour),
	})
	r := f.receiver(t, queueName)
	m := receiveOne(t, ctx, r)
	if got := string(m.Body); got != "hello" {
		t.Errorf("Body = %q, want hello", got)
	}
	if m.MessageID != "m-1" || m.DeliveryCount != 1 || *m.SequenceNumber != 1 {
		t.Errorf("MessageID, DeliveryCount, SequenceNumber = %q, %d, %d; want m-1, 1, 1", m.MessageID, m.DeliveryCount, *m.SequenceNumber)
	}
	if m.ApplicationProperties["kind"] != "order" || m.ApplicationProperties["n"] != int64(7) {
		t.Errorf("ApplicationProperties = %v", m.ApplicationProperties)
	}
	if *m.ContentType != "text/plain" || *m.CorrelationID != "c-1" || *m.Subject != "subj" {
		t.Errorf("ContentType, CorrelationID, Subject = %q, %q, %q", *m.ContentType, *m.CorrelationID, *m.Subject)
	}
	if m.LockedUntil == nil || m.EnqueuedTime == nil || !m.LockedUntil.After(*m.EnqueuedTime) {
		t.Errorf("LockedUntil %v, EnqueuedTime %v", m.LockedUntil, m.EnqueuedTime)
	}
	if m.TimeToLive == nil || *m.TimeToLive != time.Hour || m.ExpiresAt == nil || !m.ExpiresAt.Equal(m.EnqueuedTime.Add(time.Hour)) {
		t.Errorf("TimeToLive %v, ExpiresAt %v; want 1h after EnqueuedTime %v", m.TimeToLive, m.ExpiresAt, m.EnqueuedTime)
	}
	snap := f.queue.Snapshot()
	if len(snap.Locked) != 1 || snap.Locked[0].LockToken != [16]byte(m.LockToken) {
		t.Fatalf("locked = %+v, want the received lock %x", snap.Locked, m.LockToken)
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	snap = f.queue.Snapshot()
	if len(snap.Active)+len(snap.Locked) != 0 || snap.Counters.Completed != 1 {
		t.Errorf("after complete: %d active, %d locked, %d completed", len(snap.Active), len(snap.Locked), snap.Counters.Completed)
	}
}

func to[T any](v T) *T { return &v }

// sbCode returns the azservicebus error code of err, or "".
func sbCode(err error) azservicebus.Code {
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) {
		return sbErr.Code
	}
	return ""
}

func TestAbandonIncrementsDeliveryCount(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	f.send(t, ctx, &azservicebus.Message{Body: []byte("x")})
	r := f.receiver(t, queueName)
	first := receiveOne(t, ctx, r)
	if err := r.AbandonMessage(ctx, first, &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"attempt": "first"},
	}); err != nil {
		t.Fatalf("AbandonMessage: %v", err)
	}
	second := receiveOne(t, ctx, r)
	if first.DeliveryCount != 1 || second.DeliveryCount != 2 {
		t.Errorf("DeliveryCount = %d then %d, want 1 then 2", first.DeliveryCount, second.DeliveryCount)
	}
	if second.MessageID != first.MessageID || second.LockToken == first.LockToken {
		t.Errorf("redelivery: MessageID %q→%q, lock %x→%x; want same id, new lock", first.MessageID, second.MessageID, first.LockToken, second.LockToken)
	}
	if got := second.ApplicationProperties["attempt"]; got != "first" {
		t.Errorf("property modified on abandon = %v, want first", got)
	}
	if err := r.CompleteMessage(ctx, second, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
}

func TestDeadLetterThenReceiveFromSubQueue(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	f.send(t, ctx, &azservicebus.Message{MessageID: to("poison"), Body: []byte("bad")})
	r := f.receiver(t, queueName)
	m := receiveOne(t, ctx, r)
	if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
		Reason:             to("ValidationFailed"),
		ErrorDescription:   to("quantity must be positive"),
		PropertiesToModify: map[string]any{"stage": "validate"},
	}); err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}
	dlq := f.receiver(t, queueName+sbqueue.DeadLetterQueueSuffix)
	d := receiveOne(t, ctx, dlq)
	if d.MessageID != "poison" || string(d.Body) != "bad" {
		t.Errorf("dead letter = %q %q, want poison bad", d.MessageID, d.Body)
	}
	if d.DeadLetterReason == nil || *d.DeadLetterReason != "ValidationFailed" {
		t.Errorf("DeadLetterReason = %v, want ValidationFailed", d.DeadLetterReason)
	}
	if d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription != "quantity must be positive" {
		t.Errorf("DeadLetterErrorDescription = %v", d.DeadLetterErrorDescription)
	}
	if got := d.ApplicationProperties["stage"]; got != "validate" {
		t.Errorf("stage property = %v, want validate", got)
	}
	if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatalf("completing the dead letter: %v", err)
	}
	snap := f.queue.Snapshot()
	if len(snap.Active)+len(snap.Locked)+len(snap.DeadLetters) != 0 {
		t.Errorf("queue not empty: %+v", snap)
	}
}

func TestLockExpiryRedelivers(t *testing.T) {
	tests := []struct {
		name   string
		lock   time.Duration
		expire func(f *fixture) error
	}{
		{"fault control", time.Minute, func(f *fixture) error { return f.broker.ExpireLocks(queueName) }},
		{"lock duration", 300 * time.Millisecond, func(*fixture) error { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, sbqueue.QueueOptions{LockDuration: tt.lock})
			ctx := testContext(t)
			f.send(t, ctx, &azservicebus.Message{Body: []byte("x")})
			r := f.receiver(t, queueName)
			first := receiveOne(t, ctx, r)
			if err := tt.expire(f); err != nil {
				t.Fatal(err)
			}
			second := receiveOne(t, ctx, r)
			if second.DeliveryCount != first.DeliveryCount+1 || second.MessageID != first.MessageID {
				t.Errorf("redelivery %q count %d after %q count %d", second.MessageID, second.DeliveryCount, first.MessageID, first.DeliveryCount)
			}
			if err := r.CompleteMessage(ctx, first, nil); sbCode(err) != azservicebus.CodeLockLost {
				t.Errorf("completing the expired delivery: %v, want CodeLockLost", err)
			}
			if err := r.CompleteMessage(ctx, second, nil); err != nil {
				t.Errorf("completing the redelivery: %v", err)
			}
		})
	}
}

func TestMaxDeliveryCountDeadLetters(t *testing.T) {
	const maxDeliveries = 3
	f := newFixture(t, sbqueue.QueueOptions{MaxDeliveryCount: maxDeliveries})
	ctx := testContext(t)
	f.send(t, ctx, &azservicebus.Message{MessageID: to("retry-me"), Body: []byte("x")})
	r := f.receiver(t, queueName)
	for i := 1; i <= maxDeliveries; i++ {
		m := receiveOne(t, ctx, r)
		if m.DeliveryCount != uint32(i) {
			t.Fatalf("delivery %d has DeliveryCount %d", i, m.DeliveryCount)
		}
		if err := r.AbandonMessage(ctx, m, nil); err != nil {
			t.Fatalf("AbandonMessage: %v", err)
		}
	}
	d := receiveOne(t, ctx, f.receiver(t, queueName+sbqueue.DeadLetterQueueSuffix))
	if d.MessageID != "retry-me" || d.DeadLetterReason == nil || *d.DeadLetterReason != sbqueue.ReasonMaxDeliveryCountExceeded {
		t.Errorf("dead letter %q reason %v, want retry-me %s", d.MessageID, d.DeadLetterReason, sbqueue.ReasonMaxDeliveryCountExceeded)
	}
	if d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription == "" {
		t.Errorf("DeadLetterErrorDescription = %v, want a description", d.DeadLetterErrorDescription)
	}
}

func TestRenewLockExtendsLockedUntil(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{LockDuration: 10 * time.Second})
	ctx := testContext(t)
	f.send(t, ctx, &azservicebus.Message{Body: []byte("x")})
	r := f.receiver(t, queueName)
	m := receiveOne(t, ctx, r)
	before := *m.LockedUntil
	// Let the wall clock move past the millisecond resolution of AMQP
	// timestamps, so the renewed expiry is strictly later.
	for time.Now().Before(before.Add(-10*time.Second + 2*time.Millisecond)) {
		time.Sleep(time.Millisecond)
	}
	if err := r.RenewMessageLock(ctx, m, nil); err != nil {
		t.Fatalf("RenewMessageLock: %v", err)
	}
	if !m.LockedUntil.After(before) {
		t.Errorf("LockedUntil after renew = %v, want after %v", m.LockedUntil, before)
	}
	locked := f.queue.Snapshot().Locked
	if len(locked) != 1 || !locked[0].LockedUntil.Truncate(time.Millisecond).Equal(*m.LockedUntil) {
		t.Errorf("queue lock = %+v, want one until %v", locked, m.LockedUntil)
	}
	if err := f.broker.ExpireLocks(queueName); err != nil {
		t.Fatal(err)
	}
	if err := r.RenewMessageLock(ctx, m, nil); sbCode(err) != azservicebus.CodeLockLost {
		t.Errorf("renewing an expired lock: %v, want CodeLockLost", err)
	}
}

func TestDuplicateDetectionDropsInWindowResend(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: time.Hour})
	ctx := testContext(t)
	f.send(t, ctx,
		&azservicebus.Message{MessageID: to("order-1"), Body: []byte("first")},
		&azservicebus.Message{MessageID: to("order-1"), Body: []byte("resend with other content")},
		&azservicebus.Message{MessageID: to("order-2"), Body: []byte("second")},
	)
	snap := f.queue.Snapshot()
	if len(snap.Active) != 2 || snap.Counters.DuplicatesDropped != 1 {
		t.Fatalf("active %d, duplicates dropped %d; want 2, 1", len(snap.Active), snap.Counters.DuplicatesDropped)
	}
	if string(snap.Active[0].Body) != "first" || snap.Active[1].MessageID != "order-2" {
		t.Errorf("active = %q %q, want the first send and order-2", snap.Active[0].Body, snap.Active[1].MessageID)
	}
}

func TestSendBatch(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{RequiresDuplicateDetection: true})
	ctx := testContext(t)
	s, err := f.client.NewSender(queueName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "a", "c"} {
		if err := batch.AddMessage(&azservicebus.Message{MessageID: to(id), Body: []byte("body-" + id)}, nil); err != nil {
			t.Fatalf("AddMessage: %v", err)
		}
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatalf("SendMessageBatch: %v", err)
	}
	snap := f.queue.Snapshot()
	var got []string
	for _, m := range snap.Active {
		got = append(got, m.MessageID+"="+string(m.Body))
	}
	if want := "[a=body-a b=body-b c=body-c]"; fmt.Sprint(got) != want {
		t.Errorf("queue = %v, want %s", got, want)
	}
}

func TestSettlementAfterDetachedLink(t *testing.T) {
	tests := []struct {
		name       string
		expireLock bool
		wantCode   azservicebus.Code
	}{
		{"lock still held: settled through $management", false, ""},
		{"lock expired: lock lost", true, azservicebus.CodeLockLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, sbqueue.QueueOptions{})
			ctx := testContext(t)
			f.send(t, ctx, &azservicebus.Message{Body: []byte("x")})
			r := f.receiver(t, queueName)
			m := receiveOne(t, ctx, r)
			if n := f.broker.DetachReceivers(queueName); n != 1 {
				t.Fatalf("DetachReceivers = %d, want 1", n)
			}
			if tt.expireLock {
				if err := f.broker.ExpireLocks(queueName); err != nil {
					t.Fatal(err)
				}
			}
			err := r.CompleteMessage(ctx, m, nil)
			if sbCode(err) != tt.wantCode || (tt.wantCode == "" && err != nil) {
				t.Fatalf("CompleteMessage after detach: %v, want code %q", err, tt.wantCode)
			}
			snap := f.queue.Snapshot()
			if tt.wantCode == "" && snap.Counters.Completed != 1 {
				t.Errorf("completed = %d, want 1", snap.Counters.Completed)
			}
			if tt.wantCode != "" && len(snap.Active) != 1 {
				t.Errorf("active = %d, want the message back", len(snap.Active))
			}
		})
	}
}

// TestReceiveAfterDroppedConnection drops the connection while a message
// is locked. (Settling that message afterwards is not tested: the SDK
// retries a settlement that failed with a connection error on the dead
// link for about 50 s before it gives up, whatever the broker does.)
func TestReceiveAfterDroppedConnection(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	f.send(t, ctx, &azservicebus.Message{Body: []byte("x")})
	r := f.receiver(t, queueName)
	first := receiveOne(t, ctx, r)
	if n := f.broker.DropConnections(); n != 1 {
		t.Fatalf("DropConnections = %d, want 1", n)
	}
	if locked := f.queue.Snapshot().Locked; len(locked) != 1 {
		t.Fatalf("locked after the drop = %d, want 1: locks outlive connections", len(locked))
	}
	if err := f.broker.ExpireLocks(queueName); err != nil {
		t.Fatal(err)
	}
	again := receiveOne(t, ctx, r) // on a new connection
	if again.MessageID != first.MessageID || again.DeliveryCount != 2 {
		t.Errorf("redelivery %q count %d, want %q count 2", again.MessageID, again.DeliveryCount, first.MessageID)
	}
	if err := r.CompleteMessage(ctx, again, nil); err != nil {
		t.Fatalf("CompleteMessage on the new connection: %v", err)
	}
}

func TestReceiveMessagesHonoursCancellation(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	r := f.receiver(t, queueName)
	ctx, cancel := context.WithCancel(testContext(t))
	errc := make(chan error, 1)
	go func() {
		_, err := r.ReceiveMessages(ctx, 10, nil)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("ReceiveMessages after cancel: %v, want context.Canceled", err)
	}
	// The receiver still works afterwards.
	ctx = testContext(t)
	f.send(t, ctx, &azservicebus.Message{Body: []byte("after")})
	if m := receiveOne(t, ctx, r); string(m.Body) != "after" {
		t.Errorf("Body = %q", m.Body)
	}
}

// testLogger logs broker events through t.Log when -v is set.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// A received message reports its real expiry, as Service Bus does:
// EnqueuedTime + its effective time-to-live (its own, capped by the
// queue's default, or the default when it sets none), in the main queue
// and after it is dead-lettered (what `orderctl dlq show` prints). The
// AMQP header's ttl is a uint32 of milliseconds, so a time-to-live beyond
// 49.7 days is left out of it rather than wrapped around; the absolute
// expiry is in the properties whatever the time-to-live.
func TestExpiresAt(t *testing.T) {
	const long = 60 * 24 * time.Hour // over the header's 49.7 days
	tests := []struct {
		name        string
		queueTTL    time.Duration
		messageTTL  *time.Duration
		wantTTL     time.Duration // of the received message; 0: none
		wantExpires time.Duration // after EnqueuedTime, in the properties; 0: none
	}{
		{name: "the queue's default", queueTTL: 14 * 24 * time.Hour, wantTTL: 14 * 24 * time.Hour, wantExpires: 14 * 24 * time.Hour},
		{name: "the message's own", queueTTL: 14 * 24 * time.Hour, messageTTL: to(time.Hour), wantTTL: time.Hour, wantExpires: time.Hour},
		{name: "capped by the queue's default", queueTTL: time.Hour, messageTTL: to(2 * time.Hour), wantTTL: time.Hour, wantExpires: time.Hour},
		// (A message's own time-to-live cannot go beyond it: the SDK
		// sends it in the header too.)
		{name: "a default beyond the header's range", queueTTL: long, wantExpires: long},
		{name: "never expires"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, sbqueue.QueueOptions{DefaultMessageTimeToLive: tt.queueTTL})
			ctx := testContext(t)
			f.send(t, ctx, &azservicebus.Message{MessageID: to("m"), Body: []byte("x"), TimeToLive: tt.messageTTL})
			r := f.receiver(t, queueName)
			m := receiveOne(t, ctx, r)
			check := func(where string, m *azservicebus.ReceivedMessage) {
				t.Helper()
				enq := *m.EnqueuedTime
				if tt.wantTTL > 0 {
					if m.TimeToLive == nil || *m.TimeToLive != tt.wantTTL || m.ExpiresAt == nil || !m.ExpiresAt.Equal(enq.Add(tt.wantTTL)) {
						t.Errorf("%s: TimeToLive %v, ExpiresAt %v; want %v, EnqueuedTime %v + %v", where, deref(m.TimeToLive), deref(m.ExpiresAt), tt.wantTTL, enq, tt.wantTTL)
					}
				} else if m.TimeToLive != nil && *m.TimeToLive != 0 {
					t.Errorf("%s: TimeToLive %v, want none in the header", where, *m.TimeToLive)
				}
				p := m.RawAMQPMessage.Properties
				switch {
				case tt.wantExpires == 0 && p != nil && p.AbsoluteExpiryTime != nil:
					t.Errorf("%s: absolute-expiry-time %v on a message that never expires", where, *p.AbsoluteExpiryTime)
				case tt.wantExpires > 0 && (p == nil || p.AbsoluteExpiryTime == nil || !p.AbsoluteExpiryTime.Equal(enq.Add(tt.wantExpires))):
					t.Errorf("%s: absolute-expiry-time %v, want EnqueuedTime %v + %v", where, p, enq, tt.wantExpires)
				}
			}
			check("queue", m)
			if err := r.DeadLetterMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			check("dead-letter queue", receiveOne(t, ctx, f.receiver(t, queueName+"/$DeadLetterQueue")))
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
