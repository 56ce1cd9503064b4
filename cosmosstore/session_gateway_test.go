package cosmosstore_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

func (g *gateway) sentReadTokens() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.readTokens...)
}

func session(tok string) map[string]string { return map[string]string{"x-ms-session-token": tok} }

// Under Session consistency a read sees a write only with the write's
// session token, which azcosmos v1.5.0 sends only when told to: the store
// carries the token of each response of a partition (a write, a refused
// write, a read) into the reads and batches that follow for that partition,
// and never a lower one than it has seen.
func TestSessionToken_FakeGateway_CarriedFromEachResponseIntoTheNextReads(t *testing.T) {
	g := newGateway(t, false)
	s := storeFor(t, g.endpoint(), noRetries())
	ctx := t.Context()
	doc := idempotent.Document{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-1"}`)}
	g.setRead(reply{status: 200, body: `{"id":"a","orderId":"ord-1"}`})
	read := func(pk string) {
		t.Helper()
		if _, _, err := s.ReadDocument(ctx, pk, "a"); err != nil && !errors.Is(err, idempotent.ErrNotFound) {
			t.Fatal(err)
		}
	}

	read("ord-1") // nothing written yet: no token
	g.setBatch(batchReply(http.StatusOK, session("0:-1#12"), 201))
	if _, err := s.CreateBatch(ctx, "ord-1", []idempotent.Document{doc}); err != nil {
		t.Fatal(err)
	}
	read("ord-1") // the write's token
	read("ord-2") // another partition: none
	// A create refused with 409 carries the token of the state it
	// conflicted with: the write of another process.
	g.setBatch(batchReply(http.StatusConflict, session("0:-1#20"), 409))
	if _, err := s.CreateBatch(ctx, "ord-1", []idempotent.Document{doc}); !errors.Is(err, idempotent.ErrAlreadyExists) {
		t.Fatalf("CreateBatch = %v, want a conflict", err)
	}
	read("ord-1")
	// A read served by a replica that lags answers with a lower token,
	// which must not lower the one sent next.
	g.setRead(reply{status: 404, header: session("0:-1#15"), body: `{}`})
	read("ord-1")
	read("ord-1")

	want := []string{"", "0:-1#12", "", "0:-1#20", "0:-1#20", "0:-1#20"}
	if got := g.sentReadTokens(); !slices.Equal(got, want) {
		t.Errorf("session tokens sent on the reads = %q, want %q", got, want)
	}
	batches := g.sentBatches()
	if len(batches) != 2 || batches[0].sessionToken != "" || batches[1].sessionToken != "0:-1#12" {
		t.Errorf("batches = %+v; want the second to carry the first's session token", batches)
	}
}

// A 404 with sub-status 1002 comes from a replica that has not reached the
// session token: the document may exist, so it is transient, not missing.
func TestSessionToken_FakeGateway_ReadSessionNotAvailable_IsTransient(t *testing.T) {
	g := newGateway(t, false)
	g.setRead(reply{status: 404, header: map[string]string{"x-ms-substatus": "1002"}, body: `{}`})
	s := storeFor(t, g.endpoint(), noRetries())
	_, _, err := s.ReadDocument(t.Context(), "ord-1", "ord-1")
	if errors.Is(err, idempotent.ErrNotFound) || !idempotent.IsTransient(err) {
		t.Errorf("ReadDocument = %v; want transient, not ErrNotFound", err)
	}
}
