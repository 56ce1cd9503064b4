package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// batch is the part of *azservicebus.MessageBatch the producer uses.
type batch interface {
	AddMessage(m *azservicebus.Message, o *azservicebus.AddMessageOptions) error
	NumMessages() int32
}

var _ batch = (*azservicebus.MessageBatch)(nil)

// batchSender makes and sends batches. sbSender adapts *azservicebus.Sender.
type batchSender interface {
	NewBatch(ctx context.Context) (batch, error)
	SendBatch(ctx context.Context, b batch) error
}

type sbSender struct{ s *azservicebus.Sender }

var _ batchSender = sbSender{}

func (a sbSender) NewBatch(ctx context.Context) (batch, error) { return a.s.NewMessageBatch(ctx, nil) }

func (a sbSender) SendBatch(ctx context.Context, b batch) error {
	return a.s.SendMessageBatch(ctx, b.(*azservicebus.MessageBatch), nil)
}

// newMessage returns the Service Bus message for o: MessageId = order id, so
// that duplicate detection and the worker's check both see resends.
func newMessage(o outgoing) *azservicebus.Message {
	ct := "application/json"
	m := &azservicebus.Message{MessageID: &o.id, ContentType: &ct, Body: o.body}
	if o.subject != "" {
		m.Subject = &o.subject
	}
	return m
}

// sendAll sends msgs in batches of at most maxPerBatch messages, each as
// large as the queue allows. progress is called with the number of messages
// of every batch sent. It returns how many messages were sent; on error the
// messages from that count on were not (a resend of them is safe: the
// consumer is idempotent).
func sendAll(ctx context.Context, s batchSender, msgs []outgoing, maxPerBatch int, progress func(int)) (sent int, err error) {
	b, err := s.NewBatch(ctx)
	if err != nil {
		return 0, fmt.Errorf("new message batch: %w", err)
	}
	flush := func() error {
		n := int(b.NumMessages())
		if n == 0 {
			return nil
		}
		if err := s.SendBatch(ctx, b); err != nil {
			return fmt.Errorf("send batch of %d messages: %w", n, err)
		}
		sent += n
		progress(n)
		b, err = s.NewBatch(ctx)
		if err != nil {
			return fmt.Errorf("new message batch: %w", err)
		}
		return nil
	}
	for _, o := range msgs {
		err := b.AddMessage(newMessage(o), nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) && b.NumMessages() > 0 {
			if err := flush(); err != nil {
				return sent, err
			}
			err = b.AddMessage(newMessage(o), nil)
		}
		if errors.Is(err, azservicebus.ErrMessageTooLarge) {
			return sent, fmt.Errorf("message %s (%d bytes) is larger than the queue accepts: %w", o.id, len(o.body), err)
		}
		if err != nil {
			return sent, fmt.Errorf("add message %s: %w", o.id, err)
		}
		if int(b.NumMessages()) >= maxPerBatch {
			if err := flush(); err != nil {
				return sent, err
			}
		}
	}
	return sent, flush()
}
