package cosmosstore_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/tracing"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
)

// spanCounter is an azcore tracing provider that counts the spans the SDK
// starts, by name.
type spanCounter struct {
	mu    sync.Mutex
	names []string
}

func (c *spanCounter) provider() tracing.Provider {
	return tracing.NewProvider(func(string, string) tracing.Tracer {
		return tracing.NewTracer(func(ctx context.Context, name string, _ *tracing.SpanOptions) (context.Context, tracing.Span) {
			c.mu.Lock()
			c.names = append(c.names, name)
			c.mu.Unlock()
			return ctx, tracing.Span{}
		}, nil)
	}, nil)
}

func (c *spanCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = nil
	return n
}

// quietKey marks a context whose calls are to record no spans.
type quietKey struct{}

func quiet(ctx context.Context) bool { return ctx.Value(quietKey{}) != nil }

// TestUntraced_FakeGateway_SkipsTheSpansOfQuietCalls: with
// ClientOptions.Untraced, a Store's call under a context it reports goes
// through the untraced twin, which starts no span, and every other call
// through the traced client, whose spans (the operation's and the HTTP
// request's) are started as before. Both reach the same account with the
// same options: the same batch is sent either way.
func TestUntraced_FakeGateway_SkipsTheSpansOfQuietCalls(t *testing.T) {
	g := newGateway(t, false)
	g.setBatch(batchReply(http.StatusOK, nil, 201, 201))
	var spans spanCounter
	o := noRetries()
	o.TracingProvider = spans.provider()
	o.Untraced = quiet
	s := storeFor(t, g.endpoint(), o)
	if !cosmosstore.HasUntracedTwin(s) {
		t.Fatal("no untraced twin with a tracing provider and Untraced")
	}

	if err := writeOrder(t.Context(), s, newWrite("ord-1", "cust-1")); err != nil {
		t.Fatal(err)
	}
	if got := spans.take(); len(got) < 2 {
		t.Errorf("a traced call started the spans %q, want the operation's and the HTTP request's", got)
	}
	quietCtx := context.WithValue(t.Context(), quietKey{}, true)
	for i := range 3 {
		if err := writeOrder(quietCtx, s, newWrite("ord-2", "cust-1")); err != nil {
			t.Fatal(err)
		}
		if got := spans.take(); len(got) != 0 {
			t.Errorf("quiet call %d started the spans %q, want none", i, got)
		}
	}
	if err := writeOrder(t.Context(), s, newWrite("ord-3", "cust-1")); err != nil {
		t.Fatal(err)
	}
	if got := spans.take(); len(got) < 2 {
		t.Errorf("a traced call after quiet ones started the spans %q, want the operation's and the HTTP request's", got)
	}
	if n := len(g.sentBatches()); n != 5 {
		t.Errorf("the gateway received %d batches, want 5", n)
	}
}

// TestUntraced_FakeGateway_NoTwinWithoutTracing: without a tracing
// provider (or without Untraced) there is nothing to skip: the Store
// sends every call through its one client.
func TestUntraced_FakeGateway_NoTwinWithoutTracing(t *testing.T) {
	g := newGateway(t, false)
	g.setBatch(batchReply(http.StatusOK, nil, 201, 201))
	o := noRetries()
	o.Untraced = quiet
	s := storeFor(t, g.endpoint(), o)
	quietCtx := context.WithValue(t.Context(), quietKey{}, true)
	if err := writeOrder(quietCtx, s, newWrite("ord-1", "cust-1")); err != nil {
		t.Fatal(err)
	}
	if got := cosmosstore.HasUntracedTwin(s); got {
		t.Errorf("a Store without a tracing provider has an untraced twin")
	}
}
