package sbqueue_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestSchedule: a scheduled message is not available before its time,
// then is enqueued with a new sequence number and EnqueuedTime at its
// scheduled time; duplicate detection applies at scheduling; a cancelled
// one never arrives; a dead-letter queue refuses scheduling.
func TestSchedule(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{RequiresDuplicateDetection: true})
	ctx := context.Background()
	at := t0.Add(time.Minute)
	seqs, err := q.Schedule(ctx, []sbqueue.Message{{MessageID: "a~r1"}, {MessageID: "b~r1"}}, at)
	if err != nil || len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Fatalf("Schedule = %v, %v; want sequence numbers 1 and 2", seqs, err)
	}
	// Duplicate detection at scheduling time: a second scheduling of the
	// same id, and a send of it, are accepted and dropped.
	if dup, err := q.Schedule(ctx, []sbqueue.Message{{MessageID: "a~r1"}}, at); err != nil || len(dup) != 1 {
		t.Fatalf("Schedule of a duplicate = %v, %v; want accepted", dup, err)
	}
	if ok, err := q.Send(ctx, sbqueue.Message{MessageID: "b~r1"}); ok || err != nil {
		t.Fatalf("Send of a scheduled id = %v, %v; want dropped as a duplicate", ok, err)
	}
	if n, err := q.Schedule(ctx, []sbqueue.Message{{MessageID: "c~r1"}}, at); err != nil {
		t.Fatal(err)
	} else if err := q.CancelScheduled(n); err != nil {
		t.Fatalf("CancelScheduled: %v", err)
	} else if err := q.CancelScheduled(n); !errors.Is(err, sbqueue.ErrNotScheduled) {
		t.Fatalf("CancelScheduled twice = %v, want ErrNotScheduled", err)
	}

	s := q.Snapshot()
	if len(s.Scheduled) != 2 || len(s.Active) != 0 || s.Scheduled[0].ScheduledEnqueueTime != at || s.Scheduled[0].SequenceNumber != 1 {
		t.Fatalf("before the time: %d scheduled (%+v), %d active; want 2 scheduled for %v, none active", len(s.Scheduled), s.Scheduled, len(s.Active), at)
	}
	if got := q.TryReceive(10); len(got) != 0 {
		t.Fatalf("received %d messages before their scheduled time", len(got))
	}
	if s.ScheduledAccepted != 3 || s.ScheduledCancelled != 1 || s.DuplicatesDropped != 2 || s.Sent != 0 {
		t.Errorf("counters %+v, want 3 scheduled (one cancelled), 2 duplicates dropped, none sent yet", s.Counters)
	}

	clock.Advance(time.Minute - time.Nanosecond)
	if got := q.TryReceive(10); len(got) != 0 {
		t.Fatalf("received %d messages a nanosecond before their time", len(got))
	}
	clock.Advance(time.Nanosecond)
	got := q.TryReceive(10)
	if len(got) != 2 || got[0].MessageID != "a~r1" || got[1].MessageID != "b~r1" {
		t.Fatalf("at the scheduled time: received %+v, want a~r1 and b~r1", got)
	}
	for _, m := range got {
		if m.SequenceNumber <= 4 || !m.EnqueuedTime.Equal(at) || !m.ScheduledEnqueueTime.Equal(at) || m.DeliveryCount != 1 {
			t.Errorf("enqueued %s: sequence %d, enqueued %v, scheduled %v, delivery %d; want a new sequence number, enqueued at %v, first delivery",
				m.MessageID, m.SequenceNumber, m.EnqueuedTime, m.ScheduledEnqueueTime, m.DeliveryCount, at)
		}
	}
	if s := q.Snapshot(); len(s.Scheduled) != 0 || s.Sent != 2 {
		t.Errorf("after the time: %d scheduled, %d sent; want none scheduled, 2 sent", len(s.Scheduled), s.Sent)
	}
	// Scheduling took numbers: a send gets the next one, which
	// SendSequenced reports.
	if seq, err := q.SendSequenced(ctx, sbqueue.Message{MessageID: "d"}); err != nil || seq != got[1].SequenceNumber+1 {
		t.Errorf("SendSequenced = %d, %v; want %d", seq, err, got[1].SequenceNumber+1)
	}
	if seq, err := q.SendSequenced(ctx, sbqueue.Message{MessageID: "d"}); err != nil || seq != 0 {
		t.Errorf("SendSequenced of a duplicate = %d, %v; want 0", seq, err)
	}
	if _, err := q.DeadLetterQueue().Schedule(ctx, []sbqueue.Message{{}}, at); !errors.Is(err, sbqueue.ErrDeadLetterQueue) {
		t.Errorf("Schedule on a dead-letter queue = %v, want ErrDeadLetterQueue", err)
	}
}

// TestScheduleWakesReceiver: a receiver blocked on an empty queue gets a
// scheduled message at its time, through the SDK-shaped Sender and
// Receiver, on virtual time.
func TestScheduleWakesReceiver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, err := sbqueue.NewNamespace(nil).CreateQueue("orders", sbqueue.QueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := q.NewReceiver()
		start := time.Now()
		got := make(chan []*azservicebus.ReceivedMessage, 1)
		go func() {
			msgs, _ := r.ReceiveMessages(context.Background(), 1, nil)
			got <- msgs
		}()
		synctest.Wait()
		id := "m~r1"
		if _, err := q.NewSender().ScheduleMessages(context.Background(), []*azservicebus.Message{{MessageID: &id}}, start.Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		msgs := <-got
		if len(msgs) != 1 || msgs[0].MessageID != id || time.Since(start) != time.Hour ||
			msgs[0].ScheduledEnqueueTime == nil || !msgs[0].ScheduledEnqueueTime.Equal(start.Add(time.Hour)) {
			t.Errorf("received %+v after %v, want %s after 1h with its scheduled enqueue time", msgs, time.Since(start), id)
		}
	})
}
