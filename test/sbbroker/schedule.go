package sbbroker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// The scheduling operations of $management.
const (
	opScheduleMessage = "com.microsoft:schedule-message"
	opCancelScheduled = "com.microsoft:cancel-scheduled-message"
)

// schedule handles com.microsoft:schedule-message for queue q, as the SDK
// (v1.11.0, internal.ScheduleMessages) encodes it: a map with "messages",
// a list of maps each holding "message-id" and "message", the encoded AMQP
// message, whose annotation x-opt-scheduled-enqueue-time is the time to
// enqueue it. Every message is checked before any is scheduled (a body
// that does not decode, a missing time, a MessageId over
// MaxMessageIDLength: 400). The reply holds "sequence-numbers", one per
// message, in order. Duplicate detection applies at scheduling time, as in
// Service Bus: a duplicate is accepted, gets a sequence number, and is
// dropped, logged and counted like a dropped send (see Broker.Dropped).
// A returned sequence number names the message while it waits (cancel
// takes it); at its enqueue time the message is appended to the queue with
// a new sequence number, as Service Bus documents ("Message sequencing and
// timestamps": the scheduled message's number is valid only while it is
// scheduled), so a receiver sees another number than the one returned.
func (b *Broker) schedule(q *sbqueue.Queue, body map[string]any) response {
	list, ok := body["messages"].([]any)
	if !ok || len(list) == 0 {
		return statusf(400, "schedule-message needs messages, a non-empty list")
	}
	type scheduled struct {
		m  sbqueue.Message
		at time.Time
	}
	all := make([]scheduled, 0, len(list))
	for i, item := range list {
		m, at, err := scheduledMessage(item)
		if err != nil {
			return statusf(400, "message %d: %v", i, err)
		}
		if n := messageIDLength(m.MessageID); n > MaxMessageIDLength {
			return statusf(400, "message %d: the MessageId is %d UTF-16 code units long; the maximum is %d", i, n, MaxMessageIDLength)
		}
		all = append(all, scheduled{m, at})
	}
	seqs := make([]int64, 0, len(all))
	for _, s := range all {
		got, dropped, window, err := q.ScheduleReport(context.Background(), []sbqueue.Message{s.m}, s.at)
		if err != nil {
			return statusf(400, "%v", err)
		}
		if len(dropped) > 0 {
			b.dropped("queue", q.Name(), s.m.MessageID, window)
		}
		seqs = append(seqs, got...)
	}
	return response{status: 200, description: "OK", body: map[string]any{"sequence-numbers": seqs}}
}

// scheduledMessage decodes one entry of a schedule-message request.
func scheduledMessage(item any) (sbqueue.Message, time.Time, error) {
	var enc []byte
	switch e := item.(type) {
	case map[string]any:
		enc, _ = e["message"].([]byte)
	case map[any]any:
		enc, _ = e["message"].([]byte)
	}
	if enc == nil {
		return sbqueue.Message{}, time.Time{}, errors.New("no encoded message")
	}
	var am amqp.Message
	if err := am.UnmarshalBinary(enc); err != nil {
		return sbqueue.Message{}, time.Time{}, err
	}
	at, ok := am.Annotations[annotScheduledTime].(time.Time)
	if !ok {
		return sbqueue.Message{}, time.Time{}, fmt.Errorf("no %s annotation", annotScheduledTime)
	}
	delete(am.Annotations, annotScheduledTime)
	m, err := fromAMQP(&am)
	return m, at, err
}

// cancelScheduled handles com.microsoft:cancel-scheduled-message for queue
// q: "sequence-numbers", an array of long, the numbers schedule-message
// returned. A number that names no waiting message (enqueued already,
// cancelled, never scheduled) fails the request with 404 and cancels
// nothing; the status Service Bus gives then is not documented.
func cancelScheduled(q *sbqueue.Queue, body map[string]any) response {
	seqs, ok := body["sequence-numbers"].([]int64)
	if !ok {
		return statusf(400, "cancel-scheduled-message needs sequence-numbers, an array of long")
	}
	if err := q.CancelScheduled(seqs); err != nil {
		if errors.Is(err, sbqueue.ErrNotScheduled) {
			return statusf(404, "%v", err)
		}
		return statusf(400, "%v", err)
	}
	return response{status: 200, description: "OK"}
}
