package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// body returns the JSON of a document of partition pk with extra fields,
// given as raw JSON members (`"ttl":0`).
func body(pk, id string, extra ...string) []byte {
	b := fmt.Sprintf(`{"id":%q,"orderId":%q`, id, pk)
	for _, e := range extra {
		b += "," + e
	}
	return []byte(b + "}")
}

// padded returns a document of partition pk whose compact JSON is n bytes
// long.
func padded(pk, id string, n int) idempotent.Document {
	b := body(pk, id, `"pad":""`)
	pad := n - len(b)
	return idempotent.Document{ID: id, Body: body(pk, id, `"pad":"`+strings.Repeat("x", pad)+`"`)}
}

// checkStatus fails the test unless err is a *memstore.StatusError with the
// status, sub-status and index, matching exactly the sentinel want (nil:
// none of them).
func checkStatus(t *testing.T, err error, status, subStatus, index int, want error) {
	t.Helper()
	var se *memstore.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want a *memstore.StatusError", err, err)
	}
	if se.StatusCode != status || se.SubStatus != subStatus || se.Index != index {
		t.Errorf("status, sub-status, index = %d, %d, %d; want %d, %d, %d (%v)", se.StatusCode, se.SubStatus, se.Index, status, subStatus, index, err)
	}
	for _, s := range []error{idempotent.ErrRejected, idempotent.ErrAlreadyExists, idempotent.ErrNotFound, idempotent.ErrPreconditionFailed, idempotent.ErrTransient} {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("errors.Is(err, %v) = %v, want %v (%v)", s, got, s == want, err)
		}
	}
	if !strings.Contains(err.Error(), fmt.Sprint(status)) {
		t.Errorf("error text %q does not name the status %d", err, status)
	}
}

// Each rule of Cosmos DB for NoSQL that memstore enforces on a transactional
// batch, one row per rule. The offending operation follows a valid one, so
// each row also shows that a failed batch writes nothing and which operation
// is reported.
func TestCreateBatch_RejectsWhatCosmosDBRejects(t *testing.T) {
	const pk = "ord-1"
	valid := doc(pk, "valid")
	with := func(d idempotent.Document) []idempotent.Document { return []idempotent.Document{valid, d} }
	withBody := func(id string, extra ...string) []idempotent.Document {
		return with(idempotent.Document{ID: id, Body: body(pk, id, extra...)})
	}
	many := func(n int) []idempotent.Document {
		out := make([]idempotent.Document, n)
		for i := range out {
			out[i] = doc(pk, fmt.Sprint("d", i))
		}
		return out
	}
	const mb2 = 2 << 20
	tests := []struct {
		name      string
		docs      []idempotent.Document
		status    int // 0: accepted
		subStatus int
		index     int
	}{
		{name: "id containing /", docs: with(doc(pk, "a/b")), status: 400, index: 1},
		{name: `id containing \`, docs: with(doc(pk, `a\b`)), status: 400, index: 1},
		{name: "id containing ?", docs: with(doc(pk, "a?b")), status: 400, index: 1},
		{name: "id containing #", docs: with(doc(pk, "a#b")), status: 400, index: 1},
		{name: "id of 256 characters", docs: with(doc(pk, strings.Repeat("a", 256))), status: 400, index: 1},
		{name: "empty id", docs: with(doc(pk, "")), status: 400, index: 1},
		{name: "id that is not a string", docs: with(idempotent.Document{ID: "", Body: []byte(`{"id":7,"orderId":"ord-1"}`)}), status: 400, index: 1},
		{name: "same id twice in one batch", docs: with(doc(pk, "valid")), status: 400, index: 1},
		{name: "partition key value of another partition", docs: with(doc("ord-2", "other")), status: 400, subStatus: 1001, index: 1},
		{name: "no partition key value", docs: with(idempotent.Document{ID: "x", Body: []byte(`{"id":"x"}`)}), status: 400, subStatus: 1001, index: 1},
		{name: "partition key value that is not a string", docs: with(idempotent.Document{ID: "x", Body: []byte(`{"id":"x","orderId":1}`)}), status: 400, subStatus: 1001, index: 1},
		{name: "not a JSON object", docs: with(idempotent.Document{ID: "x", Body: []byte(`["x"]`)}), status: 400, index: 1},
		{name: "ttl 0", docs: withBody("x", `"ttl":0`), status: 400, index: 1},
		{name: "ttl below -1", docs: withBody("x", `"ttl":-2`), status: 400, index: 1},
		{name: "ttl null", docs: withBody("x", `"ttl":null`), status: 400, index: 1},
		{name: "ttl not an integer", docs: withBody("x", `"ttl":1.5`), status: 400, index: 1},
		{name: "ttl a string", docs: withBody("x", `"ttl":"60"`), status: 400, index: 1},
		{name: "ttl over 2147483647", docs: withBody("x", `"ttl":2147483648`), status: 400, index: 1},
		{name: "101 operations", docs: many(101), status: 400, index: -1},
		{name: "batch payload over 2 MB", docs: []idempotent.Document{padded(pk, "a", mb2/2), padded(pk, "b", mb2/2)}, status: 413, index: -1},
		{name: "document over 2 MB", docs: with(padded(pk, "big", mb2+1)), status: 413, index: -1},
		{name: "document over 2 MB with its system properties", docs: []idempotent.Document{padded(pk, "big", mb2-100)}, status: 413, index: 0},

		{name: "id of 255 characters is accepted", docs: with(doc(pk, strings.Repeat("a", 255)))},
		{name: "id of 255 four-byte characters is accepted", docs: with(doc(pk, strings.Repeat("😀", 255)))},
		{name: "100 operations are accepted", docs: many(100)},
		{name: "ttl -1 is accepted", docs: withBody("x", `"ttl":-1`)},
		{name: "ttl 2147483647 is accepted", docs: withBody("x", `"ttl":2147483647`)},
		{name: "document of 1.9 MB is accepted", docs: []idempotent.Document{padded(pk, "a", mb2-1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New("/orderId")
			if _, err := s.CreateBatch(t.Context(), "ord-0", docs("ord-0", "existing")); err != nil {
				t.Fatal(err)
			}
			_, err := s.CreateBatch(t.Context(), pk, tt.docs)
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("CreateBatch = %v, want success", err)
				}
				if got := len(s.Items()); got != 1+len(tt.docs) {
					t.Errorf("%d documents stored, want %d", got, 1+len(tt.docs))
				}
				return
			}
			want := idempotent.ErrRejected
			checkStatus(t, err, tt.status, tt.subStatus, tt.index, want)
			var se *memstore.StatusError
			if errors.As(err, &se) && tt.index >= 0 && se.ID != tt.docs[tt.index].ID {
				t.Errorf("StatusError.ID = %q, want %q", se.ID, tt.docs[tt.index].ID)
			}
			if items := s.Items(); len(items) != 1 {
				t.Errorf("a refused batch wrote: %d documents stored, want 1", len(items))
			}
			// CreateDocuments and CreateOrder's path refuse the same.
			if _, err := s.CreateBatch(t.Context(), pk, tt.docs); !errors.Is(err, idempotent.ErrRejected) {
				t.Errorf("CreateDocuments = %v, want ErrRejected", err)
			}
		})
	}
}

// A conflict is reported on the operation whose id exists, as Cosmos DB
// reports it (409, the others 424), after the content checks.
func TestCreateBatch_ConflictAfterContentChecks(t *testing.T) {
	s := memstore.New("/orderId")
	if _, err := s.CreateBatch(t.Context(), "p", docs("p", "a")); err != nil {
		t.Fatal(err)
	}
	_, err := s.CreateBatch(t.Context(), "p", []idempotent.Document{doc("p", "a"), doc("p", "b#")})
	checkStatus(t, err, 400, 0, 1, idempotent.ErrRejected)
	_, err = s.CreateBatch(t.Context(), "p", []idempotent.Document{doc("p", "b"), doc("p", "a")})
	checkStatus(t, err, 409, 0, 1, idempotent.ErrAlreadyExists)
	if len(s.Items()) != 1 {
		t.Errorf("failed batches wrote documents: %+v", s.Items())
	}
}

// An id argument that differs from the body's id is the caller's bug:
// Cosmos DB would store the document under the body's id.
func TestCreateBatch_IDNotTheBodysID_IsAnError(t *testing.T) {
	s := memstore.New("/orderId")
	_, err := s.CreateBatch(t.Context(), "p", []idempotent.Document{{ID: "a", Body: body("p", "b")}})
	var se *memstore.StatusError
	if err == nil || errors.As(err, &se) || errors.Is(err, idempotent.ErrRejected) {
		t.Fatalf("CreateBatch = %v, want a plain error", err)
	}
	if len(s.Items()) != 0 {
		t.Error("wrote a document whose id is not its body's")
	}
}

// azcosmos marshals a batch itself and refuses a body that is not JSON
// before it sends anything: no status, and not the message's fault.
func TestCreateBatch_NotJSON_IsAnErrorWithoutStatus(t *testing.T) {
	s := memstore.New("/orderId")
	_, err := s.CreateBatch(t.Context(), "p", []idempotent.Document{doc("p", "a"), {ID: "x", Body: []byte(`{"id":"x",`)}})
	var se *memstore.StatusError
	if err == nil || errors.As(err, &se) || errors.Is(err, idempotent.ErrRejected) {
		t.Fatalf("CreateBatch = %v, want a plain error", err)
	}
	if len(s.Items()) != 0 {
		t.Error("wrote part of a batch")
	}
}

func TestCreateBatch_Empty_IsAnError(t *testing.T) {
	if _, err := memstore.New("/orderId").CreateBatch(t.Context(), "p", nil); err == nil {
		t.Fatal("CreateBatch of no documents succeeded")
	}
}

// Each rule on the single-document calls, one row per rule.
func TestReplaceDocument_RejectsWhatCosmosDBRejects(t *testing.T) {
	const pk = "ord-1"
	tests := []struct {
		name      string
		d         idempotent.Document
		status    int
		subStatus int
	}{
		{name: "id containing /", d: doc(pk, "a/b"), status: 400},
		{name: "id of 256 characters", d: doc(pk, strings.Repeat("a", 256)), status: 400},
		{name: "partition key value of another partition", d: idempotent.Document{ID: "a", Body: body("ord-2", "a")}, status: 400, subStatus: 1001},
		{name: "ttl 0", d: idempotent.Document{ID: "a", Body: body(pk, "a", `"ttl":0`)}, status: 400},
		{name: "ttl below -1", d: idempotent.Document{ID: "a", Body: body(pk, "a", `"ttl":-5`)}, status: 400},
		{name: "document over 2 MB", d: padded(pk, "a", 2<<20+1), status: 413},
		{name: "not JSON (the SDK sends a replace's bytes as they are)", d: idempotent.Document{ID: "a", Body: []byte(`{"id":"a",`)}, status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New("/orderId")
			if _, err := s.CreateBatch(t.Context(), pk, docs(pk, "a")); err != nil {
				t.Fatal(err)
			}
			before, _ := s.Get(pk, "a")
			_, err := s.ReplaceDocument(t.Context(), pk, tt.d, "")
			checkStatus(t, err, tt.status, tt.subStatus, -1, idempotent.ErrRejected)
			if after, _ := s.Get(pk, "a"); after.ETag != before.ETag || string(after.Body) != string(before.Body) {
				t.Errorf("a refused replace changed the document: %s", after.Body)
			}
		})
	}
}

func TestReadDocument_IllegalID_400(t *testing.T) {
	for _, id := range []string{"a/b", `a\b`, "a?b", "a#b", strings.Repeat("a", 256), ""} {
		_, _, err := memstore.New("/orderId").ReadDocument(t.Context(), "p", id)
		checkStatus(t, err, 400, 0, -1, idempotent.ErrRejected)
	}
}

// Every status a memstore error carries matches the sentinel of package
// order that cosmosstore matches for the same status.
func TestStatusError_MatchesTheOrderSentinels(t *testing.T) {
	tests := []struct {
		status int
		want   error
	}{
		{http.StatusBadRequest, idempotent.ErrRejected},
		{http.StatusRequestEntityTooLarge, idempotent.ErrRejected},
		{http.StatusConflict, idempotent.ErrAlreadyExists},
		{http.StatusPreconditionFailed, idempotent.ErrPreconditionFailed},
		{http.StatusNotFound, idempotent.ErrNotFound},
		{http.StatusFailedDependency, nil},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			err := fmt.Errorf("wrapped: %w", &memstore.StatusError{Op: "create documents", PartitionKey: "p", Index: 0, StatusCode: tt.status})
			checkStatus(t, err, tt.status, 0, 0, tt.want)
		})
	}
}

// The statuses of the existing paths, now in a *StatusError.
func TestStatusError_OfMissingAndMovedDocuments(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	_, _, err := s.ReadDocument(ctx, "p", "a")
	checkStatus(t, err, 404, 0, -1, idempotent.ErrNotFound)
	_, err = order.ReadOrder(ctx, s, "a")
	checkStatus(t, err, 404, 0, -1, idempotent.ErrNotFound)
	_, err = s.ReplaceDocument(ctx, "p", doc("p", "a"), "")
	checkStatus(t, err, 404, 0, -1, idempotent.ErrNotFound)
	if _, err := s.CreateBatch(ctx, "p", docs("p", "a")); err != nil {
		t.Fatal(err)
	}
	_, err = s.ReplaceDocument(ctx, "p", doc("p", "a"), "stale")
	checkStatus(t, err, 412, 0, -1, idempotent.ErrPreconditionFailed)
}

func TestPingAndCheck(t *testing.T) {
	s := memstore.New("/orderId")
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping = %v", err)
	}
	res, err := s.Check(t.Context())
	if err != nil || !res.ETagsHonoured {
		t.Errorf("Check = %+v, %v; want ETags honoured", res, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping after cancel = %v", err)
	}
	if _, err := s.Check(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Check after cancel = %v", err)
	}
}
