package invoice

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// The HTTP endpoint's headers, as the IETF draft "The Idempotency-Key HTTP
// Header Field" (draft-ietf-httpapi-idempotency-key-header) names the
// first; the second is the usual name of a replay's mark.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
)

// Defaults of HandlerOptions.
const (
	DefaultHandlerTimeout = 10 * time.Second
	DefaultRetryAfter     = time.Second
	DefaultMaxBody        = 64 << 10
	DefaultLocation       = "/invoices/"
)

// HandlerOptions configures a Handler.
type HandlerOptions struct {
	// Mail is the invoice mail (see NewMailEffect) over the Handler's
	// store; nil: no mail. Its Lease must exceed Timeout plus two of its
	// write timeouts: a request holds the mail's claim for at most that
	// long, and a claim older than the lease is taken over by a retry.
	Mail *idempotent.Effect
	// Timeout bounds the decision of one request: the store calls and the
	// mail. Zero means DefaultHandlerTimeout.
	Timeout time.Duration
	// RetryAfter is what a 409 (the key's request is in progress) and a
	// 503 (a dependency failed) tell the client to wait. Zero means
	// DefaultRetryAfter; it is sent in whole seconds, at least 1.
	RetryAfter time.Duration
	// MaxBody is the largest request body accepted, in bytes; larger is a
	// 413. Zero means DefaultMaxBody.
	MaxBody int64
	// Location prefixes the invoice id in a 201's Location header. Empty
	// means DefaultLocation.
	Location string
	// Logger logs every failed request; nil logs nothing.
	Logger *slog.Logger
}

// Handler is the HTTP endpoint that issues invoices (POST /invoices), on
// the same core and the same store as the queue's consumer: a POST carries
// one invoice as its body (the message's JSON) and its invoiceId as the
// Idempotency-Key header, as a queue message carries it as its MessageId.
// The key is required. Its answers, following the IETF draft "The
// Idempotency-Key HTTP Header Field":
//
//	201 Created           the invoice was created and mailed; the response is stored with it
//	201 + Idempotent-Replayed: true
//	                      a repeated request (same key, same invoice): the stored response, replayed
//	200 OK                same key and invoice, created through the queue (no response stored)
//	400 Bad Request       no key, an invalid invoice, or a key that is not the invoiceId
//	409 Conflict          another request with the key is in progress (Retry-After)
//	413                   a body over MaxBody
//	422 Unprocessable     the key was used for another invoice
//	502 Bad Gateway       the mail service refused the mail for good
//	503 Unavailable       the store or the mail service failed; retry with the same key (Retry-After)
//	500                   stored state an operator must repair (never a dependency's failure)
//
// "The same invoice" is the same request hash: JSON key order, white space
// and the time zone of issuedAt do not count, as for the queue. A replay
// answers the first request's response byte for byte.
//
// Every request runs idempotent.Consumer.Process: the invoice's marker
// (holding the 201 it answers), its event and the mail's first claim are
// created in one batch; the mail is sent with the key "InvoiceMail:<id>";
// a repeated request whose mail is not done (the first one failed, or its
// process ended between the call and the completed record) resumes it with
// the same key once the claim is free, and only then replays. A request
// identifies its claim by the key alone, so a claim another request holds
// is taken over only after the mail's lease: until then the answer is 409.
// The Handler makes no store write of its own; it reads the marker to
// replay its response. It is safe for concurrent use.
type Handler struct {
	consumer *idempotent.Consumer[Invoice]
	store    idempotent.Reader
	o        HandlerOptions
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the invoice endpoint over store. It fails if
// o.Mail cannot run or its lease does not cover a request.
func NewHandler(store idempotent.DocumentStore, o HandlerOptions) (*Handler, error) {
	o.Timeout = cmp.Or(o.Timeout, DefaultHandlerTimeout)
	o.RetryAfter = cmp.Or(o.RetryAfter, DefaultRetryAfter)
	o.MaxBody = cmp.Or(o.MaxBody, DefaultMaxBody)
	o.Location = cmp.Or(o.Location, DefaultLocation)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var opts []idempotent.Option
	if o.Mail != nil {
		if err := o.Mail.Err(); err != nil {
			return nil, fmt.Errorf("invoice handler: %w", err)
		}
		mo := o.Mail.Options()
		if held := o.Timeout + 2*mo.WriteTimeout; mo.Lease <= held {
			return nil, fmt.Errorf("invoice handler: the mail's lease %v must exceed the timeout %v plus two write timeouts %v", mo.Lease, o.Timeout, mo.WriteTimeout)
		}
		opts = append(opts, idempotent.WithEffect(o.Mail))
	}
	return &Handler{consumer: idempotent.NewConsumer[Invoice](httpKind{location: o.Location}, store, opts...), store: store, o: o}, nil
}

// storedResponse is the response a Handler stores with the invoice it
// creates, in the marker, and replays. The body is a JSON string, not a
// nested object: a store that re-encodes documents (Cosmos DB returns its
// own key order and spacing) would change an object, and a replay must be
// the first response byte for byte.
type storedResponse struct {
	Status   int    `json:"status"`
	Location string `json:"location,omitempty"`
	Body     string `json:"body"`
}

// httpKind is the Kind of invoices posted to a Handler: an invoice message's
// Kind whose marker holds the response to the request that creates it.
type httpKind struct {
	Kind
	location string
}

func (k httpKind) Documents(m idempotent.Message, v Invoice, hash string) ([]idempotent.Document, error) {
	resp, err := k.created(v)
	if err != nil {
		return nil, err
	}
	return documents(m, v, hash, &resp)
}

// created returns the 201 that creating v answers.
func (k httpKind) created(v Invoice) (storedResponse, error) {
	body, err := json.Marshal(v)
	return storedResponse{Status: http.StatusCreated, Location: k.location + v.InvoiceID, Body: string(body)}, err
}

// ServeHTTP decides one POST: see Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.problem(w, r, http.StatusMethodNotAllowed, "method not allowed", r.Method+" is not POST", nil)
		return
	}
	key, err := idempotencyKey(r.Header)
	if err != nil {
		h.problem(w, r, http.StatusBadRequest, "Idempotency-Key missing or malformed", err.Error(), nil)
		return
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.o.MaxBody)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.problem(w, r, http.StatusRequestEntityTooLarge, "body too large", fmt.Sprintf("the body exceeds %d bytes", tooBig.Limit), nil)
			return
		}
		h.problem(w, r, http.StatusBadRequest, "body unreadable", err.Error(), nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	// A request is the first delivery of its copy: it names no sequence
	// number, so its claim is taken over only after the mail's lease.
	m := idempotent.Message{ID: key, Body: buf.Bytes(), DeliveryCount: 1}
	res := h.consumer.Process(ctx, m)
	switch res.Outcome {
	case idempotent.Created:
		v, err := Kind{}.Decode(m.Body) // decoded by Process already: cannot fail
		if err == nil {
			var resp storedResponse
			if resp, err = (httpKind{location: h.o.Location}).created(v); err == nil {
				h.respond(w, resp, false)
				return
			}
		}
		h.problem(w, r, http.StatusInternalServerError, "response lost", err.Error(), nil)
	case idempotent.Duplicate:
		h.replay(ctx, w, r, key)
	default:
		status, title := failureStatus(res)
		detail := res.Reason + ": " + res.Description
		if status >= 500 {
			// The dependency's own words are for the log, not the client.
			detail = res.Reason
		}
		if level := slog.LevelInfo; status >= 500 || status == http.StatusConflict {
			if status >= 500 {
				level = slog.LevelWarn
			}
			h.o.Logger.LogAttrs(r.Context(), level, "invoice request not done", slog.String("key", key),
				slog.Int("status", status), slog.String("outcome", res.Outcome.String()), slog.String("reason", res.Reason),
				slog.String("description", res.Description))
		}
		var retry *time.Duration
		if status == http.StatusConflict || status == http.StatusServiceUnavailable {
			retry = &h.o.RetryAfter
		}
		h.problem(w, r, status, title, detail, retry)
	}
}

// replay answers a repeated request for invoice key with the response
// stored with it.
func (h *Handler) replay(ctx context.Context, w http.ResponseWriter, r *http.Request, key string) {
	body, _, err := h.store.ReadDocument(ctx, key, key)
	if err != nil {
		if errors.Is(err, idempotent.ErrNotFound) {
			err = errors.New("the invoice was deleted since")
		}
		h.problem(w, r, http.StatusServiceUnavailable, "stored response unavailable", "read the stored response: "+err.Error(), &h.o.RetryAfter)
		return
	}
	var d document
	if err := json.Unmarshal(body, &d); err != nil {
		h.problem(w, r, http.StatusInternalServerError, "stored response unreadable", fmt.Sprintf("invoice %s: %v", key, err), nil)
		return
	}
	if d.Response == nil {
		// Created through the queue, which stores no response: the same
		// invoice, as stored.
		b, err := json.Marshal(d.Invoice)
		if err != nil {
			h.problem(w, r, http.StatusInternalServerError, "stored invoice unreadable", err.Error(), nil)
			return
		}
		h.respond(w, storedResponse{Status: http.StatusOK, Location: h.o.Location + key, Body: string(b)}, false)
		return
	}
	h.respond(w, *d.Response, true)
}

func (h *Handler) respond(w http.ResponseWriter, resp storedResponse, replayed bool) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	if resp.Location != "" {
		hd.Set("Location", resp.Location)
	}
	if replayed {
		hd.Set(HeaderReplayed, "true")
	}
	w.WriteHeader(resp.Status)
	_, _ = io.WriteString(w, resp.Body)
}

// problem answers an error as an RFC 9457 problem document; retry, if not
// nil, is sent as Retry-After.
func (h *Handler) problem(w http.ResponseWriter, r *http.Request, status int, title, detail string, retry *time.Duration) {
	hd := w.Header()
	hd.Set("Content-Type", "application/problem+json")
	if retry != nil {
		hd.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retry.Seconds())))))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Type     string `json:"type"`
		Title    string `json:"title"`
		Status   int    `json:"status"`
		Detail   string `json:"detail"`
		Instance string `json:"instance,omitempty"`
	}{"about:blank", title, status, detail, r.URL.Path})
}

// failureStatus returns the status and title that answer res, neither
// Created nor Duplicate.
func failureStatus(res idempotent.Result) (int, string) {
	switch res.Outcome {
	case idempotent.Mismatch:
		return http.StatusUnprocessableEntity, "Idempotency-Key reused for another invoice"
	case idempotent.Invalid:
		switch res.Reason {
		case idempotent.ReasonInvalidMessage, idempotent.ReasonMessageIDMismatch, idempotent.ReasonStoreRejected:
			return http.StatusBadRequest, "invalid invoice"
		case ReasonMailRejected:
			return http.StatusBadGateway, "invoice mail refused"
		}
		// Stored state that no retry changes (an unreadable document, a
		// mail to reconcile): for an operator.
		return http.StatusInternalServerError, "invoice needs an operator"
	case idempotent.Transient:
		if res.DependencyFailed() {
			return http.StatusServiceUnavailable, "a dependency failed"
		}
		// The mail's claim is held, or the stored state changed under the
		// decision: the same request succeeds later.
		return http.StatusConflict, "a request with this Idempotency-Key is in progress"
	}
	return http.StatusInternalServerError, "unexpected outcome " + res.Outcome.String()
}

// idempotencyKey returns the request's Idempotency-Key: one field value,
// an sf-string as the draft defines it ("inv-1", quoted) or, as many
// clients send it, the bare key.
func idempotencyKey(h http.Header) (string, error) {
	vs := h.Values(HeaderIdempotencyKey)
	switch {
	case len(vs) == 0:
		return "", errors.New("the Idempotency-Key header is required: send the invoiceId")
	case len(vs) > 1:
		return "", errors.New("more than one Idempotency-Key header")
	}
	k := strings.TrimSpace(vs[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	if !isID(k) {
		return "", fmt.Errorf("Idempotency-Key %q must be the invoiceId: 1 to 128 characters from A-Z a-z 0-9 . _ -", vs[0])
	}
	return k, nil
}
