package telemetry

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// HTTPTransport returns next (nil: http.DefaultTransport) wrapped by
// otelhttp: every request gets a client span, carries its trace context in
// the traceparent header, and is measured by the http.client metrics. The
// values of the request headers named in headers (such as Idempotency-Key)
// are set on the span as http.request.header.<lower-case name>.
func (p *Providers) HTTPTransport(next http.RoundTripper, headers ...string) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	inner := next
	if len(headers) > 0 {
		inner = headerAttrs{next: next, headers: headerKeys(headers)}
	}
	return otelhttp.NewTransport(inner, p.httpOptions()...)
}

// HTTPHandler returns h wrapped by otelhttp: every request gets a server
// span, continuing the caller's trace from its traceparent header, and is
// measured by the http.server metrics. The request headers named in headers
// are set on the span as for HTTPTransport. operation names the span.
func (p *Providers) HTTPHandler(h http.Handler, operation string, headers ...string) http.Handler {
	keys := headerKeys(headers)
	inner := h
	if len(keys) > 0 {
		inner = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			setHeaderAttrs(r, keys)
			h.ServeHTTP(w, r)
		})
	}
	return otelhttp.NewHandler(inner, operation, p.httpOptions()...)
}

func (p *Providers) httpOptions() []otelhttp.Option {
	return []otelhttp.Option{
		otelhttp.WithTracerProvider(p.TracerProvider),
		otelhttp.WithMeterProvider(p.MeterProvider),
		otelhttp.WithPropagators(p.Propagator),
	}
}

type headerKey struct {
	header string
	attr   attribute.Key
}

func headerKeys(headers []string) []headerKey {
	keys := make([]headerKey, len(headers))
	for i, h := range headers {
		keys[i] = headerKey{header: h, attr: attribute.Key("http.request.header." + strings.ToLower(h))}
	}
	return keys
}

// headerAttrs runs inside otelhttp's transport, where the request's context
// holds the client span.
type headerAttrs struct {
	next    http.RoundTripper
	headers []headerKey
}

func (t headerAttrs) RoundTrip(r *http.Request) (*http.Response, error) {
	setHeaderAttrs(r, t.headers)
	return t.next.RoundTrip(r)
}

func setHeaderAttrs(r *http.Request, keys []headerKey) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	for _, k := range keys {
		if v := r.Header.Values(k.header); len(v) > 0 {
			span.SetAttributes(k.attr.StringSlice(v))
		}
	}
}
