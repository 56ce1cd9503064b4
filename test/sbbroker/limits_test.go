package sbbroker_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestPeekRepliesLargerThanAFrame peeks replies that exceed the 64 KiB
// frame: Service Bus sends them as multi-frame transfers. The broker used
// to drop them, and PeekMessages hung until the caller's deadline.
func TestPeekRepliesLargerThanAFrame(t *testing.T) {
	tests := []struct {
		name  string
		count int
		size  int
	}{
		{"one 64 KiB message", 1, 64 * 1024},
		{"60 messages of 1 KiB", 60, 1024},
		{"one 200 KiB message", 1, 200 * 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, sbqueue.QueueOptions{})
			ctx := testContext(t)
			var msgs []*azservicebus.Message
			for i := range tt.count {
				msgs = append(msgs, &azservicebus.Message{MessageID: to(fmt.Sprint(i)), Body: bytes.Repeat([]byte{byte('a' + i%26)}, tt.size)})
			}
			f.send(t, ctx, msgs...)
			r := f.receiver(t, queueName)
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			ms, err := r.PeekMessages(pctx, tt.count, nil)
			if err != nil {
				t.Fatalf("PeekMessages: %v", err)
			}
			if len(ms) != tt.count {
				t.Fatalf("peeked %d messages, want %d", len(ms), tt.count)
			}
			for i, m := range ms {
				if len(m.Body) != tt.size || m.Body[0] != byte('a'+i%26) || m.MessageID != fmt.Sprint(i) {
					t.Errorf("message %d: id %s, %d bytes", i, m.MessageID, len(m.Body))
				}
			}
			// The session is still usable after the multi-frame reply.
			if ms, err := r.PeekMessages(pctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to(int64(1))}); err != nil || len(ms) != 1 {
				t.Errorf("second peek: %d messages, %v", len(ms), err)
			}
		})
	}
}

// TestMessageIDOver128CharactersIsRejected: Service Bus refuses a MessageId
// longer than 128 characters and the send fails; the broker used to accept
// it.
func TestMessageIDOver128CharactersIsRejected(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	// The project's retry options, so that the refused send fails in seconds.
	client, err := azservicebus.NewClientFromConnectionString(f.broker.ConnectionString(), cli.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	s, err := client.NewSender(queueName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: to(strings.Repeat("é", 128))}, nil); err != nil {
		t.Fatalf("a MessageId of 128 characters: %v", err)
	}
	err = s.SendMessage(ctx, &azservicebus.Message{MessageID: to(strings.Repeat("x", 129))}, nil)
	if err == nil || !strings.Contains(err.Error(), "128") {
		t.Fatalf("a MessageId of 129 characters: err = %v, want the send to fail naming the limit", err)
	}
	b, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ok", strings.Repeat("y", 200)} {
		if err := b.AddMessage(&azservicebus.Message{MessageID: to(id)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctx, b, nil); err == nil {
		t.Fatal("a batch with a 200-character MessageId was accepted")
	}
	if snap := f.queue.Snapshot(); len(snap.Active) != 1 {
		t.Errorf("%d messages enqueued, want only the 128-character one (a rejected batch enqueues nothing)", len(snap.Active))
	}
	if got := f.broker.Dropped()[queueName].Rejected; got < 2 {
		t.Errorf("Dropped().Rejected = %d, want at least 2 (the SDK may retry a rejected send)", got)
	}
}

// TestDuplicateDropsAreReported: duplicate detection drops a resend and
// tells the sender it was accepted, as Service Bus does; the broker logs each
// drop with its MessageId and the window, and counts it.
func TestDuplicateDropsAreReported(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	q, err := ns.CreateQueue(queueName, sbqueue.QueueOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	b := sbbroker.New(ns, sbbroker.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f := &fixture{broker: b, queue: q}
	if f.client, err = azservicebus.NewClientFromConnectionString(b.ConnectionString(), nil); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	defer f.client.Close(ctx)
	f.send(t, ctx,
		&azservicebus.Message{MessageID: to("ord-1")},
		&azservicebus.Message{MessageID: to("ord-1")},
		&azservicebus.Message{MessageID: to("ord-2")},
		&azservicebus.Message{MessageID: to("ord-1")},
	)
	if got := b.Dropped()[queueName]; got.Duplicates != 2 || got.Rejected != 0 {
		t.Errorf("Dropped() = %+v, want 2 duplicates", got)
	}
	if n := strings.Count(logs.String(), "duplicate dropped by duplicate detection"); n != 2 {
		t.Errorf("%d drops logged, want 2:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "queue=orders message_id=ord-1 window=1m30s") {
		t.Errorf("the drop log does not name the queue, the message id and the window:\n%s", logs.String())
	}
	if snap := q.Snapshot(); len(snap.Active) != 2 || snap.DuplicatesDropped != 2 {
		t.Errorf("queue: %d active, %d dropped", len(snap.Active), snap.DuplicatesDropped)
	}
}

// lockedBuffer is a bytes.Buffer safe for the broker's concurrent logging.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMessageIDIsMeasuredInUTF16Units: Service Bus measures a MessageId in
// UTF-16 code units (inferred: it is a .NET service), so 64 characters
// outside the Basic Multilingual Plane (128 units) are the most it takes,
// and 65 of them (130 units) fail a send and a scheduling alike. The broker
// counted characters and accepted both.
func TestMessageIDIsMeasuredInUTF16Units(t *testing.T) {
	f := newFixture(t, sbqueue.QueueOptions{})
	ctx := testContext(t)
	client, err := azservicebus.NewClientFromConnectionString(f.broker.ConnectionString(), cli.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	s, err := client.NewSender(queueName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	tests := []struct {
		name    string
		id      string
		wantErr bool
	}{
		{"64 emoji, 128 units", strings.Repeat("😀", 64), false},
		{"126 letters and an emoji, 128 units", strings.Repeat("a", 126) + "😀", false},
		{"65 emoji, 130 units", strings.Repeat("😀", 65), true},
		{"127 letters and an emoji, 128 characters, 129 units", strings.Repeat("a", 127) + "😀", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.SendMessage(ctx, &azservicebus.Message{MessageID: to(tt.id)}, nil)
			if (err != nil) != tt.wantErr {
				t.Errorf("send: err = %v, want error %v", err, tt.wantErr)
			}
			_, err = s.ScheduleMessages(ctx, []*azservicebus.Message{{MessageID: to(tt.id)}}, time.Now().Add(time.Hour), nil)
			if (err != nil) != tt.wantErr {
				t.Errorf("schedule: err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
