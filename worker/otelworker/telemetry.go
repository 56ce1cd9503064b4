package otelworker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Options configure a Telemetry.
type Options struct {
	TracerProvider trace.TracerProvider // nil: no spans
	MeterProvider  metric.MeterProvider // nil: no metrics
	// Propagator reads the trace context of messages. Nil: W3C Trace
	// Context and Baggage.
	Propagator propagation.TextMapPropagator
	// Queue is the queue or topic received from (messaging.destination.name),
	// and Subscription the subscription, if any
	// (messaging.destination.subscription.name).
	Queue, Subscription string
	// Names are the deployment's metric and attribute names. The zero
	// value selects DefaultNames.
	Names Names
	// RequestCharge, if set, reports the store's cumulative request charge
	// (Cosmos DB request units), observed as Names.RequestUnits.
	RequestCharge func() float64
	// CacheStats, if set, reports the handler's cache counters, observed as
	// Names.CacheHits and Names.CacheMisses. It is called from the metric
	// reader's goroutine, concurrently with the handler.
	CacheStats func() idempotent.CacheStats
}

// Telemetry records a worker's traces and metrics: it is a worker.Hook,
// and Receiver wraps the worker's receiver. It is safe for concurrent use;
// one Telemetry serves one Worker.
//
// With a TracerProvider, every delivery gets a "process" span (kind
// consumer) that continues the producer's trace from the message's
// application properties (traceparent, or Diagnostic-Id), with the
// settlement ("complete", "abandon", "dead_letter") and each lock renewal
// ("renew_message_lock") as its children; the handler's context carries
// the span, so the store's and a downstream client's spans are its
// children too. A delivery whose trace the sampler dropped at its start
// starts no settlement or renewal span (every sampler would drop them);
// when it did not complete, its process span is recorded at its end all
// the same (AttrKept). Every receive call gets a "receive" span (kind client)
// linked to the creation context of each message it returned. Attribute
// names follow the OpenTelemetry messaging semantic conventions (semconv
// v1.43.0), with the deployment's own (Names): the outcome, the reason,
// the entity's key and, on a delivery that resumed another's side effect,
// Names.ResumedAttr. The sampler of a process or receive span (and a span
// processor's OnStart) sees one attribute only, AttrKept, on the spans the
// worker keeps: the others are set right after the span starts, when it
// records, so that a span the sampler drops (99 in 100 of the ordinary
// ones, deployed) costs no attributes; a recorded span carries them all the
// same. (The samplers the OpenTelemetry specification names, and
// KeptSampler over them, decide by the trace and AttrKept alone.)
//
// With a MeterProvider it records the metrics of Names and the Metric
// constants. Their counts agree with the worker's Stats. With none, or a
// no-op one, the per-delivery metrics are not recorded at all.
type Telemetry struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	n      Names
	base   []attribute.KeyValue // messaging.system, destination
	names  map[idempotent.Outcome]attribute.KeyValue

	consumed, deliveries, duplicates, mismatches, deadLetters metric.Int64Counter
	settleFailures, renewals, breakerChanges, resumed         metric.Int64Counter
	inFlight, breakerOpen                                     metric.Int64UpDownCounter
	processDuration                                           metric.Float64Histogram
	baseOpt                                                   metric.MeasurementOption
	baseAdd                                                   []metric.AddOption // baseOpt, built once: a variadic call through an interface allocates its slice
	metered                                                   bool               // the MeterProvider is not a no-op one
	resendOpt, redeliveryOpt, consumedOpt                     metric.MeasurementOption
	outcomes                                                  sync.Map // outcomeKey -> outcomeOpts
	cachedOutcomes                                            atomic.Int64

	breakerMu      sync.Mutex
	breakerWasOpen bool // guarded by breakerMu

	// The span names, built once: "process QUEUE" and the others.
	processName, receiveName, renewName       string
	completeName, abandonName, deadLetterName string
	// The start options of the receive span, of a process span, and of
	// a redelivery's process span (AttrKept), built once.
	receiveOpts, processOpts, redeliveryOpts []trace.SpanStartOption
	// receiveAttrs are the attributes of a receive span, set once it
	// records.
	receiveAttrs []attribute.KeyValue
}

var _ worker.Hook = (*Telemetry)(nil)

const instrumentationScope = "github.com/idempotent-consumer/sbcosmos/worker"

// New returns the Telemetry o describes. Without providers it records
// nothing, at the cost of a no-op call per span and metric: a worker that
// records nothing is simply given no Telemetry.
func New(o Options) (*Telemetry, error) {
	tp, mp, prop := o.TracerProvider, o.MeterProvider, o.Propagator
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	_, noMetrics := mp.(metricnoop.MeterProvider)
	if prop == nil {
		prop = Propagator()
	}
	n := o.Names
	if n == (Names{}) {
		n = DefaultNames()
	}
	t := &Telemetry{
		tracer: tp.Tracer(instrumentationScope, trace.WithSchemaURL(semconv.SchemaURL)),
		prop:   prop, n: n, metered: !noMetrics,
		base:  []attribute.KeyValue{semconv.MessagingSystemServiceBus, semconv.MessagingDestinationName(o.Queue)},
		names: map[idempotent.Outcome]attribute.KeyValue{},
	}
	if o.Subscription != "" {
		t.base = append(t.base, semconv.MessagingDestinationSubscriptionName(o.Subscription))
	}
	for oc := idempotent.Outcome(1); oc < 32; oc++ {
		t.names[oc] = n.Outcome.String(oc.String())
	}
	m := mp.Meter(instrumentationScope, metric.WithSchemaURL(semconv.SchemaURL))
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	t.consumed = counter(MetricConsumed, "{message}", "Messages received.")
	t.deliveries = counter(n.Deliveries, "{delivery}", "Deliveries handled, by outcome and reason.")
	t.duplicates = counter(n.Duplicates, "{delivery}", "Duplicate deliveries, by cause.")
	t.mismatches = counter(n.Mismatches, "{delivery}", "Deliveries of an id reused for other content.")
	t.deadLetters = counter(n.DeadLetters, "{message}", "Messages dead-lettered, by reason.")
	t.settleFailures = counter(n.SettlementFailures, "{settlement}", "Settlements that failed.")
	t.renewals = counter(n.LockRenewals, "{renewal}", "Lock renewals, by result.")
	t.breakerChanges = counter(n.BreakerTransitions, "{transition}", "Circuit breaker state changes, by new state.")
	t.resumed = counter(n.Resumed, "{delivery}", "Deliveries that resumed a side effect another delivery had begun.")
	var err error
	t.processDuration, err = m.Float64Histogram(MetricProcessDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of processing operation."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60))
	errs = append(errs, err)

	t.inFlight, err = m.Int64UpDownCounter(n.InFlight, metric.WithUnit("{delivery}"), metric.WithDescription("Deliveries being handled."))
	errs = append(errs, err)
	t.breakerOpen, err = m.Int64UpDownCounter(n.BreakerOpen, metric.WithDescription("1 while the circuit breaker has paused receiving (summed over the workers)."))
	errs = append(errs, err)
	var observed []metric.Observable
	var ru metric.Float64ObservableCounter
	if o.RequestCharge != nil {
		ru, err = m.Float64ObservableCounter(n.RequestUnits, metric.WithUnit("{request_unit}"), metric.WithDescription("Request units the store was charged."))
		errs = append(errs, err)
		observed = append(observed, ru)
	}
	var hits, misses metric.Int64ObservableCounter
	if o.CacheStats != nil {
		hits, err = m.Int64ObservableCounter(n.CacheHits, metric.WithUnit("{lookup}"), metric.WithDescription("Cache hits."))
		errs = append(errs, err)
		misses, err = m.Int64ObservableCounter(n.CacheMisses, metric.WithUnit("{lookup}"), metric.WithDescription("Cache misses."))
		errs = append(errs, err)
		observed = append(observed, hits, misses)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelworker: %w", err)
	}
	t.processName, t.receiveName, t.renewName = "process "+o.Queue, "receive "+o.Queue, "renew_message_lock "+o.Queue
	t.completeName, t.abandonName, t.deadLetterName = "complete "+o.Queue, "abandon "+o.Queue, "dead_letter "+o.Queue
	t.receiveOpts = []trace.SpanStartOption{clientKind}
	t.receiveAttrs = append(t.base[:len(t.base):len(t.base)], semconv.MessagingOperationTypeReceive, semconv.MessagingOperationName("receive"))
	t.processOpts = []trace.SpanStartOption{consumerKind}
	t.redeliveryOpts = []trace.SpanStartOption{consumerKind, trace.WithAttributes(AttrKept.String(KeptRedelivery))}
	t.baseOpt = metric.WithAttributes(t.base...)
	t.baseAdd = []metric.AddOption{t.baseOpt}
	t.resendOpt = metric.WithAttributes(append(t.base[:len(t.base):len(t.base)], n.DuplicateCause.String("resend"))...)
	t.redeliveryOpt = metric.WithAttributes(append(t.base[:len(t.base):len(t.base)], n.DuplicateCause.String("redelivery"))...)
	t.consumedOpt = metric.WithAttributes(append(t.base[:len(t.base):len(t.base)], semconv.MessagingOperationName("receive"))...)
	if len(observed) > 0 {
		// Observed for as long as the MeterProvider lives: the sources
		// are cumulative, and a worker runs once per process.
		if _, err := m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
			if ru != nil {
				ob.ObserveFloat64(ru, o.RequestCharge(), t.baseOpt)
			}
			if hits != nil {
				cs := o.CacheStats()
				ob.ObserveInt64(hits, int64(cs.Hits), t.baseOpt)
				ob.ObserveInt64(misses, int64(cs.Misses), t.baseOpt)
			}
			return nil
		}, observed...); err != nil {
			return nil, fmt.Errorf("otelworker: %w", err)
		}
	}
	return t, nil
}

// Receiver returns r with spans and metrics around its calls: the receive
// spans, the settlement and renewal spans, and the consumed, dead-letter,
// settlement-failure and renewal metrics. Give the worker what it returns.
func (t *Telemetry) Receiver(r worker.Receiver) worker.Receiver {
	return &tracedReceiver{Receiver: r, t: t}
}

// Start starts m's process span, a child of the trace context in its
// application properties, and returns ctx with it: the worker's Hook.
func (t *Telemetry) Start(ctx context.Context, m *azservicebus.ReceivedMessage) context.Context {
	if t.metered {
		t.inFlight.Add(ctx, 1, t.baseAdd...)
	}
	parent := ExtractTraceContext(ctx, t.prop, m.ApplicationProperties)
	opts := t.processOpts
	if m.DeliveryCount > 1 {
		opts = t.redeliveryOpts // Sampler keeps the whole trace
	}
	ctx, _ = t.startProcess(parent, m.MessageID, m.DeliveryCount, opts...)
	return ctx
}

// startProcess starts a process span under ctx with opts for the message
// id delivered deliveryCount times, and gives it the attributes of
// processAttrs once it records.
func (t *Telemetry) startProcess(ctx context.Context, id string, deliveryCount uint32, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, t.processName, opts...)
	if span.IsRecording() {
		span.SetAttributes(t.processAttrs(id, deliveryCount)...)
	}
	return ctx, span
}

// processAttrs are the attributes of a process span.
func (t *Telemetry) processAttrs(id string, deliveryCount uint32) []attribute.KeyValue {
	return append(t.base[:len(t.base):len(t.base)],
		semconv.MessagingMessageID(id),
		semconv.MessagingServiceBusMessageDeliveryCount(int(deliveryCount)),
		semconv.MessagingOperationTypeProcess, semconv.MessagingOperationName("process"))
}

// failed reports whether a delivery did not complete as it should: its
// span is kept whatever the sampler's ratio (AttrKept).
func failed(rep worker.Report) bool {
	return rep.Result.Outcome.Settlement() != idempotent.Complete || rep.LockLost || rep.CutOff ||
		rep.SettleErr != nil || rep.ScheduleErr != nil
}

// End ends the process span Start began and records the delivery's
// metrics: the worker's Hook.
func (t *Telemetry) End(ctx context.Context, rep worker.Report) {
	span := trace.SpanFromContext(ctx)
	res := rep.Result
	outcome, ok := t.names[res.Outcome]
	if !ok {
		outcome = t.n.Outcome.String(res.Outcome.String())
	}
	if t.metered {
		t.inFlight.Add(ctx, -1, t.baseAdd...)
		opts := t.deliveryOpts(res.Outcome, res.Reason, outcome)
		t.deliveries.Add(ctx, 1, opts.deliveries...)
		t.processDuration.Record(ctx, rep.Duration.Seconds(), opts.duration...)
		switch res.Outcome {
		case idempotent.Duplicate:
			opt := t.resendOpt
			if rep.DeliveryCount > 1 {
				opt = t.redeliveryOpt
			}
			t.duplicates.Add(ctx, 1, opt)
		case idempotent.Mismatch:
			t.mismatches.Add(ctx, 1, t.baseAdd...)
		}
		if res.Resumed {
			t.resumed.Add(ctx, 1, t.baseAdd...)
		}
	}

	if !span.SpanContext().IsSampled() && span.SpanContext().IsValid() && failed(rep) {
		// The sampler dropped this delivery's trace at its start, before
		// its outcome was known: record its process span now, a child of
		// the dropped one, from the delivery's start (Sampler keeps it).
		span.End()
		_, span = t.startProcess(ctx, rep.MessageID, rep.DeliveryCount, consumerKind,
			trace.WithTimestamp(time.Now().Add(-rep.Duration)), trace.WithAttributes(AttrKept.String(KeptFailure)))
	}
	if span.IsRecording() {
		span.SetAttributes(outcome, t.n.LockLost.Bool(rep.LockLost), t.n.CutOff.Bool(rep.CutOff))
		if res.Reason != "" {
			span.SetAttributes(t.n.Reason.String(res.Reason))
		}
		if res.Key != "" {
			span.SetAttributes(t.n.Key.String(res.Key))
		}
		if res.Resumed {
			span.SetAttributes(t.n.ResumedAttr.Bool(true))
		}
		switch {
		case res.Outcome.Settlement() == idempotent.Abandon || rep.LockLost:
			span.SetAttributes(semconv.ErrorTypeKey.String(orDefaultString(res.Reason, "transient")))
			if res.Err != nil {
				span.RecordError(res.Err)
			}
			if rep.Scheduled {
				span.SetAttributes(t.n.RetryAttempt.Int(rep.RetryAttempt))
			}
			span.SetStatus(codes.Error, orDefaultString(res.Description, "transient failure: abandoned"))
		case rep.SettleErr != nil:
			span.SetStatus(codes.Error, "settlement failed")
		}
	}
	span.End()
}

// outcomeOpts are the attribute sets of a delivery's metrics for one
// outcome and reason: built once, since building a set sorts and copies
// its attributes.
type outcomeOpts struct {
	deliveries []metric.AddOption
	duration   []metric.RecordOption
}

// outcomeKey keys the cache of outcomeOpts.
type outcomeKey struct {
	outcome idempotent.Outcome
	reason  string
}

// maxCachedOutcomes bounds the cache of outcomeOpts: the reasons are the
// handlers' constants, but nothing stops a handler from making them up.
const maxCachedOutcomes = 256

// deliveryOpts returns the attribute sets of a delivery's metrics for
// outcome (whose attribute is attr) and reason, from the cache when it
// holds them. It is safe for concurrent use.
func (t *Telemetry) deliveryOpts(outcome idempotent.Outcome, reason string, attr attribute.KeyValue) outcomeOpts {
	key := outcomeKey{outcome, reason}
	if o, ok := t.outcomes.Load(key); ok {
		return o.(outcomeOpts)
	}
	attrs := make([]attribute.KeyValue, 0, len(t.base)+2)
	attrs = append(append(attrs, t.base...), attr)
	if reason != "" {
		attrs = append(attrs, t.n.Reason.String(reason))
	}
	o := outcomeOpts{
		deliveries: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))},
		duration: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(t.base[:len(t.base):len(t.base)],
			semconv.MessagingOperationName("process"), attr)...))},
	}
	if t.cachedOutcomes.Add(1) <= maxCachedOutcomes {
		t.outcomes.Store(key, o)
	}
	return o
}

// messageAttrs are the span attributes of m.
func (t *Telemetry) messageAttrs(m *azservicebus.ReceivedMessage) []attribute.KeyValue {
	return append(t.base[:len(t.base):len(t.base)],
		semconv.MessagingMessageID(m.MessageID),
		semconv.MessagingServiceBusMessageDeliveryCount(int(m.DeliveryCount)))
}

// BreakerChanged records a circuit breaker's change to state, open when
// it has paused receiving (open or half-open): a breaker's hook (for
// package worker/breaker: Options.OnChange calls it with State.String()
// and State != Closed). Calls must not overlap for one Telemetry.
func (t *Telemetry) BreakerChanged(state string, open bool) {
	ctx := context.Background()
	t.breakerChanges.Add(ctx, 1, metric.WithAttributes(append(t.base[:len(t.base):len(t.base)], AttrBreakerState.String(state))...))
	t.breakerMu.Lock()
	defer t.breakerMu.Unlock()
	if open != t.breakerWasOpen {
		t.breakerWasOpen = open
		delta := int64(1)
		if !open {
			delta = -1
		}
		t.breakerOpen.Add(ctx, delta, t.baseOpt)
	}
}

func orDefaultString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// tracedReceiver adds spans and metrics to a Receiver's calls.
type tracedReceiver struct {
	worker.Receiver
	t *Telemetry
}

var _ worker.Receiver = (*tracedReceiver)(nil)

// Unwrap returns the receiver r wraps, for the worker's defaults.
func (r *tracedReceiver) Unwrap() worker.Receiver { return r.Receiver }

func (r *tracedReceiver) ReceiveMessages(ctx context.Context, n int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	t := r.t
	ctx, span := t.tracer.Start(ctx, t.receiveName, t.receiveOpts...)
	msgs, err := r.Receiver.ReceiveMessages(ctx, n, o)
	if len(msgs) > 0 && t.metered {
		t.consumed.Add(ctx, int64(len(msgs)), t.consumedOpt)
	}
	if span.IsRecording() {
		span.SetAttributes(t.receiveAttrs...)
		span.SetAttributes(semconv.MessagingBatchMessageCount(len(msgs)))
		for _, m := range msgs {
			if sc := trace.SpanContextFromContext(ExtractTraceContext(context.Background(), t.prop, m.ApplicationProperties)); sc.IsValid() {
				span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(m.MessageID)}})
			}
		}
		endSpan(span, err)
	}
	return msgs, err
}

func (r *tracedReceiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error {
	ctx, span := r.startSettle(ctx, m, "complete", r.t.completeName, semconv.MessagingServiceBusDispositionStatusComplete)
	err := r.Receiver.CompleteMessage(ctx, m, o)
	r.endSettle(ctx, span, semconv.MessagingServiceBusDispositionStatusComplete, err)
	return err
}

func (r *tracedReceiver) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error {
	ctx, span := r.startSettle(ctx, m, "abandon", r.t.abandonName, semconv.MessagingServiceBusDispositionStatusAbandon)
	err := r.Receiver.AbandonMessage(ctx, m, o)
	r.endSettle(ctx, span, semconv.MessagingServiceBusDispositionStatusAbandon, err)
	return err
}

func (r *tracedReceiver) DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error {
	ctx, span := r.startSettle(ctx, m, "dead_letter", r.t.deadLetterName, semconv.MessagingServiceBusDispositionStatusDeadLetter)
	reason := ""
	if o != nil && o.Reason != nil {
		reason = *o.Reason
		span.SetAttributes(r.t.n.Reason.String(reason))
	}
	err := r.Receiver.DeadLetterMessage(ctx, m, o)
	r.endSettle(ctx, span, semconv.MessagingServiceBusDispositionStatusDeadLetter, err)
	if err == nil {
		r.t.deadLetters.Add(ctx, 1, metric.WithAttributes(append(r.t.base[:len(r.t.base):len(r.t.base)], r.t.n.Reason.String(reason))...))
	}
	return err
}

func (r *tracedReceiver) RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.RenewMessageLockOptions) error {
	t := r.t
	span := noSpan
	if !dropped(ctx) {
		ctx, span = t.tracer.Start(ctx, t.renewName, clientKind,
			trace.WithAttributes(append(t.messageAttrs(m), semconv.MessagingOperationName("renew_message_lock"))...))
	}
	err := r.Receiver.RenewMessageLock(ctx, m, o)
	// The same classification as the worker's renewal.
	result := ""
	switch {
	case err == nil:
		result = "ok"
	case isLockLost(err):
		result = "lost"
	case ctx.Err() != nil: // the handler finished meanwhile: not a failure
	default:
		result = "failed"
	}
	if result != "" {
		t.renewals.Add(ctx, 1, metric.WithAttributes(append(t.base[:len(t.base):len(t.base)], AttrRenewalResult.String(result))...))
	}
	endSpan(span, err)
	return err
}

// startSettle starts the span of the settlement op of m, named name.
func (r *tracedReceiver) startSettle(ctx context.Context, m *azservicebus.ReceivedMessage, op, name string, disposition attribute.KeyValue) (context.Context, trace.Span) {
	t := r.t
	if dropped(ctx) {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, name, clientKind,
		trace.WithAttributes(append(t.messageAttrs(m), semconv.MessagingOperationTypeSettle, semconv.MessagingOperationName(op), disposition)...))
}

func (r *tracedReceiver) endSettle(ctx context.Context, span trace.Span, disposition attribute.KeyValue, err error) {
	if err != nil {
		r.t.settleFailures.Add(ctx, 1, metric.WithAttributes(append(r.t.base[:len(r.t.base):len(r.t.base)], disposition, semconv.ErrorTypeKey.String(errorType(err)))...))
	}
	endSpan(span, err)
}

// dropped reports whether ctx carries a span the sampler dropped: its
// children, the settlement and the lock renewals, are then not started,
// since every sampler the OpenTelemetry specification names drops them
// too (a parent-based one follows the parent, a trace-id ratio decides
// alike for the whole trace), and starting them would cost their
// attributes and the SDK's set-up for nothing.
func dropped(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled()
}

// The span kinds' options, built once.
var (
	consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)
	clientKind   = trace.WithSpanKind(trace.SpanKindClient)
)

// noSpan is a span that records nothing, for the spans dropped says not
// to start.
var noSpan = trace.SpanFromContext(context.Background())

// errorType is the error.type of a Service Bus call's error: the SDK's
// code ("lock_lost", "connlost", ...) or "_OTHER".
func errorType(err error) string {
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) && sbErr.Code != "" {
		return string(sbErr.Code)
	}
	return "_OTHER"
}

func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func isLockLost(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost
}
