// Package health serves a process's health over HTTP for the probes of a
// container platform (Azure Container Apps, Kubernetes):
//
//   - GET /livez answers 200 while every liveness check passes: the process
//     runs and its work loop is not wedged. A failing liveness probe makes
//     the platform restart the container, so liveness checks must fail only
//     for what a restart cures.
//   - GET /readyz answers 200 once the start-up checks passed (Started),
//     until the shutdown begins (Draining), while every readiness check
//     passes. A failing readiness probe only marks the replica not ready.
//   - GET /startupz answers 200 once Started was called, and keeps doing
//     so: for a startup probe, which stops being asked once it passed.
//   - GET /metrics is served by the metrics handler given to Handler, if
//     any (a Prometheus exporter's); without one there is no such route.
//
// Every answer is text/plain, one line per check ("ok name" or
// "fail name: why"), so that an operator can curl it; a 503 means not
// live, not ready or not started. Each check runs under the request's
// context bounded by CheckTimeout: a check that hangs fails, it never
// makes the probe hang.
//
// A Status is safe for concurrent use: checks run in the HTTP server's
// goroutines while the program calls Started and Draining.
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CheckTimeout bounds one probe request's checks.
const CheckTimeout = 5 * time.Second

// Check is one named condition. Fn returns nil when the condition holds, or
// an error saying why not. It must return promptly once ctx ends.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Status holds a process's liveness and readiness. The zero value is not
// usable: create one with NewStatus.
type Status struct {
	started  atomic.Bool
	draining atomic.Value // string: why, once draining
	mu       sync.Mutex
	live     []Check
	ready    []Check
}

// NewStatus returns a Status that is live, not started and not ready.
func NewStatus() *Status { return &Status{} }

// AddLive adds a liveness check.
func (s *Status) AddLive(name string, fn func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = append(s.live, Check{Name: name, Fn: fn})
}

// AddReady adds a readiness check.
func (s *Status) AddReady(name string, fn func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = append(s.ready, Check{Name: name, Fn: fn})
}

// Started records that the start-up checks passed. Calling it again has no
// effect.
func (s *Status) Started() { s.started.Store(true) }

// Draining records that the shutdown began, for the reason why: /readyz
// answers 503 from now on, whatever the checks say. The first reason is
// kept.
func (s *Status) Draining(why string) { s.draining.CompareAndSwap(nil, why) }

// Ready runs the readiness checks and returns nil when the process is
// ready, else an error naming every reason it is not.
func (s *Status) Ready(ctx context.Context) error {
	_, err := s.readiness(ctx)
	return err
}

func (s *Status) readiness(ctx context.Context) ([]string, error) {
	var lines []string
	var errs []error
	if !s.started.Load() {
		lines = append(lines, "fail started: the start-up checks have not passed yet")
		errs = append(errs, errors.New("started: the start-up checks have not passed yet"))
	} else {
		lines = append(lines, "ok started")
	}
	if why, ok := s.draining.Load().(string); ok {
		lines = append(lines, "fail draining: "+why)
		errs = append(errs, errors.New("draining: "+why))
	}
	l, err := run(ctx, s.checks(&s.ready))
	return append(lines, l...), errors.Join(append(errs, err)...)
}

func (s *Status) checks(p *[]Check) []Check {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Check(nil), (*p)...)
}

// run runs checks one after the other (they are few and cheap) and returns
// one line per check and the failures joined.
func run(ctx context.Context, checks []Check) ([]string, error) {
	var lines []string
	var errs []error
	for _, c := range checks {
		if err := c.Fn(ctx); err != nil {
			lines = append(lines, "fail "+c.Name+": "+oneLine(err.Error()))
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
			continue
		}
		lines = append(lines, "ok "+c.Name)
	}
	return lines, errors.Join(errs...)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// Handler returns the HTTP handler of /livez, /readyz, /startupz and, when
// metrics is not nil, /metrics. Other paths answer 404; other methods than
// GET and HEAD 405.
func (s *Status) Handler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), CheckTimeout)
		defer cancel()
		lines, err := run(ctx, s.checks(&s.live))
		write(w, err == nil, append([]string{"ok process"}, lines...))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), CheckTimeout)
		defer cancel()
		lines, err := s.readiness(ctx)
		write(w, err == nil, lines)
	})
	mux.HandleFunc("GET /startupz", func(w http.ResponseWriter, r *http.Request) {
		if s.started.Load() {
			write(w, true, []string{"ok started"})
			return
		}
		write(w, false, []string{"fail started: the start-up checks have not passed yet"})
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

func write(w http.ResponseWriter, ok bool, lines []string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}

// Server is a running health listener. Create it with Listen.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
	log  *slog.Logger
}

// Listen listens on addr (such as ":8080" or "127.0.0.1:0") and serves h
// there in a goroutine of its own until Shutdown. Its server bounds reading
// a request's headers, so that a client cannot hold a connection open
// without sending one.
func Listen(addr string, h http.Handler, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health listener: %w", err)
	}
	s := &Server{
		srv: &http.Server{
			Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 2 * CheckTimeout, IdleTimeout: time.Minute,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		ln: ln, done: make(chan error, 1), log: logger,
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops the listener at once and lets requests in progress finish
// within timeout; then it closes their connections. It returns when the
// server has stopped, within timeout (plus the time to close connections).
// Calling it again returns at once.
func (s *Server) Shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("health listener: shutdown: %w", err), s.srv.Close())
	}
	if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	s.done <- http.ErrServerClosed // for a later call
	return err
}
