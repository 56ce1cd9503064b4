package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
)

// batchTransport answers the Cosmos DB account read and every
// transactional batch (two creates, 201), in process.
type batchTransport struct{}

const fakeAccount = `{"id":"fake","writableLocations":[{"name":"local","databaseAccountEndpoint":"https://fake.documents.azure.com:443/"}],` +
	`"readableLocations":[{"name":"local","databaseAccountEndpoint":"https://fake.documents.azure.com:443/"}],` +
	`"userConsistencyPolicy":{"defaultConsistencyLevel":"Session"}}`

func (batchTransport) Do(r *http.Request) (*http.Response, error) {
	body := `[{"statusCode":201,"requestCharge":5.1,"eTag":"\"e\""},{"statusCode":201,"requestCharge":5.1,"eTag":"\"f\""}]`
	if r.Method == http.MethodGet && r.URL.Path == "/" {
		body = fakeAccount
	}
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	h := http.Header{"Content-Type": {"application/json"}, "X-Ms-Request-Charge": {"5.1"}, "X-Ms-Session-Token": {"0:-1#12"}}
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// BenchmarkAzureStoreCall measures one cosmosstore call (a transactional
// batch of two creates) under a process span the sampler dropped, as nine
// in ten or more of the deployed worker's deliveries are: with no Azure
// SDK spans at all (no-tracing), with the SDK's tracing provider of
// AzureClientOptions alone (traced: the SDK sets up its spans, and the
// provider starts none), and with AzureUntraced too (untraced: the call goes
// through the untraced twin).
func BenchmarkAzureStoreCall(b *testing.B) {
	ctx, variants := azureStoreVariants(b)
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			call := storeCall(b, ctx, v.opts)
			b.ReportAllocs()
			for b.Loop() {
				call()
			}
		})
	}
}

// TestAzureStoreCallUntracedAllocations: under a dropped trace, a Store
// call with AzureUntraced allocates exactly what one without any Azure SDK
// tracing does, and one with the SDK's tracing provider alone more.
func TestAzureStoreCallUntracedAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("allocation counts under the race detector are not exact")
	}
	ctx, variants := azureStoreVariants(t)
	allocs := map[string]float64{}
	for _, v := range variants {
		allocs[v.name] = testing.AllocsPerRun(200, storeCall(t, ctx, v.opts))
	}
	if allocs["untraced"] != allocs["no-tracing"] || allocs["traced"] <= allocs["no-tracing"] {
		t.Errorf("allocations per call %v: want untraced equal to no-tracing, and traced above them", allocs)
	}
}

type azureStoreVariant struct {
	name string
	opts func(*cosmosstore.ClientOptions)
}

// azureStoreVariants returns a context whose span the sampler dropped and
// the Azure SDK options of the three variants.
func azureStoreVariants(tb testing.TB) (context.Context, []azureStoreVariant) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(telemetry.KeptSampler(sdktrace.TraceIDRatioBased(0))))
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: telemetry.Propagator()}
	ctx, parent := tp.Tracer("t").Start(context.Background(), "process orders")
	tb.Cleanup(func() { parent.End() })
	// A deadline, as the worker's handlers have (MessageTimeout).
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	tb.Cleanup(cancel)
	if parent.SpanContext().IsSampled() {
		tb.Fatal("the parent was sampled")
	}
	return ctx, []azureStoreVariant{
		{"no-tracing", func(*cosmosstore.ClientOptions) {}},
		{"traced", func(o *cosmosstore.ClientOptions) { o.ClientOptions.ClientOptions = p.AzureClientOptions() }},
		{"untraced", func(o *cosmosstore.ClientOptions) {
			o.ClientOptions.ClientOptions = p.AzureClientOptions()
			o.Untraced = p.AzureUntraced()
		}},
	}
}

// storeCall returns one CreateBatch of a Store with the options opts sets,
// against batchTransport, under ctx, after a first one (the account read).
func storeCall(tb testing.TB, ctx context.Context, opts func(*cosmosstore.ClientOptions)) func() {
	tb.Helper()
	o := &cosmosstore.ClientOptions{}
	opts(o)
	o.Transport = batchTransport{}
	o.Retry = policy.RetryOptions{MaxRetries: -1}
	c, err := cosmosstore.NewClientWithKey("https://fake.documents.azure.com:443/", "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==", o)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := cosmosstore.New(c, "orders", "orders", "/orderId")
	if err != nil {
		tb.Fatal(err)
	}
	docs := []idempotent.Document{{ID: "ord-1", Body: []byte(`{"id":"ord-1","orderId":"ord-1"}`)},
		{ID: "ev-1", Body: []byte(`{"id":"ev-1","orderId":"ord-1"}`)}}
	call := func() {
		if _, err := s.CreateBatch(ctx, "ord-1", docs); err != nil {
			tb.Fatal(err)
		}
	}
	call()
	return call
}
