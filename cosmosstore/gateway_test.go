package cosmosstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// gateway is a hand-written fake of the Cosmos DB gateway: just enough HTTP
// for azcosmos to read the account, execute a transactional batch, and read
// and replace a document, with every answer chosen by the test. The store's mapping of real
// Cosmos DB answers that cosmium cannot produce (207 with 424s, 429, 503,
// request charges, activity ids, dropped connections) is tested through the
// real SDK against it. It says nothing about Cosmos DB's own behaviour.
type gateway struct {
	t   *testing.T
	srv *httptest.Server

	mu         sync.Mutex
	batch      reply   // the answer to every transactional batch
	read       reply   // the answer to a document read when reads is empty
	reads      []reply // the answers to the next document reads, in order
	replace    reply   // the answer to a document replace when replaces is empty
	replaces   []reply // the answers to the next document replaces, in order
	batches    []batchRequest
	replaced   []replaceRequest
	patch      reply   // the answer to a document patch when patches is empty
	patches    []reply // the answers to the next document patches, in order
	patched    []replaceRequest
	createDB   reply             // the answer to a database create
	createColl reply             // the answer to a container create
	readColl   reply             // the answer to a container read
	readDB     reply             // the answer to a database read
	createItem reply             // the answer to a single-document create
	deleteItem reply             // the answer to a document delete
	created    [][]byte          // the bodies of single-document creates
	deleted    []string          // the paths of document deletes
	bodies     map[string][]byte // the last request body per "METHOD path"
	readTokens []string          // the x-ms-session-token of each document read, "" for none
	priorities []string          // "METHOD path: x-ms-cosmos-priority-level" of every request

	// multiWrite, when set before the first request, makes the account
	// one with multiple write locations: two write regions, both served
	// here, and enableMultipleWriteLocations true.
	multiWrite bool

	// hangAccount, when set before the first request, holds the answer to
	// the account request until it is closed; accountRequested is closed
	// when that request arrives, and accountDisconnected records that the
	// client gave up on it first.
	hangAccount         chan struct{}
	accountRequested    chan struct{}
	accountOnce         sync.Once
	accountDisconnected bool
}

// reply is one canned HTTP answer.
type reply struct {
	status int
	header map[string]string
	body   string
	drop   bool // close the connection without answering
}

// batchRequest is what the SDK sent in one transactional batch.
type batchRequest struct {
	partitionKey string
	atomic       string
	sessionToken string
	ops          []struct {
		OperationType string          `json:"operationType"`
		ResourceBody  json.RawMessage `json:"resourceBody"`
	}
}

// replaceRequest is what the SDK sent in one document replace.
type replaceRequest struct {
	path         string // the document's path, unescaped
	partitionKey string
	ifMatch      string
	hasIfMatch   bool
	prefer       string
	body         []byte
}

func newGateway(t *testing.T, tls bool) *gateway {
	g := &gateway{t: t}
	g.srv = httptest.NewUnstartedServer(http.HandlerFunc(g.serve))
	// The certificate test makes the server log a failed handshake.
	g.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		g.srv.StartTLS()
	} else {
		g.srv.Start()
	}
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gateway) endpoint() string { return g.srv.URL + "/" }

func (g *gateway) setBatch(r reply) { g.mu.Lock(); g.batch = r; g.mu.Unlock() }
func (g *gateway) setRead(r reply)  { g.mu.Lock(); g.read = r; g.mu.Unlock() }

func (g *gateway) setReplace(r reply) { g.mu.Lock(); g.replace = r; g.mu.Unlock() }

// queueReads and queueReplaces set the answers to the next reads and
// replaces, in order; after them, the answers of setRead and setReplace.
func (g *gateway) queueReads(rs ...reply) {
	g.mu.Lock()
	g.reads = append(g.reads, rs...)
	g.mu.Unlock()
}
func (g *gateway) queueReplaces(rs ...reply) {
	g.mu.Lock()
	g.replaces = append(g.replaces, rs...)
	g.mu.Unlock()
}

func (g *gateway) setPatch(r reply) { g.mu.Lock(); g.patch = r; g.mu.Unlock() }

// queuePatches sets the answers to the next patches, in order; after them,
// the answer of setPatch.
func (g *gateway) queuePatches(rs ...reply) {
	g.mu.Lock()
	g.patches = append(g.patches, rs...)
	g.mu.Unlock()
}

func (g *gateway) sentPatches() []replaceRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]replaceRequest(nil), g.patched...)
}

func (g *gateway) sentReplaces() []replaceRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]replaceRequest(nil), g.replaced...)
}

// next returns the first queued reply, or else def.
func next(queue *[]reply, def reply) reply {
	if len(*queue) == 0 {
		return def
	}
	r := (*queue)[0]
	*queue = (*queue)[1:]
	return r
}

func (g *gateway) sentBatches() []batchRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]batchRequest(nil), g.batches...)
}

func (g *gateway) serve(w http.ResponseWriter, r *http.Request) {
	const docs = "/dbs/orders/colls/orders/docs"
	g.mu.Lock()
	g.priorities = append(g.priorities, r.Method+" "+r.URL.Path+": "+r.Header.Get("x-ms-cosmos-priority-level"))
	g.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		if g.hangAccount != nil {
			g.accountOnce.Do(func() { close(g.accountRequested) })
			select {
			case <-g.hangAccount:
			case <-r.Context().Done():
				g.mu.Lock()
				g.accountDisconnected = true
				g.mu.Unlock()
				return
			}
		}
		// The account: one region, whose endpoint is this server.
		loc := []map[string]string{{"name": "local", "databaseAccountEndpoint": g.endpoint()}}
		g.mu.Lock()
		multi := g.multiWrite
		g.mu.Unlock()
		if multi {
			loc = append(loc, map[string]string{"name": "remote", "databaseAccountEndpoint": g.endpoint()})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "fake", "writableLocations": loc, "readableLocations": loc,
			"enableMultipleWriteLocations": multi,
			"userConsistencyPolicy":        map[string]string{"defaultConsistencyLevel": "Session"},
		})
	case r.Method == http.MethodPost && r.URL.Path == docs && r.Header.Get("x-ms-cosmos-is-batch-request") != "":
		var br batchRequest
		br.partitionKey = r.Header.Get("x-ms-documentdb-partitionkey")
		br.atomic = r.Header.Get("x-ms-cosmos-batch-atomic")
		br.sessionToken = r.Header.Get("x-ms-session-token")
		if err := json.NewDecoder(r.Body).Decode(&br.ops); err != nil {
			g.t.Errorf("gateway: batch body: %v", err)
		}
		g.mu.Lock()
		g.batches = append(g.batches, br)
		rep := g.batch
		g.mu.Unlock()
		g.answer(w, rep)
	case r.Method == http.MethodPost && r.URL.Path == docs:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			g.t.Errorf("gateway: create body: %v", err)
		}
		g.mu.Lock()
		g.created = append(g.created, body)
		rep := g.createItem
		g.mu.Unlock()
		g.answer(w, rep)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, docs+"/"):
		g.mu.Lock()
		g.deleted = append(g.deleted, r.URL.Path)
		rep := g.deleteItem
		g.mu.Unlock()
		g.answer(w, rep)
	case r.Method == http.MethodGet && r.URL.Path == "/dbs/orders":
		g.mu.Lock()
		rep := g.readDB
		g.mu.Unlock()
		g.answer(w, rep)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, docs+"/"):
		g.mu.Lock()
		g.readTokens = append(g.readTokens, r.Header.Get("x-ms-session-token"))
		rep := next(&g.reads, g.read)
		g.mu.Unlock()
		g.answer(w, rep)
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, docs+"/"):
		body, err := io.ReadAll(r.Body)
		if err != nil {
			g.t.Errorf("gateway: replace body: %v", err)
		}
		ifMatch, hasIfMatch := r.Header["If-Match"]
		rr := replaceRequest{path: r.URL.Path, partitionKey: r.Header.Get("x-ms-documentdb-partitionkey"),
			hasIfMatch: hasIfMatch, prefer: r.Header.Get("Prefer"), body: body}
		if hasIfMatch {
			rr.ifMatch = ifMatch[0]
		}
		g.mu.Lock()
		g.replaced = append(g.replaced, rr)
		rep := next(&g.replaces, g.replace)
		g.mu.Unlock()
		g.answer(w, rep)
	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, docs+"/"):
		body, err := io.ReadAll(r.Body)
		if err != nil {
			g.t.Errorf("gateway: patch body: %v", err)
		}
		g.mu.Lock()
		g.patched = append(g.patched, replaceRequest{path: r.URL.Path, partitionKey: r.Header.Get("x-ms-documentdb-partitionkey"), prefer: r.Header.Get("Prefer"), body: body})
		rep := next(&g.patches, g.patch)
		g.mu.Unlock()
		g.answer(w, rep)
	case r.Method == http.MethodPost && (r.URL.Path == "/dbs" || r.URL.Path == "/dbs/orders/colls"):
		body, err := io.ReadAll(r.Body)
		if err != nil {
			g.t.Errorf("gateway: %v", err)
		}
		g.mu.Lock()
		if g.bodies == nil {
			g.bodies = make(map[string][]byte)
		}
		g.bodies[r.Method+" "+r.URL.Path] = body
		rep := g.createDB
		if r.URL.Path != "/dbs" {
			rep = g.createColl
		}
		g.mu.Unlock()
		g.answer(w, rep)
	case r.Method == http.MethodGet && r.URL.Path == "/dbs/orders/colls/orders":
		g.mu.Lock()
		rep := g.readColl
		g.mu.Unlock()
		g.answer(w, rep)
	default:
		g.t.Errorf("gateway: unexpected request %s %s", r.Method, r.URL)
		http.Error(w, "unexpected", http.StatusNotImplemented)
	}
}

func (g *gateway) answer(w http.ResponseWriter, rep reply) {
	if rep.drop {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			g.t.Errorf("gateway: hijack: %v", err)
			return
		}
		_ = conn.Close()
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

// noRetries makes the SDK return the first answer, so that each test sees
// exactly the reply it set up. In production the SDK retries 429, 503 and
// dropped connections itself before the store sees them.
func noRetries() *cosmosstore.ClientOptions {
	o := &cosmosstore.ClientOptions{}
	o.Retry = policy.RetryOptions{MaxRetries: -1}
	return o
}

func storeFor(t *testing.T, endpoint string, o *cosmosstore.ClientOptions) *cosmosstore.Store {
	t.Helper()
	c, err := cosmosstore.NewClientWithKey(endpoint, cosmiumtest.Key, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := cosmosstore.New(c, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// batchReply is a transactional batch answer with the given per-operation
// status codes.
func batchReply(httpStatus int, header map[string]string, codes ...int) reply {
	ops := make([]map[string]any, len(codes))
	for i, c := range codes {
		ops[i] = map[string]any{"statusCode": c, "requestCharge": 0}
	}
	b, _ := json.Marshal(ops)
	return reply{status: httpStatus, header: header, body: string(b)}
}

func TestCreateBatch_FakeGateway_SendsOneAtomicBatchUnderTheOrderID(t *testing.T) {
	g := newGateway(t, false)
	g.setBatch(batchReply(http.StatusOK, nil, 201, 201))
	s := storeFor(t, g.endpoint(), noRetries())
	w := newWrite("ord-77", "cust-1")
	if err := writeOrder(t.Context(), s, w); err != nil {
		t.Fatalf("CreateBatch = %v", err)
	}
	sent := g.sentBatches()
	if len(sent) != 1 {
		t.Fatalf("sent %d batches, want 1", len(sent))
	}
	b := sent[0]
	if b.partitionKey != `["ord-77"]` || !strings.EqualFold(b.atomic, "true") {
		t.Errorf("partition key header %q, atomic header %q; want %q, true", b.partitionKey, b.atomic, `["ord-77"]`)
	}
	docs, err := w.Documents()
	if err != nil {
		t.Fatal(err)
	}
	if len(b.ops) != len(docs) {
		t.Fatalf("batch has %d operations, want %d", len(b.ops), len(docs))
	}
	for i, op := range b.ops {
		var got, want map[string]any
		if err := json.Unmarshal(op.ResourceBody, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(docs[i].Body, &want); err != nil {
			t.Fatal(err)
		}
		if op.OperationType != "Create" || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("operation %d = %s %s, want Create %s", i, op.OperationType, op.ResourceBody, docs[i].Body)
		}
	}
}

func TestCreateBatch_FakeGateway_StatusMapping(t *testing.T) {
	activity := map[string]string{"x-ms-activity-id": "act-42"}
	tests := []struct {
		name      string
		reply     reply
		wantIs    error // nil: a permanent error, or success if wantNil
		wantNil   bool
		wantIndex int
		wantCode  int
	}{
		{name: "committed", reply: batchReply(200, nil, 201, 201), wantNil: true},
		{name: "207 conflict on the order", reply: batchReply(207, activity, 409, 424), wantIs: idempotent.ErrAlreadyExists, wantIndex: 0, wantCode: 409},
		{name: "207 throttled operation", reply: batchReply(207, activity, 429, 424), wantIs: idempotent.ErrTransient, wantIndex: 0, wantCode: 429},
		{name: "207 bad request", reply: batchReply(207, activity, 424, 400), wantIs: idempotent.ErrRejected, wantIndex: 1, wantCode: 400},
		{name: "whole batch throttled", reply: reply{status: 429, header: activity, body: `{"code":"TooManyRequests"}`}, wantIs: idempotent.ErrTransient, wantIndex: -1, wantCode: 429},
		{name: "whole batch unavailable", reply: reply{status: 503, header: activity, body: `{}`}, wantIs: idempotent.ErrTransient, wantIndex: -1, wantCode: 503},
		{name: "whole batch timed out", reply: reply{status: 408, header: activity, body: `{}`}, wantIs: idempotent.ErrTransient, wantIndex: -1, wantCode: 408},
		{name: "whole batch retry-with", reply: reply{status: 449, header: activity, body: `{}`}, wantIs: idempotent.ErrTransient, wantIndex: -1, wantCode: 449},
		{name: "whole batch too large", reply: reply{status: 413, header: activity, body: `{}`}, wantIs: idempotent.ErrRejected, wantIndex: -1, wantCode: 413},
		{name: "forbidden", reply: reply{status: 403, header: activity, body: `{}`}, wantIndex: -1, wantCode: 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setBatch(tt.reply)
			s := storeFor(t, g.endpoint(), noRetries())
			err := writeOrder(t.Context(), s, newWrite("ord-1", "cust-1"))
			if tt.wantNil {
				if err != nil {
					t.Fatalf("CreateBatch = %v, want nil", err)
				}
				return
			}
			var e *cosmosstore.Error
			if !errors.As(err, &e) {
				t.Fatalf("CreateBatch = %v (%T), want *cosmosstore.Error", err, err)
			}
			for _, sentinel := range []error{idempotent.ErrAlreadyExists, idempotent.ErrNotFound, idempotent.ErrPreconditionFailed, idempotent.ErrTransient, idempotent.ErrRejected} {
				if got, want := errors.Is(err, sentinel), sentinel == tt.wantIs; got != want {
					t.Errorf("errors.Is(err, %v) = %v, want %v; err = %v", sentinel, got, want, err)
				}
			}
			if e.Index != tt.wantIndex || e.StatusCode != tt.wantCode || e.ActivityID != "act-42" {
				t.Errorf("Index, StatusCode, ActivityID = %d, %d, %q; want %d, %d, %q", e.Index, e.StatusCode, e.ActivityID, tt.wantIndex, tt.wantCode, "act-42")
			}
		})
	}
}

func TestReadOrder_FakeGateway_StatusMapping(t *testing.T) {
	tests := []struct {
		name   string
		reply  reply
		wantIs error
	}{
		{name: "not found", reply: reply{status: 404, body: `{}`}, wantIs: idempotent.ErrNotFound},
		{name: "container not found", reply: reply{status: 404, header: map[string]string{"x-ms-substatus": "1003"}, body: `{}`}},
		{name: "throttled", reply: reply{status: 429, body: `{}`}, wantIs: idempotent.ErrTransient},
		{name: "unauthorized", reply: reply{status: 401, body: `{}`}},
		{name: "not an order", reply: reply{status: 200, body: `{"id":"ord-1","orderId":"ord-1","type":"event"}`}},
		{name: "not JSON", reply: reply{status: 200, body: `<html>`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setRead(tt.reply)
			s := storeFor(t, g.endpoint(), noRetries())
			_, err := order.ReadOrder(t.Context(), s, "ord-1")
			var e *cosmosstore.Error
			// A body the store read is decoded by order.ReadOrder, whose
			// errors are its own; a status is the store's *Error.
			if tt.reply.status != 200 && !errors.As(err, &e) || err == nil {
				t.Fatalf("ReadOrder error = %v (%T), want *cosmosstore.Error", err, err)
			}
			for _, sentinel := range []error{idempotent.ErrAlreadyExists, idempotent.ErrNotFound, idempotent.ErrPreconditionFailed, idempotent.ErrTransient, idempotent.ErrRejected} {
				if got, want := errors.Is(err, sentinel), sentinel == tt.wantIs; got != want {
					t.Errorf("errors.Is(err, %v) = %v, want %v; err = %v", sentinel, got, want, err)
				}
			}
		})
	}
}

func TestRequestCharge_FakeGateway_AddsEveryCallIncludingFailures(t *testing.T) {
	g := newGateway(t, false)
	s := storeFor(t, g.endpoint(), noRetries())
	charge := func(ru string) map[string]string { return map[string]string{"x-ms-request-charge": ru} }
	stored, err := json.Marshal(newWrite("ord-1", "cust-1").Order)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		call func() error
		want float64 // the running total after the call
	}{
		{"committed batch", func() error {
			g.setBatch(batchReply(200, charge("10.5"), 201, 201))
			err := writeOrder(t.Context(), s, newWrite("ord-1", "cust-1"))
			return err
		}, 10.5},
		{"conflicting batch", func() error {
			g.setBatch(batchReply(207, charge("2.25"), 409, 424))
			err := writeOrder(t.Context(), s, newWrite("ord-1", "cust-1"))
			return err
		}, 12.75},
		{"read", func() error {
			g.setRead(reply{status: 200, header: charge("1"), body: string(stored)})
			_, err := order.ReadOrder(t.Context(), s, "ord-1")
			return err
		}, 13.75},
		{"failed read", func() error {
			g.setRead(reply{status: 404, header: charge("1.25"), body: `{}`})
			_, err := order.ReadOrder(t.Context(), s, "ord-2")
			return err
		}, 15},
		{"throttled batch", func() error {
			g.setBatch(reply{status: 429, header: charge("0.5"), body: `{}`})
			err := writeOrder(t.Context(), s, newWrite("ord-3", "cust-1"))
			return err
		}, 15.5},
		{"batch without a header: the operations' charges", func() error {
			g.setBatch(reply{status: 200, body: `[{"statusCode":201,"requestCharge":2.5},{"statusCode":201,"requestCharge":3.5}]`})
			err := writeOrder(t.Context(), s, newWrite("ord-4", "cust-1"))
			return err
		}, 21.5},
	}
	if got := s.RequestCharge(); got != 0 {
		t.Fatalf("RequestCharge of a new store = %v, want 0", got)
	}
	for _, step := range steps {
		err := step.call()
		if got := s.RequestCharge(); got != step.want {
			t.Fatalf("after %s (err %v): RequestCharge = %v, want %v", step.name, err, got, step.want)
		}
	}
}

func TestRequestCharge_FakeGateway_ConcurrentCalls(t *testing.T) {
	g := newGateway(t, false)
	g.setBatch(batchReply(200, map[string]string{"x-ms-request-charge": "0.25"}, 201, 201))
	s := storeFor(t, g.endpoint(), noRetries())
	const calls = 40
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if err := writeOrder(context.Background(), s, newWrite(fmt.Sprintf("ord-%d", i), "cust-1")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, want := s.RequestCharge(), calls*0.25; got != want {
		t.Errorf("RequestCharge = %v, want %v", got, want)
	}
}

func TestCreateBatch_ClosedPort_IsTransient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String() + "/"
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s := storeFor(t, endpoint, noRetries())
	err = writeOrder(t.Context(), s, newWrite("ord-1", "cust-1"))
	if !errors.Is(err, idempotent.ErrTransient) || !idempotent.IsTransient(err) {
		t.Errorf("CreateBatch on a closed port = %v, want a transient error", err)
	}
	var netErr net.Error
	if !errors.As(err, &netErr) {
		t.Errorf("CreateBatch on a closed port = %v, want the net.Error in the chain", err)
	}
	_, err = order.ReadOrder(t.Context(), s, "ord-1")
	if !errors.Is(err, idempotent.ErrTransient) || errors.Is(err, idempotent.ErrNotFound) {
		t.Errorf("ReadOrder on a closed port = %v, want transient and not ErrNotFound", err)
	}
}

func TestCreateBatch_FakeGateway_DroppedConnection_IsTransient(t *testing.T) {
	g := newGateway(t, false)
	g.setBatch(reply{drop: true})
	s := storeFor(t, g.endpoint(), noRetries())
	err := writeOrder(t.Context(), s, newWrite("ord-1", "cust-1"))
	if !errors.Is(err, idempotent.ErrTransient) {
		t.Errorf("CreateBatch with a dropped connection = %v, want ErrTransient", err)
	}
}

func TestCreateBatch_FakeGateway_ContextEnds(t *testing.T) {
	g := newGateway(t, false)
	g.setBatch(batchReply(200, nil, 201, 201))
	s := storeFor(t, g.endpoint(), noRetries())

	past, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
	defer cancel()
	err := writeOrder(past, s, newWrite("ord-1", "cust-1"))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, idempotent.ErrTransient) {
		t.Errorf("CreateBatch after the deadline = %v, want DeadlineExceeded and ErrTransient", err)
	}

	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	err = writeOrder(canceled, s, newWrite("ord-1", "cust-1"))
	if !errors.Is(err, context.Canceled) || errors.Is(err, idempotent.ErrTransient) {
		t.Errorf("CreateBatch after cancel = %v, want context.Canceled and not ErrTransient", err)
	}
}

func TestInsecureSkipVerify_FakeGatewayWithSelfSignedCertificate(t *testing.T) {
	g := newGateway(t, true)
	stored, err := json.Marshal(newWrite("ord-1", "cust-1").Order)
	if err != nil {
		t.Fatal(err)
	}
	g.setRead(reply{status: 200, body: string(stored)})

	t.Run("verified by default", func(t *testing.T) {
		s := storeFor(t, g.endpoint(), noRetries())
		_, err := order.ReadOrder(t.Context(), s, "ord-1")
		if err == nil || idempotent.IsTransient(err) {
			t.Fatalf("ReadOrder from a self-signed server = %v, want a permanent certificate error", err)
		}
	})
	t.Run("skipped", func(t *testing.T) {
		o := noRetries()
		o.InsecureSkipVerify = true
		s := storeFor(t, g.endpoint(), o)
		doc, err := order.ReadOrder(t.Context(), s, "ord-1")
		if err != nil || doc.OrderID != "ord-1" {
			t.Fatalf("ReadOrder = %+v, %v; want the order", doc, err)
		}
	})
	t.Run("cannot combine with a transport", func(t *testing.T) {
		o := noRetries()
		o.InsecureSkipVerify = true
		o.Transport = http.DefaultClient
		if _, err := cosmosstore.NewClientWithKey(g.endpoint(), cosmiumtest.Key, o); err == nil {
			t.Fatal("NewClientWithKey accepted InsecureSkipVerify with a custom Transport")
		}
	})
}

// Cosmium v0.1.20 neither keeps nor echoes the container's TTL, so what
// CreateDatabaseAndContainer asks for is checked on the wire.
func TestCreateDatabaseAndContainer_FakeGateway_SendsPartitionKeyAndTTL_NotFaithfulInCosmium(t *testing.T) {
	g := newGateway(t, false)
	g.createDB = reply{status: 201, body: `{"id":"orders"}`}
	g.createColl = reply{status: 201, body: `{"id":"orders"}`}
	c, err := cosmosstore.NewClientWithKey(g.endpoint(), cosmiumtest.Key, noRetries())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), c, "orders", "orders", "/tenantId"); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	body := g.bodies["POST /dbs/orders/colls"]
	g.mu.Unlock()
	var got struct {
		ID           string `json:"id"`
		DefaultTTL   *int   `json:"defaultTtl"`
		PartitionKey struct {
			Kind    string   `json:"kind"`
			Paths   []string `json:"paths"`
			Version int      `json:"version"`
		} `json:"partitionKey"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("container create body %q: %v", body, err)
	}
	pk := got.PartitionKey
	if got.ID != "orders" || got.DefaultTTL == nil || *got.DefaultTTL != -1 ||
		pk.Kind != "Hash" || pk.Version != 2 || len(pk.Paths) != 1 || pk.Paths[0] != "/tenantId" {
		t.Errorf("container create body = %s; want id orders, defaultTtl -1, partition key Hash v2 [/tenantId], the path it was given", body)
	}
}

func TestCreateDatabaseAndContainer_FakeGateway_Errors(t *testing.T) {
	conflict := reply{status: 409, body: `{"code":"Conflict"}`}
	tests := []struct {
		name                           string
		createDB, createColl, readColl reply
		wantErr                        bool
	}{
		{name: "both exist, right partition key", createDB: conflict, createColl: conflict,
			readColl: reply{status: 200, body: `{"id":"orders","partitionKey":{"paths":["/orderId"],"kind":"Hash","version":2}}`}},
		{name: "container exists with a positive default TTL", createDB: conflict, createColl: conflict, wantErr: true,
			readColl: reply{status: 200, body: `{"id":"orders","defaultTtl":3600,"partitionKey":{"paths":["/orderId"],"kind":"Hash","version":2}}`}},
		{name: "container exists with default TTL -1", createDB: conflict, createColl: conflict,
			readColl: reply{status: 200, body: `{"id":"orders","defaultTtl":-1,"partitionKey":{"paths":["/orderId"],"kind":"Hash","version":2}}`}},
		{name: "container exists with another partition key", createDB: conflict, createColl: conflict, wantErr: true,
			readColl: reply{status: 200, body: `{"id":"orders","partitionKey":{"paths":["/id"],"kind":"Hash","version":2}}`}},
		{name: "database create forbidden", createDB: reply{status: 403, body: `{}`}, wantErr: true},
		{name: "container create forbidden", createDB: conflict, createColl: reply{status: 403, body: `{}`}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.createDB, g.createColl, g.readColl = tt.createDB, tt.createColl, tt.readColl
			c, err := cosmosstore.NewClientWithKey(g.endpoint(), cosmiumtest.Key, noRetries())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			err = cosmosstore.CreateDatabaseAndContainer(t.Context(), c, "orders", "orders", order.PartitionKeyPath)
			if (err != nil) != tt.wantErr {
				t.Errorf("CreateDatabaseAndContainer = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}
