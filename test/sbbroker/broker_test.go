package sbbroker_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

func TestPutTokenErrors(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	tests := []struct {
		name     string
		connStr  string
		queue    string
		wantCode azservicebus.Code
	}{
		{"wrong key", sbbroker.ConnectionString(f.broker.Addr().String(), sbbroker.DefaultKeyName, "not-the-key"), queueName, azservicebus.CodeUnauthorizedAccess},
		{"wrong key name", sbbroker.ConnectionString(f.broker.Addr().String(), "someone", sbbroker.DefaultKey), queueName, azservicebus.CodeUnauthorizedAccess},
		{"unknown queue", f.broker.ConnectionString(), "missing", azservicebus.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			client, err := azservicebus.NewClientFromConnectionString(tt.connStr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close(ctx)
			s, err := client.NewSender(tt.queue, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
			if got := sbCode(err); got != tt.wantCode {
				t.Errorf("SendMessage error %v (code %q), want code %q", err, got, tt.wantCode)
			}
		})
	}
	if n := len(f.queue.Snapshot().Active); n != 0 {
		t.Errorf("%d messages enqueued by refused senders", n)
	}
}

func TestLargeMessagesSpanFrames(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 200*1024/16) // 200 KiB: four frames of 64 KiB
	f.send(t, ctx, &azservicebus.Message{Body: body})
	r := f.receiver(t, queueName)
	m := receiveOne(t, ctx, r)
	if !bytes.Equal(m.Body, body) {
		t.Fatalf("received %d bytes, want the %d sent", len(m.Body), len(body))
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}

	s, err := f.client.NewSender(queueName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	tooBig := make([]byte, 300*1024)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: tooBig}, nil); err == nil {
		t.Error("sending 300 KiB succeeded, want the 256 KiB limit enforced")
	}
}

func TestPeekMessages(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	f.send(t, ctx,
		&azservicebus.Message{MessageID: to("1")},
		&azservicebus.Message{MessageID: to("2")},
		&azservicebus.Message{MessageID: to("3")},
	)
	r := f.receiver(t, queueName)
	var got []int64
	for {
		ms, err := r.PeekMessages(ctx, 2, nil)
		if err != nil {
			t.Fatalf("PeekMessages: %v", err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			got = append(got, *m.SequenceNumber)
		}
	}
	if len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("peeked sequence numbers %v, want [1 2 3]", got)
	}
	if snap := f.queue.Snapshot(); len(snap.Active) != 3 {
		t.Errorf("peek locked messages: %d active", len(snap.Active))
	}
}

func TestReceiveAndDelete(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	f.send(t, ctx, &azservicebus.Message{Body: []byte("once")})
	r, err := f.client.NewReceiverForQueue(queueName, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	if m := receiveOne(t, ctx, r); string(m.Body) != "once" {
		t.Errorf("Body = %q", m.Body)
	}
	snap := f.queue.Snapshot()
	if len(snap.Active)+len(snap.Locked) != 0 || snap.Counters.Completed != 1 {
		t.Errorf("after receive-and-delete: %d active, %d locked, %d completed", len(snap.Active), len(snap.Locked), snap.Counters.Completed)
	}
}

// TestReleasedMessagesKeepDeliveryCount covers the SDK's background
// releaser: a message that reaches the receiver between ReceiveMessages
// calls is released, which must not count as a delivery.
func TestReleasedMessagesKeepDeliveryCount(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	r := f.receiver(t, queueName)
	f.send(t, ctx, &azservicebus.Message{MessageID: to("first")})
	ms, err := r.ReceiveMessages(ctx, 10, nil) // leaves credit on the link
	if err != nil || len(ms) != 1 {
		t.Fatalf("ReceiveMessages = %d messages, %v", len(ms), err)
	}
	f.send(t, ctx, &azservicebus.Message{MessageID: to("second")})
	for f.queue.Snapshot().Counters.Released == 0 {
		if ctx.Err() != nil {
			t.Fatal("the releaser never released the second message")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		m := receiveOne(t, ctx, r)
		if m.MessageID == "second" {
			if m.DeliveryCount != 1 {
				t.Errorf("DeliveryCount after releases = %d, want 1", m.DeliveryCount)
			}
			break
		}
	}
}

func TestDispositionFaults(t *testing.T) {
	tests := []struct {
		name          string
		fault         func(b *sbbroker.Broker)
		settleTimeout time.Duration
		wantErr       error
		wantCompleted int64
	}{
		{"delayed", func(b *sbbroker.Broker) { b.DelayDispositions(queueName, 50*time.Millisecond) }, 20 * time.Second, nil, 1},
		{"lost (entity names are case-insensitive)", func(b *sbbroker.Broker) { b.LoseDispositions(strings.ToUpper(queueName), 1) }, 300 * time.Millisecond, context.DeadlineExceeded, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, sbqueue.QueueOptions{})
			ctx := testContext(t)
			f.send(t, ctx, &azservicebus.Message{Body: []byte("x")})
			r := f.receiver(t, queueName)
			m := receiveOne(t, ctx, r)
			tt.fault(f.broker)
			settleCtx, cancel := context.WithTimeout(ctx, tt.settleTimeout)
			defer cancel()
			if err := r.CompleteMessage(settleCtx, m, nil); !errors.Is(err, tt.wantErr) {
				t.Errorf("CompleteMessage = %v, want %v", err, tt.wantErr)
			}
			if got := f.queue.Snapshot().Counters.Completed; got != tt.wantCompleted {
				t.Errorf("completed = %d, want %d", got, tt.wantCompleted)
			}
		})
	}
}

func TestFaultControlsUnknownEntity(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	if err := f.broker.ExpireLocks("missing"); !errors.Is(err, sbbroker.ErrUnknownEntity) {
		t.Errorf("ExpireLocks(missing) = %v, want ErrUnknownEntity", err)
	}
	if n := f.broker.DetachReceivers("missing"); n != 0 {
		t.Errorf("DetachReceivers(missing) = %d, want 0", n)
	}
}

func TestScheduledMessagesRefused(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	s, err := f.client.NewSender(queueName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	at := time.Now().Add(time.Hour)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("later"), ScheduledEnqueueTime: &at}, nil); err == nil {
		t.Error("a scheduled message was accepted; the broker cannot hold it until its time")
	}
	if n := len(f.queue.Snapshot().Active); n != 0 {
		t.Errorf("%d messages enqueued", n)
	}
}
