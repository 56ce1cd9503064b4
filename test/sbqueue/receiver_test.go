package sbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

var _ worker.Receiver = (*sbqueue.Receiver)(nil)

func ptr[T any](v T) *T { return &v }

// receiveSDK receives exactly one message through r.
func receiveSDK(t *testing.T, r worker.Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	msgs, err := r.ReceiveMessages(context.Background(), 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ReceiveMessages = %d messages, %v; want 1", len(msgs), err)
	}
	return msgs[0]
}

func TestReceiverConvertsEveryField(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{})
	clock.Advance(time.Second)
	send(t, q, sbqueue.Message{
		MessageID: "order-1", Body: []byte(`{"orderId":"order-1"}`),
		ContentType: "application/json", CorrelationID: "corr", Subject: "order.placed",
		ReplyTo: "replies", ReplyToSessionID: "rs", To: "to", SessionID: "s", PartitionKey: "pk",
		ApplicationProperties: map[string]any{"tenant": "t1"},
		TimeToLive:            time.Hour,
	})
	var r worker.Receiver = q.NewReceiver()
	m := receiveSDK(t, r)

	enqueued := t0.Add(time.Second)
	checks := []struct {
		field     string
		got, want any
	}{
		{"MessageID", m.MessageID, "order-1"},
		{"Body", string(m.Body), `{"orderId":"order-1"}`},
		{"ContentType", *m.ContentType, "application/json"},
		{"CorrelationID", *m.CorrelationID, "corr"},
		{"Subject", *m.Subject, "order.placed"},
		{"ReplyTo", *m.ReplyTo, "replies"},
		{"ReplyToSessionID", *m.ReplyToSessionID, "rs"},
		{"To", *m.To, "to"},
		{"SessionID", *m.SessionID, "s"},
		{"PartitionKey", *m.PartitionKey, "pk"},
		{"ApplicationProperties", m.ApplicationProperties["tenant"], "t1"},
		{"DeliveryCount", m.DeliveryCount, uint32(1)},
		{"SequenceNumber", *m.SequenceNumber, int64(1)},
		{"EnqueuedTime", *m.EnqueuedTime, enqueued},
		{"LockedUntil", *m.LockedUntil, enqueued.Add(lockDuration)},
		{"ExpiresAt", *m.ExpiresAt, enqueued.Add(time.Hour)},
		{"TimeToLive", *m.TimeToLive, time.Hour},
		{"State", m.State, azservicebus.MessageStateActive},
		{"DeadLetterReason", m.DeadLetterReason, (*string)(nil)},
		{"DeadLetterSource", m.DeadLetterSource, (*string)(nil)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
	if m.LockToken == ([16]byte{}) || m.LockToken != q.Snapshot().Locked[0].LockToken {
		t.Errorf("LockToken = %x, want the queue's lock", m.LockToken)
	}
	if got := m.Message(); *got.MessageID != "order-1" || string(got.Body) != string(m.Body) {
		t.Errorf("Message() = %+v", got)
	}
}

func TestReceiverOmitsUnsetOptionalFields(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	send(t, q, sbqueue.Message{MessageID: "m"})
	m := receiveSDK(t, q.NewReceiver())
	if m.ContentType != nil || m.CorrelationID != nil || m.Subject != nil || m.ExpiresAt != nil || m.TimeToLive != nil || m.ApplicationProperties != nil {
		t.Errorf("unset fields are set: %+v", m)
	}
}

func TestReceiverSettlement(t *testing.T) {
	tests := []struct {
		name   string
		settle func(ctx context.Context, r worker.Receiver, m *azservicebus.ReceivedMessage) error
		// check inspects the queue after a successful settlement.
		check func(t *testing.T, q *sbqueue.Queue)
	}{
		{
			name: "complete",
			settle: func(ctx context.Context, r worker.Receiver, m *azservicebus.ReceivedMessage) error {
				return r.CompleteMessage(ctx, m, nil)
			},
			check: func(t *testing.T, q *sbqueue.Queue) {
				if s := q.Snapshot(); s.Completed != 1 || len(s.Active)+len(s.Locked) != 0 {
					t.Errorf("after complete: %+v", s)
				}
			},
		},
		{
			name: "abandon with properties",
			settle: func(ctx context.Context, r worker.Receiver, m *azservicebus.ReceivedMessage) error {
				return r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{"why": "busy"}})
			},
			check: func(t *testing.T, q *sbqueue.Queue) {
				m := receiveSDK(t, q.NewReceiver())
				if m.DeliveryCount != 2 || m.ApplicationProperties["why"] != "busy" {
					t.Errorf("after abandon: count %d, properties %v", m.DeliveryCount, m.ApplicationProperties)
				}
			},
		},
		{
			name: "abandon without options",
			settle: func(ctx context.Context, r worker.Receiver, m *azservicebus.ReceivedMessage) error {
				return r.AbandonMessage(ctx, m, nil)
			},
			check: func(t *testing.T, q *sbqueue.Queue) {
				if m := receiveSDK(t, q.NewReceiver()); m.DeliveryCount != 2 {
					t.Errorf("after abandon: count %d", m.DeliveryCount)
				}
			},
		},
		{
			name: "dead-letter with options",
			settle: func(ctx context.Context, r worker.Receiver, m *azservicebus.ReceivedMessage) error {
				return r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
					Reason: ptr("OrderIdReused"), ErrorDescription: ptr("stored abc, got def"),
					PropertiesToModify: map[string]any{"storedHash": "abc"},
				})
			},
			check: func(t *testing.T, q *sbqueue.Queue) {
				d := receiveSDK(t, q.DeadLetterQueue().NewReceiver())
				if d.DeadLetterReason == nil || *d.DeadLetterReason != "OrderIdReused" ||
					d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription != "stored abc, got def" ||
					d.ApplicationProperties["storedHash"] != "abc" || d.DeadLetterSource != nil {
					t.Errorf("DLQ message = %+v", d)
				}
			},
		},
		{
			name: "dead-letter without options",
			settle: func(ctx context.Context, r worker.Receiver, m *azservicebus.ReceivedMessage) error {
				return r.DeadLetterMessage(ctx, m, nil)
			},
			check: func(t *testing.T, q *sbqueue.Queue) {
				d := receiveSDK(t, q.DeadLetterQueue().NewReceiver())
				if d.DeadLetterReason == nil || *d.DeadLetterReason != "" || d.DeadLetterErrorDescription == nil {
					t.Errorf("DLQ message = %+v, want empty reason and description", d)
				}
			},
		},
		{
			name: "renew",
			settle: func(ctx context.Context, r worker.Receiver, m *azservicebus.ReceivedMessage) error {
				return r.RenewMessageLock(ctx, m, nil)
			},
			check: func(t *testing.T, q *sbqueue.Queue) {
				if s := q.Snapshot(); s.Renewed != 1 || len(s.Locked) != 1 {
					t.Errorf("after renew: %+v", s)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, clock := newTestQueue(t, sbqueue.QueueOptions{})
			send(t, q, sbqueue.Message{MessageID: "m"})
			var r worker.Receiver = q.NewReceiver()
			m := receiveSDK(t, r)
			clock.Advance(10 * time.Second)
			if err := tt.settle(context.Background(), r, m); err != nil {
				t.Fatalf("settlement: %v", err)
			}
			tt.check(t, q)

			// Settling again, with the now stale token, reports a lost lock
			// the way the SDK does.
			err := tt.settle(context.Background(), r, m)
			if tt.name == "renew" {
				clock.Advance(lockDuration)
				err = tt.settle(context.Background(), r, m)
			}
			var sbErr *azservicebus.Error
			if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
				t.Errorf("stale settlement: err = %v, want an *azservicebus.Error with CodeLockLost", err)
			}
			if !errors.Is(err, sbqueue.ErrLockLost) {
				t.Errorf("stale settlement: err = %v does not match ErrLockLost", err)
			}
		})
	}
}

func TestReceiverRenewUpdatesLockedUntil(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{})
	send(t, q, sbqueue.Message{MessageID: "m"})
	r := q.NewReceiver()
	m := receiveSDK(t, r)
	clock.Advance(45 * time.Second)
	if err := r.RenewMessageLock(context.Background(), m, nil); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(45*time.Second + lockDuration); !m.LockedUntil.Equal(want) {
		t.Errorf("LockedUntil = %v, want %v", *m.LockedUntil, want)
	}
	clock.Advance(30 * time.Second) // past the first lock
	if err := r.CompleteMessage(context.Background(), m, nil); err != nil {
		t.Errorf("Complete within the renewed lock: %v", err)
	}
}

func TestReceiverReceiveMessages(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	r := q.NewReceiver()
	for _, n := range []int{0, -1, 5001} {
		if _, err := r.ReceiveMessages(context.Background(), n, nil); err == nil {
			t.Errorf("ReceiveMessages(ctx, %d) succeeded", n)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if msgs != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ReceiveMessages on an empty queue past its deadline = %v, %v; want nil, context.DeadlineExceeded", msgs, err)
	}

	for range 3 {
		send(t, q, sbqueue.Message{})
	}
	msgs, err = r.ReceiveMessages(context.Background(), 2, &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: time.Hour})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("ReceiveMessages(2) = %d, %v", len(msgs), err)
	}
	if msgs, err = r.ReceiveMessages(context.Background(), 5, nil); err != nil || len(msgs) != 1 {
		t.Errorf("ReceiveMessages(5) = %d, %v; want the 1 left", len(msgs), err)
	}
}

func TestSenderSendMessage(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{RequiresDuplicateDetection: true})
	s := q.NewSender()
	ctx := context.Background()
	m := &azservicebus.Message{
		MessageID: ptr("order-1"), Body: []byte("b"), ContentType: ptr("application/json"),
		CorrelationID: ptr("c"), Subject: ptr("s"), ReplyTo: ptr("r"), ReplyToSessionID: ptr("rs"),
		To: ptr("to"), SessionID: ptr("sid"), PartitionKey: ptr("pk"), TimeToLive: ptr(time.Minute),
		ApplicationProperties: map[string]any{"k": "v"},
	}
	for range 2 { // the second is an in-window duplicate: success, dropped
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
	}
	got := q.Peek(10)
	want := sbqueue.Message{
		MessageID: "order-1", Body: []byte("b"), ContentType: "application/json", CorrelationID: "c",
		Subject: "s", ReplyTo: "r", ReplyToSessionID: "rs", To: "to", SessionID: "sid", PartitionKey: "pk",
		TimeToLive: time.Minute,
	}
	if len(got) != 1 {
		t.Fatalf("queue holds %d messages, want 1", len(got))
	}
	g := got[0].Message
	if string(g.Body) != "b" || g.ApplicationProperties["k"] != "v" {
		t.Errorf("sent message = %+v", g)
	}
	g.Body, g.ApplicationProperties, want.Body = nil, nil, nil
	if g.MessageID != want.MessageID || g.ContentType != want.ContentType || g.CorrelationID != want.CorrelationID ||
		g.Subject != want.Subject || g.ReplyTo != want.ReplyTo || g.ReplyToSessionID != want.ReplyToSessionID ||
		g.To != want.To || g.SessionID != want.SessionID || g.PartitionKey != want.PartitionKey || g.TimeToLive != want.TimeToLive {
		t.Errorf("sent message = %+v, want %+v", g, want)
	}
	// A message with a scheduled enqueue time is scheduled (see
	// TestSchedule), on a queue; a topic's sender refuses it.
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: ptr("later"), ScheduledEnqueueTime: ptr(t0.Add(time.Hour))}, nil); err != nil {
		t.Errorf("SendMessage of a scheduled message: %v", err)
	}
	if sn := q.Snapshot(); len(sn.Scheduled) != 1 || sn.Scheduled[0].MessageID != "later" || len(sn.Active) != 1 {
		t.Errorf("after sending a scheduled message: %d scheduled, %d active; want it scheduled, not active", len(sn.Scheduled), len(sn.Active))
	}
	topic, err := sbqueue.NewNamespace(nil).CreateTopic("events", sbqueue.TopicOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := topic.NewSender().SendMessage(ctx, &azservicebus.Message{ScheduledEnqueueTime: ptr(t0)}, nil); err == nil {
		t.Error("SendMessage of a scheduled message to a topic succeeded")
	}
}
