package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Errors of [Client.Capture], [Client.Lookup] and [Client.Ping], to test
// with errors.Is.
var (
	// ErrKeyReused means the service already knows the key for a different
	// request (422): the key was derived from the wrong data, or the order
	// changed after its first capture attempt. Retrying cannot help.
	ErrKeyReused = errors.New("payments: idempotency key already used for a different request")
	// ErrInProgress means another request with the key was still being
	// processed (409). The client does not retry it itself: its outcome
	// decides what a retry returns, so try again later, with the same key.
	ErrInProgress = errors.New("payments: a request with this idempotency key is still in progress")
	// ErrRejected means the request is invalid, or the service refused it
	// with a 4xx other than 409, 422 and 429. Retrying cannot help.
	ErrRejected = errors.New("payments: request rejected")
	// ErrUnavailable means the last attempt failed in a way that may pass:
	// a 5xx, a 429, a timeout or a connection error. Whether the charge
	// happened is unknown; a later capture with the same key finds out
	// without charging twice.
	ErrUnavailable = errors.New("payments: service unavailable")
)

// IsTransient reports whether a capture that failed with err is worth trying
// again later with the same key: err matches ErrUnavailable or ErrInProgress,
// or a deadline passed. A worker abandons the message for redelivery when it
// is true, and dead-letters it otherwise.
func IsTransient(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInProgress) || errors.Is(err, context.DeadlineExceeded)
}

// ResponseError is the error for a response other than 200 or 201 (or 204
// to [Client.Ping]): one the client does not retry, or the last one when it
// runs out of attempts. It unwraps to the sentinel error of its status
// code.
type ResponseError struct {
	// StatusCode is the response's HTTP status code.
	StatusCode int
	// Problem is the response's problem document, or the zero Problem if the
	// body was not one.
	Problem Problem
}

// Error describes the response.
func (e *ResponseError) Error() string {
	msg := fmt.Sprintf("payment service answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Problem.Detail != "" {
		msg += ": " + e.Problem.Detail
	}
	return msg
}

// Unwrap returns ErrInProgress for 409, ErrKeyReused for 422, ErrUnavailable
// for 429 and 5xx, and ErrRejected for any other status.
func (e *ResponseError) Unwrap() error {
	switch {
	case e.StatusCode == http.StatusConflict:
		return ErrInProgress
	case e.StatusCode == http.StatusUnprocessableEntity:
		return ErrKeyReused
	case retryableStatus(e.StatusCode):
		return ErrUnavailable
	}
	return ErrRejected
}

func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500 && code <= 599
}

// Doer sends an HTTP request and returns its response; *http.Client is one.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

var _ Doer = (*http.Client)(nil)

// Defaults of [ClientOptions].
const (
	DefaultAttemptTimeout = 5 * time.Second
	DefaultMaxAttempts    = 4
	DefaultBaseDelay      = 100 * time.Millisecond
	DefaultMaxDelay       = 2 * time.Second
)

// ClientOptions configures a [Client]. The zero value is the default.
type ClientOptions struct {
	// HTTPClient sends the requests; nil means http.DefaultClient. Its own
	// Timeout, if any, should exceed AttemptTimeout.
	HTTPClient Doer
	// AttemptTimeout bounds one attempt, from sending the request to reading
	// the whole response. Zero means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// MaxAttempts is the number of attempts, the first included; 1 disables
	// retries. Zero means DefaultMaxAttempts.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the backoff: before attempt n+1 the client
	// waits a uniformly random duration from 0 up to
	// min(MaxDelay, BaseDelay*2^(n-1)) ("full jitter"), or the Retry-After
	// seconds of a 429 or 5xx answer, capped at MaxDelay. Zero means
	// DefaultBaseDelay and DefaultMaxDelay.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Sleep waits d or until ctx ends, and then returns ctx's error if it
	// ended; nil means a timer. Tests inject one to record the delays without
	// waiting.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client captures payments through the payment service's HTTP API, retrying
// with the same idempotency key where a retry can help. A Client is safe for
// concurrent use.
//
// Besides the client's own retries, net/http's Transport may resend a request
// by itself when a reused keep-alive connection turns out to be closed: it
// treats a POST carrying an Idempotency-Key header as replayable. Such a
// resend carries the same key, so it is as safe as any other retry, but the
// service may see more requests than the client made attempts.
type Client struct {
	endpoint       string
	lookup         url.URL // endpoint, parsed: Lookup adds orderId to its query (an Azure Functions ?code= stays)
	probe          string  // POST /payments/probe
	http           Doer
	attemptTimeout time.Duration
	maxAttempts    int
	baseDelay      time.Duration
	maxDelay       time.Duration
	sleep          func(context.Context, time.Duration) error
}

// NewClient returns a Client for the service at baseURL, such as
// "http://127.0.0.1:8090". o may be nil.
func NewClient(baseURL string, o *ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("payments: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("payments: base URL %q: want http:// or https:// and a host", baseURL)
	}
	if o == nil {
		o = &ClientOptions{}
	}
	if o.AttemptTimeout < 0 || o.MaxAttempts < 0 || o.BaseDelay < 0 || o.MaxDelay < 0 {
		return nil, errors.New("payments: client options must not be negative")
	}
	u.Fragment, u.RawFragment = "", "" // never sent; a query after it would be lost
	payments := u.JoinPath("payments")
	c := &Client{
		endpoint:       payments.String(),
		lookup:         *payments,
		probe:          payments.JoinPath("probe").String(),
		http:           o.HTTPClient,
		attemptTimeout: orDefault(o.AttemptTimeout, DefaultAttemptTimeout),
		maxAttempts:    orDefault(o.MaxAttempts, DefaultMaxAttempts),
		baseDelay:      orDefault(o.BaseDelay, DefaultBaseDelay),
		maxDelay:       orDefault(o.MaxDelay, DefaultMaxDelay),
		sleep:          o.Sleep,
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	if c.sleep == nil {
		c.sleep = sleep
	}
	return c, nil
}

// orDefault returns v, or def if v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Capture charges req once under key, normally KeyFor(req.OrderID), and
// returns the payment. It sends the same key on every attempt, so it may be
// called again with the same key and request, by any worker, at any time
// within the service's key retention, and never charges twice: a repeated
// capture returns the original payment with Replayed set. After the key
// retention a repeated capture charges again; a caller that may retry that
// late must look the payment up first ([Client.Lookup]).
//
// It retries 5xx, 429, timeouts and connection errors with backoff, up to
// the client's MaxAttempts, and returns at once on any other answer. An error
// matches ErrKeyReused, ErrInProgress, ErrRejected or ErrUnavailable, or is
// ctx's error (wrapping the last attempt's error, if any) when ctx ended
// first. IsTransient(err) tells whether to try again later.
func (c *Client) Capture(ctx context.Context, key string, req CaptureRequest) (Payment, error) {
	if err := checkKey(key); err != nil {
		return Payment{}, fmt.Errorf("payments: %w: %w", ErrRejected, err)
	}
	if err := req.Validate(); err != nil {
		return Payment{}, fmt.Errorf("payments: %w: %w", ErrRejected, err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Payment{}, fmt.Errorf("payments: encoding the request: %w", err)
	}
	var p Payment
	err = c.retry(ctx, fmt.Sprintf("capture with key %q", key), func(ctx context.Context) (time.Duration, error) {
		p = Payment{}
		replayed, retryAfter, err := c.attempt(ctx, http.MethodPost, c.endpoint, key, body, &p)
		p.Replayed = replayed
		return retryAfter, err
	})
	if err != nil {
		return Payment{}, err
	}
	if p.OrderID != req.OrderID || p.AmountMinor != req.AmountMinor || p.Currency != req.Currency {
		return Payment{}, fmt.Errorf("payments: capture with key %q: the service answered with a payment of %d %s for order %q, not the %d %s requested for order %q",
			key, p.AmountMinor, p.Currency, p.OrderID, req.AmountMinor, req.Currency, req.OrderID)
	}
	return p, nil
}

// Lookup returns every payment the service's ledger holds for orderID
// (GET /payments?orderId=), oldest first; none means no charge for the order
// ever happened. The ledger outlives the idempotency keys, so Lookup tells
// the outcome of a capture whose key the service may have forgotten. It is a
// read, retried like Capture, and its errors match the same sentinels.
func (c *Client) Lookup(ctx context.Context, orderID string) ([]Payment, error) {
	if err := CheckOrderID(orderID); err != nil {
		return nil, fmt.Errorf("payments: %w: %w", ErrRejected, err)
	}
	u := c.lookup
	q := u.Query()
	q.Set("orderId", orderID)
	u.RawQuery = q.Encode()
	target := u.String()
	var list PaymentList
	err := c.retry(ctx, fmt.Sprintf("lookup of order %q", orderID), func(ctx context.Context) (time.Duration, error) {
		list = PaymentList{}
		_, retryAfter, err := c.attempt(ctx, http.MethodGet, target, "", nil, &list)
		return retryAfter, err
	})
	if err != nil {
		return nil, err
	}
	for _, p := range list.Payments {
		if p.OrderID != orderID {
			return nil, fmt.Errorf("payments: lookup of order %q: the service answered with payment %s of order %q", orderID, p.PaymentID, p.OrderID)
		}
	}
	return list.Payments, nil
}

// Ping asks the service whether a capture would go through now
// (POST /payments/probe), once, without retrying: the probe of a circuit
// breaker, which has a backoff of its own. The service makes the call a
// capture makes to its acquirer, as a zero-amount verification, and
// charges nothing, records nothing and claims no idempotency key; Ping
// sends no key and no body. It succeeds on 204 No Content (or 200). Any
// other answer, a timeout (the client's AttemptTimeout) or a connection
// error gives an error matching ErrUnavailable; a *ResponseError in it
// carries the status, and a 404 or 405 says that the service has no probe.
//
// Ping sees what fails every capture: the service down, unreachable or
// overloaded (429, 5xx), and an outage of the acquirer behind a service
// whose own process runs and whose GET /healthz still answers 200. It
// cannot see what fails one capture and not the others: a declined card,
// one merchant's account refused, one order's key in conflict (409, 422),
// a capture the service rejects as invalid. Those are the messages' own,
// and a breaker must not open for them. It is safe for concurrent use.
func (c *Client) Ping(ctx context.Context) error {
	_, _, err := c.attempt(ctx, http.MethodPost, c.probe, "", nil, nil)
	if err == nil {
		return nil
	}
	if rerr, ok := errors.AsType[*ResponseError](err); ok && (rerr.StatusCode == http.StatusNotFound || rerr.StatusCode == http.StatusMethodNotAllowed) {
		return fmt.Errorf("payments: probe (POST /payments/probe): %w: %w (the service serves no probe: the URL is wrong, or the service predates the probe)", ErrUnavailable, err)
	}
	if !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("payments: probe (POST /payments/probe): %w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("payments: probe (POST /payments/probe): %w", err)
}

// retry calls attempt until it succeeds, fails in a way a retry cannot
// help, runs out of attempts or ctx ends, waiting with backoff in between.
// what names the request in the errors.
func (c *Client) retry(ctx context.Context, what string, attempt func(context.Context) (retryAfter time.Duration, err error)) error {
	for n := 1; ; n++ {
		retryAfter, err := attempt(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("payments: %s: attempt %d: %w", what, n, err)
		}
		if !errors.Is(err, ErrUnavailable) || n == c.maxAttempts {
			return fmt.Errorf("payments: %s: attempt %d of %d: %w", what, n, c.maxAttempts, err)
		}
		if serr := c.sleep(ctx, c.backoff(n, retryAfter)); serr != nil {
			return fmt.Errorf("payments: %s: waiting to retry after attempt %d: %w; the attempt failed: %w", what, n, serr, err)
		}
	}
}

// attempt sends one request (with key as its Idempotency-Key, if not empty)
// and reads the whole answer under the attempt's timeout, decoding a 200 or
// 201 into v; with v nil, a 204 succeeds too (a capture or a lookup, which
// expect a body, never take one for success). A retryable failure wraps
// ErrUnavailable; replayed reports the
// Idempotent-Replayed header; retryAfter is the answer's Retry-After in
// seconds, or -1 if it had none.
func (c *Client) attempt(ctx context.Context, method, target, key string, body []byte, v any) (replayed bool, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return false, -1, err
	}
	if key != "" {
		r.Header.Set(HeaderIdempotencyKey, key)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := c.http.Do(r)
	if err != nil {
		// A timeout or a connection error: the request may or may not have
		// reached the service, and only a retry with the key can tell.
		return false, -1, fmt.Errorf("%w: %w", ErrUnavailable, redactURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return false, -1, fmt.Errorf("%w: reading the answer: %w", ErrUnavailable, err)
	}
	switch {
	case resp.StatusCode == http.StatusNoContent && v == nil:
		return false, -1, nil
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		if v == nil {
			return false, -1, nil
		}
		if err := json.Unmarshal(data, v); err != nil {
			// For a capture, the charge happened but the answer is
			// unreadable; a retry gets the stored answer again.
			return false, -1, fmt.Errorf("%w: decoding the answer: %w", ErrUnavailable, err)
		}
		return resp.Header.Get(HeaderIdempotentReplayed) == "true", -1, nil
	}
	rerr := &ResponseError{StatusCode: resp.StatusCode}
	if mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); strings.TrimSpace(mt) == "application/problem+json" {
		json.Unmarshal(data, &rerr.Problem) // best effort: the status code decides
	}
	return false, parseRetryAfter(resp.Header.Get("Retry-After")), rerr
}

// parseRetryAfter returns a Retry-After header's delay in seconds, or -1 if
// it has none (the HTTP-date form is not used by the service and is ignored).
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	if n > int64(time.Hour/time.Second) {
		n = int64(time.Hour / time.Second)
	}
	return time.Duration(n) * time.Second
}

// backoff returns the wait before the attempt after attempt: the server's
// Retry-After if it sent one, capped at maxDelay, or else full jitter.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter >= 0 {
		return min(retryAfter, c.maxDelay)
	}
	ceiling := c.maxDelay
	if shift := attempt - 1; shift < 62 && c.baseDelay <= c.maxDelay>>shift {
		ceiling = c.baseDelay << shift
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceiling)))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// redactURL hides what a *url.Error's URL may carry as a credential (user
// information, a query such as an Azure Functions ?code=, a fragment), so
// that the error can be logged. Other errors are returned as they are.
func redactURL(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil {
		ue.URL = "***"
		return err
	}
	if u.User != nil {
		u.User = url.User("***")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "***", false
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = "***", ""
	}
	ue.URL = u.String()
	return err
}
