package cosmosstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// TestProbe_FakeGateway: Probe is nil only when both its point read and its
// delete of the missing item answer as a healthy container does; otherwise
// it returns the classified *Error of the call that failed. A container
// that answers reads and refuses writes (503 or 403 to the delete) passes
// Ping and fails Probe.
func TestProbe_FakeGateway(t *testing.T) {
	missing := reply{status: 404, body: `{"code":"NotFound"}`}
	tests := []struct {
		name          string
		read, delete  reply
		wantErr       bool
		wantTransient bool
		wantOp        string // of the *cosmosstore.Error
		wantDelete    bool   // the delete was sent
	}{
		{name: "healthy: both 404", read: missing, delete: missing, wantDelete: true},
		{name: "item created by someone: read 200, delete 204", read: reply{status: 200, body: `{"id":"cosmosstore-ping"}`}, delete: reply{status: 204}, wantDelete: true},
		{name: "read 503", read: reply{status: 503, body: `{}`}, delete: missing,
			wantErr: true, wantTransient: true, wantOp: "ping"},
		{name: "read 403", read: reply{status: 403, body: `{}`}, delete: missing,
			wantErr: true, wantOp: "ping"},
		{name: "write-region outage: delete 503", read: missing, delete: reply{status: 503, body: `{}`},
			wantErr: true, wantTransient: true, wantOp: "probe delete", wantDelete: true},
		{name: "delete 408", read: missing, delete: reply{status: 408, body: `{}`},
			wantErr: true, wantTransient: true, wantOp: "probe delete", wantDelete: true},
		{name: "delete throttled 429", read: missing, delete: reply{status: 429, body: `{}`},
			wantErr: true, wantTransient: true, wantOp: "probe delete", wantDelete: true},
		{name: "delete: connection dropped", read: missing, delete: reply{drop: true},
			wantErr: true, wantTransient: true, wantOp: "probe delete", wantDelete: true},
		{name: "role cut to Data Reader: delete 403", read: missing, delete: reply{status: 403, body: `{}`},
			wantErr: true, wantOp: "probe delete", wantDelete: true},
		{name: "delete 401", read: missing, delete: reply{status: 401, body: `{}`},
			wantErr: true, wantOp: "probe delete", wantDelete: true},
		{name: "delete: container missing (404, 1003)", read: missing,
			delete:  reply{status: 404, header: map[string]string{"x-ms-substatus": "1003"}, body: `{}`},
			wantErr: true, wantOp: "probe delete", wantDelete: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setRead(tt.read)
			g.mu.Lock()
			g.deleteItem = tt.delete
			g.mu.Unlock()
			s := storeFor(t, g.endpoint(), noRetries())
			err := s.Probe(t.Context())
			if (err != nil) != tt.wantErr || idempotent.IsTransient(err) != tt.wantTransient {
				t.Errorf("Probe = %v; want error %v, transient %v", err, tt.wantErr, tt.wantTransient)
			}
			if errors.Is(err, idempotent.ErrNotFound) {
				t.Errorf("Probe = %v matches ErrNotFound", err)
			}
			var e *cosmosstore.Error
			if err != nil && (!errors.As(err, &e) || e.Op != tt.wantOp || e.ID != "cosmosstore-ping" || e.PartitionKey != "cosmosstore-ping") {
				t.Errorf("Probe = %v, want a *cosmosstore.Error of op %q on the item cosmosstore-ping", err, tt.wantOp)
			}
			g.mu.Lock()
			deleted := append([]string(nil), g.deleted...)
			g.mu.Unlock()
			if tt.wantDelete != (len(deleted) > 0) {
				t.Errorf("deletes sent: %q; want one: %v", deleted, tt.wantDelete)
			}
			for _, p := range deleted {
				if !strings.HasSuffix(p, "/docs/cosmosstore-ping") {
					t.Errorf("Probe deleted %q, want the ping item", p)
				}
			}
			g.mu.Lock()
			created, batches, replaced, patched := len(g.created), len(g.batches), len(g.replaced), len(g.patched)
			g.mu.Unlock()
			if created+batches+replaced+patched != 0 {
				t.Errorf("Probe sent %d creates, %d batches, %d replaces, %d patches; want no write but the delete", created, batches, replaced, patched)
			}
		})
	}
}

// TestProbe_FakeGateway_PingPassesWhatProbeFails: a container that answers
// reads and refuses writes passes Ping, the relay's read-only health check,
// and fails Probe: Ping sends no delete.
func TestProbe_FakeGateway_PingPassesWhatProbeFails(t *testing.T) {
	g := newGateway(t, false)
	g.setRead(reply{status: 404, body: `{}`})
	g.mu.Lock()
	g.deleteItem = reply{status: 503, body: `{}`}
	g.mu.Unlock()
	s := storeFor(t, g.endpoint(), noRetries())
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping = %v, want nil: reads are answered", err)
	}
	g.mu.Lock()
	deletes := len(g.deleted)
	g.mu.Unlock()
	if deletes != 0 {
		t.Errorf("Ping sent %d deletes, want none", deletes)
	}
	if err := s.Probe(t.Context()); !idempotent.IsTransient(err) {
		t.Errorf("Probe = %v, want a transient error: writes are refused", err)
	}
}

// TestProbe_FakeGateway_CountsBothCharges: Probe's cost is its two calls'
// request charges, counted in RequestCharge as every call's is.
func TestProbe_FakeGateway_CountsBothCharges(t *testing.T) {
	g := newGateway(t, false)
	g.setRead(reply{status: 404, header: map[string]string{"x-ms-request-charge": "1"}, body: `{}`})
	g.mu.Lock()
	g.deleteItem = reply{status: 404, header: map[string]string{"x-ms-request-charge": "1.24"}, body: `{}`}
	g.mu.Unlock()
	s := storeFor(t, g.endpoint(), noRetries())
	if err := s.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := s.RequestCharge(); got != 2.24 {
		t.Errorf("RequestCharge after Probe = %v, want 2.24 (read 1 + delete 1.24)", got)
	}
}

// TestProbe_FakeGateway_Untraced: under a context the client's Untraced
// reports, both of Probe's calls go through the untraced twin, as every
// other call of the Store does: a breaker probing every few seconds
// records no spans.
func TestProbe_FakeGateway_Untraced(t *testing.T) {
	g := newGateway(t, false)
	g.setRead(reply{status: 404, body: `{}`})
	g.mu.Lock()
	g.deleteItem = reply{status: 404, body: `{}`}
	g.mu.Unlock()
	var spans spanCounter
	o := noRetries()
	o.TracingProvider = spans.provider()
	o.Untraced = quiet
	s := storeFor(t, g.endpoint(), o)
	if err := s.Probe(context.WithValue(t.Context(), quietKey{}, true)); err != nil {
		t.Fatal(err)
	}
	if got := spans.take(); len(got) != 0 {
		t.Errorf("a quiet Probe started the spans %q, want none", got)
	}
	if err := s.Probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := spans.take(); len(got) < 4 {
		t.Errorf("a traced Probe started the spans %q, want the read's and the delete's operation and HTTP spans", got)
	}
}
