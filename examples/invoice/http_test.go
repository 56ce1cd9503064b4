package invoice_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// request is one request to the invoice endpoint, the faults it meets,
// and what it must be answered.
type request struct {
	method    string // "" is POST
	key       string // the Idempotency-Key header; "" is the case's invoice id, "-" none
	body      string // %s is the case's invoice id; "" is the valid invoice
	later     time.Duration
	createErr error
	mailErr   error
	crash     bool // the process crashes right after the mail service answered
	down      bool // every store call fails transiently
	status    int
	replayed  bool // answered with the stored response and Idempotent-Replayed: true
	retry     bool // a Retry-After header
	calls     int  // the mail service's calls so far
	mails     int  // the mails really sent so far
}

// serve sends one request to h and returns the response.
func serve(t *testing.T, h http.Handler, method, key, reqBody string) *http.Response {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), method, "/invoices", strings.NewReader(reqBody))
	if key != "-" {
		r.Header.Set(invoice.HeaderIdempotencyKey, key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHandler: every answer of the invoice endpoint, on the in-memory model
// and on cosmium: created, the stored response replayed, a key reused
// (422), in progress (409), invalid (400), a dependency failed (503, never
// 500), a crash between the mail and its completed record, with exactly
// one mail per invoice.
func TestHandler(t *testing.T) {
	transient := fmt.Errorf("503 from the mail service: %w", idempotent.ErrTransient)
	refused := fmt.Errorf("422 from the mail service: %w", idempotent.ErrEffectRejected)
	storeDown := fmt.Errorf("503 Service Unavailable: %w", idempotent.ErrTransient)
	reordered := `{"issuedAt":"2026-11-30T11:00:00+01:00", "amountMinor":1999,"currency":"EUR","customerId":"cust-42","invoiceId":"%s"}`
	created := request{status: http.StatusCreated, calls: 1, mails: 1}
	tests := []struct {
		name     string
		requests []request
	}{
		{"created: 201, one mail", []request{created}},
		{"repeated: the stored 201 replayed, no call", []request{created,
			{status: http.StatusCreated, replayed: true, calls: 1, mails: 1},
			{status: http.StatusCreated, replayed: true, calls: 1, mails: 1}}},
		{"repeated in other JSON: the first response replayed byte for byte", []request{created,
			{body: reordered, status: http.StatusCreated, replayed: true, calls: 1, mails: 1}}},
		{"the key reused for another invoice: 422, no mail for it", []request{created,
			{body: body("%s", "amountMinor", "2500"), status: http.StatusUnprocessableEntity, calls: 1, mails: 1}}},
		{"the key as the draft's sf-string, quoted", []request{{key: `"%s"`, status: http.StatusCreated, calls: 1, mails: 1}}},
		{"no Idempotency-Key: 400, nothing stored", []request{{key: "-", status: http.StatusBadRequest}}},
		{"an Idempotency-Key that is not the invoiceId: 400", []request{{key: "inv-other", status: http.StatusBadRequest}}},
		{"a malformed Idempotency-Key: 400", []request{{key: "inv/1", status: http.StatusBadRequest}}},
		{"an invalid invoice: 400", []request{{body: body("%s", "currency", `"eur"`), status: http.StatusBadRequest}}},
		{"not JSON: 400", []request{{body: `{"invoiceId":`, status: http.StatusBadRequest}}},
		{"a body over the limit: 413", []request{{body: body("%s", "customerId", `"`+strings.Repeat("x", 2000)+`"`), status: http.StatusRequestEntityTooLarge}}},
		{"GET: 405", []request{{method: http.MethodGet, status: http.StatusMethodNotAllowed}}},
		{"the store fails: 503 with Retry-After; the retry creates", []request{
			{createErr: storeDown, status: http.StatusServiceUnavailable, retry: true},
			created}},
		{"the mail service fails: 503; the retry mails once and replays the stored 201", []request{
			{mailErr: transient, status: http.StatusServiceUnavailable, retry: true, calls: 1},
			{status: http.StatusCreated, replayed: true, calls: 2, mails: 1},
			{status: http.StatusCreated, replayed: true, calls: 2, mails: 1}}},
		{"the store is down for a repeated request: 503, never 500", []request{created,
			{down: true, status: http.StatusServiceUnavailable, retry: true, calls: 1, mails: 1},
			{status: http.StatusCreated, replayed: true, calls: 1, mails: 1}}},
		{"the mail service refuses the mail: 502", []request{
			{mailErr: refused, status: http.StatusBadGateway, calls: 1}}},
		{"a crash between the mail and its completed record: 409 until the lease ends, then the mail resumed with the same key and the 201 replayed", []request{
			{crash: true, status: http.StatusServiceUnavailable, retry: true, calls: 1, mails: 1},
			{status: http.StatusConflict, retry: true, calls: 1, mails: 1},
			{later: lease, status: http.StatusCreated, replayed: true, calls: 2, mails: 1},
			{status: http.StatusCreated, replayed: true, calls: 2, mails: 1}}},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					id := fmt.Sprintf("inv-http-%s-%02d", b.name, i)
					store := &docStore{DocumentStore: b.open(t)}
					svc, clk := newMailService(), newClock()
					h, err := invoice.NewHandler(store, invoice.HandlerOptions{MaxBody: 1024, Timeout: 5 * time.Second,
						Mail: invoice.NewMailEffect(store, invoice.MailOptions{Mailer: svc, Lease: lease, Owner: "web-1", Now: clk.Now})})
					if err != nil {
						t.Fatal(err)
					}
					var first string // the body of the first 201
					for n, rq := range tt.requests {
						clk.Add(rq.later)
						store.down.Store(rq.down)
						store.setCreateErr(rq.createErr)
						svc.mu.Lock()
						svc.fail, svc.afterSend = rq.mailErr, nil
						if rq.crash {
							svc.afterSend = func() { store.down.Store(true) }
						}
						svc.mu.Unlock()
						key := strings.ReplaceAll(cmpOr(rq.key, "%s"), "%s", id)
						resp := serve(t, h, cmpOr(rq.method, http.MethodPost), key, strings.ReplaceAll(cmpOr(rq.body, body("%s")), "%s", id))
						got := readBody(t, resp)
						if resp.StatusCode != rq.status {
							t.Fatalf("request %d: %d %s, want %d", n+1, resp.StatusCode, got, rq.status)
						}
						if replayed := resp.Header.Get(invoice.HeaderReplayed) == "true"; replayed != rq.replayed {
							t.Errorf("request %d: replayed %v, want %v", n+1, replayed, rq.replayed)
						}
						if retry := resp.Header.Get("Retry-After"); (retry == "1") != rq.retry {
							t.Errorf("request %d: Retry-After %q, want it: %v", n+1, retry, rq.retry)
						}
						if calls, mails := svc.counts(); calls != rq.calls || mails != rq.mails {
							t.Errorf("request %d: %d calls and %d mails so far, want %d and %d", n+1, calls, mails, rq.calls, rq.mails)
						}
						switch {
						case resp.StatusCode == http.StatusCreated && first == "":
							first = got
							checkCreated(t, resp, got, id)
						case resp.StatusCode == http.StatusCreated:
							if got != first {
								t.Errorf("request %d: replayed %s, want the first response %s", n+1, got, first)
							}
							checkCreated(t, resp, got, id)
						default:
							if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
								t.Errorf("request %d: %d with Content-Type %q, want a problem document", n+1, resp.StatusCode, ct)
							}
						}
					}
					if other := svc.otherKeys(invoice.MailName + ":" + id); len(other) > 0 {
						t.Errorf("calls with other keys than %s:%s: %v", invoice.MailName, id, other)
					}
					if first == "" {
						if _, _, err := store.DocumentStore.ReadDocument(context.Background(), id, id); tt.requests[0].status < 500 && !errors.Is(err, idempotent.ErrNotFound) {
							t.Errorf("no 201, but the invoice is stored (%v)", err)
						}
					}
				})
			}
		})
	}
}

// checkCreated checks a 201: the invoice as its body, its Location.
func checkCreated(t *testing.T, resp *http.Response, got, id string) {
	t.Helper()
	var v invoice.Invoice
	if err := json.Unmarshal([]byte(got), &v); err != nil || v.InvoiceID != id || v.AmountMinor != 1999 {
		t.Errorf("body %s (%v), want invoice %s", got, err, id)
	}
	if loc := resp.Header.Get("Location"); loc != "/invoices/"+id {
		t.Errorf("Location %q, want /invoices/%s", loc, id)
	}
}

// TestHandler_Concurrent: 32 identical requests at once send one mail: the
// request that created the invoice answers 201 first-hand, the others 409
// while it holds the mail's claim, and a 409's retry is the replayed 201.
func TestHandler_Concurrent(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			const id, n = "inv-http-race", 32
			store := b.open(t)
			svc := newMailService()
			h, err := invoice.NewHandler(store, invoice.HandlerOptions{
				Mail: invoice.NewMailEffect(store, invoice.MailOptions{Mailer: svc, Lease: lease, Owner: "web-1"})})
			if err != nil {
				t.Fatal(err)
			}
			// The mail service holds every call until each request is
			// either answered or calling, so that the others meet the
			// claim in progress.
			svc.entered, svc.hold = make(chan struct{}, 2*n), make(chan struct{})
			statuses := make([]int, n)
			replayed := make([]bool, n)
			start, answered := make(chan struct{}), make(chan struct{}, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					resp := serve(t, h, http.MethodPost, id, body(id))
					statuses[i], replayed[i] = resp.StatusCode, resp.Header.Get(invoice.HeaderReplayed) == "true"
					answered <- struct{}{}
				})
			}
			close(start)
			for range n {
				select {
				case <-svc.entered:
				case <-answered:
				}
			}
			close(svc.hold)
			wg.Wait()
			firstHand, conflicts := 0, 0
			for i, s := range statuses {
				switch {
				case s == http.StatusCreated && !replayed[i]:
					firstHand++
				case s == http.StatusCreated:
				case s == http.StatusConflict:
					conflicts++
					if resp := serve(t, h, http.MethodPost, id, body(id)); resp.StatusCode != http.StatusCreated || resp.Header.Get(invoice.HeaderReplayed) != "true" {
						t.Errorf("the retry of a 409: %d replayed %q, want the replayed 201", resp.StatusCode, resp.Header.Get(invoice.HeaderReplayed))
					}
				default:
					t.Errorf("a request was answered %d", s)
				}
			}
			t.Logf("%d answered first-hand, %d 409", firstHand, conflicts)
			if firstHand > 1 || b.atomicBatch && (firstHand != 1 || conflicts != n-1) {
				t.Errorf("%d requests answered 201 first-hand and %d 409, want one and %d (at most one first-hand on cosmium)", firstHand, conflicts, n-1)
			}
			if calls, mails := svc.counts(); mails != 1 || calls < 1 {
				t.Errorf("%d calls sent %d mails, want exactly one mail", calls, mails)
			}
			if other := svc.otherKeys(invoice.MailName + ":" + id); len(other) > 0 {
				t.Errorf("calls with other keys: %v", other)
			}
		})
	}
}

// TestHandler_InProgress: while one request is sending the mail, another
// with the same key is answered 409 with Retry-After and sends nothing;
// once the first is answered, a retry gets its 201 replayed.
func TestHandler_InProgress(t *testing.T) {
	const id = "inv-http-busy"
	store := &docStore{DocumentStore: backends(t)[0].open(t)}
	svc := newMailService()
	svc.entered, svc.hold = make(chan struct{}, 4), make(chan struct{})
	h, err := invoice.NewHandler(store, invoice.HandlerOptions{
		Mail: invoice.NewMailEffect(store, invoice.MailOptions{Mailer: svc, Lease: lease, Owner: "web-1"})})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *http.Response)
	go func() { done <- serve(t, h, http.MethodPost, id, body(id)) }()
	<-svc.entered // the first request holds the claim and is calling
	resp := serve(t, h, http.MethodPost, id, body(id))
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" {
		t.Errorf("while in progress: %d Retry-After %q, want 409 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(svc.hold)
	if first := <-done; first.StatusCode != http.StatusCreated || first.Header.Get(invoice.HeaderReplayed) != "" {
		t.Errorf("the first request: %d replayed %q, want 201 first-hand", first.StatusCode, first.Header.Get(invoice.HeaderReplayed))
	}
	if resp := serve(t, h, http.MethodPost, id, body(id)); resp.StatusCode != http.StatusCreated || resp.Header.Get(invoice.HeaderReplayed) != "true" {
		t.Errorf("the retry: %d replayed %q, want the replayed 201", resp.StatusCode, resp.Header.Get(invoice.HeaderReplayed))
	}
	if calls, mails := svc.counts(); calls != 1 || mails != 1 {
		t.Errorf("%d calls, %d mails; want 1 and 1", calls, mails)
	}
}

// TestHandler_AfterTheQueue: an invoice the queue's consumer created (and
// mailed) is answered 200 with the stored invoice when it is posted: no
// response was stored to replay, and no second mail is sent.
func TestHandler_AfterTheQueue(t *testing.T) {
	const id = "inv-http-queued"
	store := backends(t)[0].open(t)
	svc := newMailService()
	mail := invoice.NewMailEffect(store, invoice.MailOptions{Mailer: svc, Lease: lease, Owner: "worker-1"})
	if r := invoice.NewConsumer(store, idempotent.WithEffect(mail)).Process(t.Context(), idempotent.Message{ID: id, Body: []byte(body(id)), DeliveryCount: 1}); r.Outcome != idempotent.Created {
		t.Fatalf("through the queue: %v %s", r.Outcome, r.Description)
	}
	h, err := invoice.NewHandler(store, invoice.HandlerOptions{Mail: mail})
	if err != nil {
		t.Fatal(err)
	}
	resp := serve(t, h, http.MethodPost, id, body(id))
	got := readBody(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(invoice.HeaderReplayed) != "" {
		t.Errorf("%d replayed %q, want 200 not replayed", resp.StatusCode, resp.Header.Get(invoice.HeaderReplayed))
	}
	var v invoice.Invoice
	if err := json.Unmarshal([]byte(got), &v); err != nil || v.InvoiceID != id {
		t.Errorf("body %s (%v), want the invoice", got, err)
	}
	if calls, mails := svc.counts(); calls != 1 || mails != 1 {
		t.Errorf("%d calls, %d mails; want 1 and 1", calls, mails)
	}
}

// TestNewHandler_Refuses: a mail effect that cannot run, or whose lease a
// request could outlast, is refused at start.
func TestNewHandler_Refuses(t *testing.T) {
	store := backends(t)[0].open(t)
	for name, o := range map[string]invoice.HandlerOptions{
		"no mailer":           {Mail: invoice.NewMailEffect(store, invoice.MailOptions{Lease: lease})},
		"a lease too short":   {Timeout: lease, Mail: invoice.NewMailEffect(store, invoice.MailOptions{Mailer: newMailService(), Lease: lease})},
		"a lease of the same": {Timeout: 50 * time.Second, Mail: invoice.NewMailEffect(store, invoice.MailOptions{Mailer: newMailService(), Lease: lease})},
	} {
		if _, err := invoice.NewHandler(store, o); err == nil {
			t.Errorf("%s: NewHandler accepted it", name)
		}
	}
}
