package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestHealthProbesFollowTheStore runs the real run() against the test
// broker and cosmium behind a proxy the test can cut: /readyz passes once
// the start-up checks passed, turns not ready when the store is
// unreachable (the breaker opens after five deliveries failed), ready again
// when it returns (the breaker's probe, store.Probe, closes it), and not
// ready at the first signal while an in-flight message is still draining;
// the listener is closed when run returns.
func TestHealthProbesFollowTheStore(t *testing.T) {
	cosmium := cosmiumtest.Start(t)
	proxy := newCutProxy(t, strings.TrimSuffix(strings.TrimPrefix(cosmium.Endpoint, "http://"), "/"))

	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: 5 * time.Second, MaxDeliveryCount: 100})
	if err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })

	healthAddr := freeAddr(t)
	env := envOf(map[string]string{
		"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders",
		"SERVICEBUS_LOCK_DURATION": "5s",
		"COSMOS_ENDPOINT":          "http://" + proxy.addr() + "/", "COSMOS_KEY": cosmium.Key, "COSMOS_CREATE_CONTAINER": "true",
		"WORKER_HEALTH_ADDR": healthAddr, "WORKER_SHUTDOWN_GRACE": "30s", "LOG_FORMAT": "json",
	})
	sigs := make(chan os.Signal, 2)
	ctx, stop := cli.Stages(context.Background(), sigs)
	defer stop()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, env, io.Discard, &logs) }()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SHOWLOGS") != "" {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})

	deadline, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	probe := func(path string) (int, string) {
		resp, err := http.Get("http://" + healthAddr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what, path string, code int, body string) {
		t.Helper()
		for {
			c, b := probe(path)
			if c == code && strings.Contains(b, body) {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("run returned while waiting for %s: %v", what, err)
			case <-deadline.Done():
				t.Fatalf("%s: GET %s last answered %d %q", what, path, c, b)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitFor("ready after the start-up checks", "/readyz", 200, "ok started\nok breaker\nok receiver")
	if c, b := probe("/startupz"); c != 200 {
		t.Errorf("/startupz = %d %q", c, b)
	}
	if c, b := probe("/livez"); c != 200 {
		t.Errorf("/livez = %d %q", c, b)
	}

	client, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	gen := ordergen.New(1, "health")
	send := func(i int) {
		t.Helper()
		id := gen.ID(i)
		if err := sender.SendMessage(deadline, &azservicebus.Message{MessageID: &id, Body: ordergen.Body(gen.Order(i), time.Now(), "")}, nil); err != nil {
			t.Fatal(err)
		}
	}

	proxy.setMode(modeCut)
	for i := range 8 {
		send(i)
	}
	waitFor("not ready while the store is unreachable", "/readyz", 503, "fail breaker: circuit breaker")
	if c, b := probe("/livez"); c != 200 {
		t.Errorf("/livez during the outage = %d %q: an outage is no reason to restart", c, b)
	}
	proxy.setMode(modeForward)
	waitFor("ready again when the store returns", "/readyz", 200, "ok breaker")
	for q.Snapshot().Counters.Completed < 8 {
		select {
		case <-deadline.Done():
			t.Fatalf("the orders sent during the outage were not all completed: %+v", q.Snapshot().Counters)
		case <-time.After(20 * time.Millisecond):
		}
	}

	// A message whose store call hangs keeps the drain going: /readyz
	// must say not ready while it does.
	proxy.setMode(modeStall)
	send(100)
	for proxy.stalled() == 0 {
		select {
		case <-deadline.Done():
			t.Fatal("the worker never reached the store with the last message")
		case <-time.After(10 * time.Millisecond):
		}
	}
	sigs <- syscall.SIGTERM
	waitFor("not ready at the first signal, during the drain", "/readyz", 503, "fail draining: terminated signal received")
	proxy.setMode(modeForward)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v", err)
		}
	case <-deadline.Done():
		t.Fatal("run did not return after the drain")
	}
	if c, b := probe("/livez"); c != 0 {
		t.Errorf("the health listener still answers after run returned: %d %q", c, b)
	}
	if i, j := strings.Index(logs.String(), "health probes listening"), strings.Index(logs.String(), "shutdown complete"); i < 0 || j < 0 {
		t.Errorf("logs lack the listener's start or the shutdown:\n%s", logs.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type proxyMode int

const (
	modeForward proxyMode = iota
	modeCut               // close every connection without an answer: the store is unreachable
	modeStall             // never answer: the store hangs
)

// cutProxy is an HTTP reverse proxy in front of cosmium that the test can
// cut or stall. It rewrites cosmium's address in what it forwards, since
// azcosmos sends its requests to the endpoint the account advertises
// (databaseAccountEndpoint), which would otherwise bypass the proxy.
type cutProxy struct {
	srv    *httptest.Server
	mu     sync.Mutex
	mode   proxyMode
	resume chan struct{} // closed when a stall ends
	nStall int
}

// accountProxy returns a reverse proxy to the Cosmos DB endpoint target
// (host:port) that rewrites target in every answer to self(), the proxy's
// own address: the account names its regions' endpoints, and the SDK must
// keep sending through the proxy.
func accountProxy(target string, self func() string) *httputil.ReverseProxy {
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	rp.ModifyResponse = func(r *http.Response) error {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		b = bytes.ReplaceAll(b, []byte(target), []byte(self()))
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	return rp
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{resume: make(chan struct{})}
	rp := accountProxy(target, func() string { return p.srv.Listener.Addr().String() })
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		mode, resume := p.mode, p.resume
		if mode == modeStall {
			p.nStall++
		}
		p.mu.Unlock()
		switch mode {
		case modeCut:
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		case modeStall:
			select {
			case <-resume:
			case <-r.Context().Done():
			}
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { p.setMode(modeForward); p.srv.Close() })
	return p
}

func (p *cutProxy) addr() string { return p.srv.Listener.Addr().String() }

func (p *cutProxy) stalled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nStall
}

// setMode switches the mode; leaving stall mode releases the stalled
// requests (their connections are closed unanswered).
func (p *cutProxy) setMode(m proxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == modeStall && m != modeStall {
		close(p.resume)
		p.resume = make(chan struct{})
	}
	p.mode = m
}

// TestReadinessFollowsTheReceiver runs the real run() with the test broker
// behind a TCP proxy: cutting it makes receives fail, and /readyz says the
// receiver is not connected until a peek through the restored link works.
func TestReadinessFollowsTheReceiver(t *testing.T) {
	cosmium := cosmiumtest.Start(t)
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	proxy := newTCPProxy(t, broker.Addr().String())
	healthAddr := freeAddr(t)
	env := envOf(map[string]string{
		"SERVICEBUS_CONNECTION_STRING": strings.Replace(broker.ConnectionString(), broker.Addr().String(), proxy.addr(), 1),
		"SERVICEBUS_QUEUE":             "orders", "SERVICEBUS_LOCK_DURATION": "5s",
		"COSMOS_ENDPOINT": cosmium.Endpoint, "COSMOS_KEY": cosmium.Key, "COSMOS_CREATE_CONTAINER": "true",
		"WORKER_HEALTH_ADDR": healthAddr, "LOG_FORMAT": "json",
	})
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, env, io.Discard, &logs) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	deadline, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	waitFor := func(what string, code int, body string) {
		t.Helper()
		var c int
		var b string
		for {
			c, b = 0, ""
			if resp, err := http.Get("http://" + healthAddr + "/readyz"); err == nil {
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				c, b = resp.StatusCode, string(raw)
			}
			if c == code && strings.Contains(b, body) {
				return
			}
			select {
			case <-deadline.Done():
				t.Fatalf("%s: /readyz last answered %d %q", what, c, b)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitFor("ready", 200, "ok receiver")
	proxy.cut(true)
	waitFor("not ready while the broker is unreachable", 503, "fail receiver: receive failed")
	proxy.cut(false)
	waitFor("ready again", 200, "ok receiver")
}

// tcpProxy forwards TCP connections to a target unless cut; cutting closes
// every open connection and refuses new ones (accepts and closes them).
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	isCut  bool
	conns  map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) cut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = on
	if on {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

func (p *tcpProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.isCut {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}
