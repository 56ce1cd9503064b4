package otelworker_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/telemetrytest"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// TestSamplerKeepsRedeliveriesAndFailures: with a sampler that keeps
// AttrKept over a ratio of 0, which drops
// every ordinary trace, the Telemetry still records the whole trace of a
// redelivery and the process span of every delivery that did not complete
// (dead-lettered, abandoned, its settlement failed), with its outcome and
// reason; a delivery that completed on its first delivery leaves nothing.
func TestSamplerKeepsRedeliveriesAndFailures(t *testing.T) {
	n := otelworker.PrefixedNames("invoiceworker", "invoice")
	r := workertest.NewReceiver()
	for _, m := range []struct {
		id    string
		count uint32
	}{{"created", 1}, {"duplicate", 1}, {"redelivered", 2}, {"mismatch", 1}, {"invalid", 1}, {"transient", 1}, {"complete-lost", 1}} {
		r.Send(&azservicebus.ReceivedMessage{MessageID: m.id, Body: []byte(m.id), DeliveryCount: m.count})
	}
	r.CompleteErr = func(m *azservicebus.ReceivedMessage) error {
		if m.MessageID == "complete-lost" {
			return &azservicebus.Error{Code: azservicebus.CodeLockLost}
		}
		return nil
	}
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		switch m.ID {
		case "duplicate":
			return idempotent.Result{Outcome: idempotent.Duplicate, Key: m.ID}
		case "mismatch":
			return idempotent.Result{Outcome: idempotent.Mismatch, Key: m.ID, Reason: reasonIDReused}
		case "invalid":
			return idempotent.Result{Outcome: idempotent.Invalid, Reason: idempotent.ReasonInvalidMessage}
		case "transient":
			return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: errors.New("503")}
		}
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans),
		sdktrace.WithSampler(keptSampler{sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))}))
	tel, err := otelworker.New(otelworker.Options{TracerProvider: tp, Queue: "orders", Names: n})
	if err != nil {
		t.Fatal(err)
	}
	done := workertest.SettledN(r, 7)
	w := workertest.NewWorker(t, tel.Receiver(r), h, worker.Options{Concurrency: 1, Hook: tel})
	stop := workertest.Start(t, w)
	workertest.Wait(t, done, "seven settlements")
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	kept := map[string]string{} // message id → sampling.kept
	for _, sp := range telemetrytest.Spans(spans, "process orders") {
		id, _ := telemetrytest.Attr(sp, semconv.MessagingMessageIDKey)
		why, _ := telemetrytest.Attr(sp, otelworker.AttrKept)
		kept[id.AsString()] = why.AsString()
		if !sp.SpanContext().IsSampled() {
			t.Errorf("span of %s: recorded but not sampled: the exporter would drop it", id.AsString())
		}
		if _, ok := telemetrytest.Attr(sp, n.Outcome); !ok {
			t.Errorf("span of %s has no %s", id.AsString(), n.Outcome)
		}
		if why.AsString() == otelworker.KeptFailure && (!sp.Parent().IsValid() || sp.Parent().TraceID() != sp.SpanContext().TraceID()) {
			t.Errorf("span of %s kept for failure: parent %v, want the dropped span of the same trace", id.AsString(), sp.Parent())
		}
		if sp.StartTime().After(sp.EndTime()) {
			t.Errorf("span of %s starts after it ends", id.AsString())
		}
	}
	want := map[string]string{
		"redelivered":   otelworker.KeptRedelivery,
		"mismatch":      otelworker.KeptFailure,
		"invalid":       otelworker.KeptFailure,
		"transient":     otelworker.KeptFailure,
		"complete-lost": otelworker.KeptFailure,
	}
	if len(kept) != len(want) {
		t.Errorf("process spans of %v, want exactly those of %v", kept, want)
	}
	for id, why := range want {
		if kept[id] != why {
			t.Errorf("process span of %s: kept %q, want %q", id, kept[id], why)
		}
	}
	// The redelivery's whole trace: its settlement is a sampled child.
	var settled []string
	for _, sp := range telemetrytest.Spans(spans, "complete orders") {
		id, _ := telemetrytest.Attr(sp, semconv.MessagingMessageIDKey)
		settled = append(settled, id.AsString())
	}
	if !slices.Equal(settled, []string{"redelivered"}) {
		t.Errorf("complete spans of %v, want the redelivery's alone", settled)
	}
	// The mismatch's span says why it was dead-lettered.
	for _, sp := range telemetrytest.Spans(spans, "process orders") {
		if id, _ := telemetrytest.Attr(sp, semconv.MessagingMessageIDKey); id.AsString() == "mismatch" {
			if v, _ := telemetrytest.Attr(sp, n.Reason); v.AsString() != reasonIDReused {
				t.Errorf("mismatch's span: reason %q, want %q", v.AsString(), reasonIDReused)
			}
		}
	}
}

// keptSampler samples the spans that carry AttrKept and leaves the rest to
// base: the sampler AttrKept's documentation asks a deployment for.
type keptSampler struct{ base sdktrace.Sampler }

func (s keptSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, a := range p.Attributes {
		if a.Key == otelworker.AttrKept {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
		}
	}
	return s.base.ShouldSample(p)
}

func (s keptSampler) Description() string { return "kept" }
