package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
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

// checkMessageIDs reports the messages of batches whose MessageId Service
// Bus would refuse, naming the first few; run calls it before it sends
// anything. Service Bus refuses such a send, and the SDK retries it until
// its deadline, so that without the check the producer would report only
// "context deadline exceeded", after sending the messages before it.
func checkMessageIDs(batches ...[]outgoing) error {
	const shown = 3
	var errs []error
	n := 0
	for _, b := range batches {
		for _, o := range b {
			if err := cli.CheckMessageID(o.id); err != nil {
				if n++; n <= shown {
					errs = append(errs, err)
				}
			}
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d messages would be refused by Service Bus, so nothing was sent: %w", n, errors.Join(errs...))
}

// sendTracing starts the producer's span of each message. The zero value
// starts none and leaves the messages without trace context.
type sendTracing struct {
	tracer trace.Tracer // nil: no spans
	prop   propagation.TextMapPropagator
	queue  string
}

// newSendTracing returns the tracing of sends to queue with p's providers:
// none when p records nothing.
func newSendTracing(p *telemetry.Providers, queue string) sendTracing {
	if !p.Enabled() {
		return sendTracing{}
	}
	return sendTracing{tracer: p.TracerProvider.Tracer("github.com/idempotent-consumer/sbcosmos/cmd/orderproducer",
		trace.WithSchemaURL(semconv.SchemaURL)), prop: p.Propagator, queue: queue}
}

// start starts m's "send" span (kind producer), which ends when the batch
// holding m was sent, and writes its context into m's application
// properties (see package telemetry), so that the worker's process span
// continues the trace. It returns nil without a tracer.
func (t sendTracing) start(ctx context.Context, m *azservicebus.Message) trace.Span {
	if t.tracer == nil {
		return nil
	}
	ctx, span := t.tracer.Start(ctx, "send "+t.queue, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(semconv.MessagingSystemServiceBus, semconv.MessagingDestinationName(t.queue),
			semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("send"),
			semconv.MessagingMessageID(*m.MessageID)))
	if m.ApplicationProperties == nil {
		m.ApplicationProperties = map[string]any{}
	}
	telemetry.Inject(ctx, t.prop, m.ApplicationProperties)
	return span
}

// endSends ends spans, those of the messages of one batch of n, with err, the batch's
// fate.
func endSends(spans []trace.Span, n int, err error) {
	for _, span := range spans {
		if span == nil {
			continue
		}
		span.SetAttributes(semconv.MessagingBatchMessageCount(n))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// sendAll sends msgs in batches of at most maxPerBatch messages, each as
// large as the queue allows, each message under a span of tr's.
// progress is called with the number of messages
// of every batch sent. It returns how many messages were sent; on error the
// messages from that count on were not (a resend of them is safe: the
// consumer is idempotent).
func sendAll(ctx context.Context, s batchSender, tr sendTracing, msgs []outgoing, maxPerBatch int, progress func(int)) (sent int, err error) {
	b, err := s.NewBatch(ctx)
	if err != nil {
		return 0, fmt.Errorf("new message batch: %w", err)
	}
	var spans []trace.Span // of the messages in b
	defer func() { endSends(spans, len(spans), err) }()
	flush := func() error {
		n := int(b.NumMessages())
		if n == 0 {
			return nil
		}
		err := s.SendBatch(ctx, b)
		endSends(spans, n, err)
		spans = spans[:0]
		if err != nil {
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
		m := newMessage(o)
		span := tr.start(ctx, m)
		err := b.AddMessage(m, nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) && b.NumMessages() > 0 {
			if err := flush(); err != nil {
				endSends([]trace.Span{span}, 0, err)
				return sent, err
			}
			err = b.AddMessage(m, nil)
		}
		if err != nil {
			endSends([]trace.Span{span}, 0, err)
		} else if span != nil {
			spans = append(spans, span)
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
