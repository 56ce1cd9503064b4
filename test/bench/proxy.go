package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// LatencyProxy is a loopback HTTP proxy in front of a Cosmos DB endpoint
// that holds every request for a fixed latency before forwarding it, so
// that each round trip the SDK makes costs that much more, as a network
// between a worker and Cosmos DB does. It rewrites the account document
// (GET /) so that the account advertises the proxy as its endpoint: azcosmos
// sends every request after the first to the advertised endpoint's host (see
// the package documentation), which would otherwise bypass the proxy.
//
// The latency is added once per request, before it is forwarded; it stands
// for a network's round-trip time, not for bandwidth or loss. A LatencyProxy
// is safe for concurrent use.
type LatencyProxy struct {
	target   *url.URL
	latency  time.Duration
	sleep    func(context.Context, time.Duration) error
	listener net.Listener
	server   *http.Server
	endpoint string // "http://127.0.0.1:PORT/"
	requests atomic.Int64
}

// ProxyOptions configure a LatencyProxy.
type ProxyOptions struct {
	// Latency is added to every request. Zero forwards at once.
	Latency time.Duration
	// Sleep waits d or until ctx ends; nil means a timer. Tests replace it
	// to observe the waits without timing them.
	Sleep func(ctx context.Context, d time.Duration) error
}

// NewLatencyProxy starts a proxy on a free loopback port in front of
// target, an endpoint such as "http://127.0.0.1:8081/". The caller must call
// Close.
func NewLatencyProxy(target string, o ProxyOptions) (*LatencyProxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("bench: proxy target %q is not a URL with a host", target)
	}
	if o.Latency < 0 {
		return nil, fmt.Errorf("bench: proxy latency %v is negative", o.Latency)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: proxy: %w", err)
	}
	p := &LatencyProxy{
		target:   u,
		latency:  o.Latency,
		sleep:    o.Sleep,
		listener: l,
		endpoint: "http://" + l.Addr().String() + "/",
	}
	if p.sleep == nil {
		p.sleep = sleep
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = 1000
	transport.MaxIdleConnsPerHost = 1000 // never the bottleneck at concurrency 64
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		Transport:      transport,
		ModifyResponse: p.rewriteAccount,
	}
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.requests.Add(1)
			if p.latency > 0 {
				if err := p.sleep(r.Context(), p.latency); err != nil {
					http.Error(w, err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

// Endpoint returns the proxy's account endpoint, "http://127.0.0.1:PORT/",
// for azcosmos.NewClientWithKey.
func (p *LatencyProxy) Endpoint() string { return p.endpoint }

// Requests returns the number of requests the proxy has received.
func (p *LatencyProxy) Requests() int64 { return p.requests.Load() }

// Close stops the proxy and closes its connections.
func (p *LatencyProxy) Close() error { return p.server.Close() }

// rewriteAccount replaces the endpoints that the account document (the
// response to GET /) advertises with the proxy's own, keeping everything
// else of the document.
func (p *LatencyProxy) rewriteAccount(resp *http.Response) error {
	if resp.Request.Method != http.MethodGet || resp.Request.URL.Path != "/" || resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("bench: proxy: read the account document: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("bench: proxy: decode the account document: %w", err)
	}
	self, _ := url.Parse(p.endpoint)
	rewritten := 0
	for _, key := range []string{"writableLocations", "readableLocations"} {
		locs, _ := doc[key].([]any)
		for _, l := range locs {
			loc, ok := l.(map[string]any)
			if !ok {
				continue
			}
			s, _ := loc["databaseAccountEndpoint"].(string)
			adv, err := url.Parse(s)
			if err != nil || adv.Host == "" {
				continue
			}
			adv.Host = self.Host // keep the scheme: the SDK takes only the host
			loc["databaseAccountEndpoint"] = adv.String()
			rewritten++
		}
	}
	if rewritten == 0 {
		return errors.New("bench: proxy: the account document advertises no endpoint to rewrite")
	}
	body, err = json.Marshal(doc)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
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
