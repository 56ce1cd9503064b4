package health_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/health"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestProbes(t *testing.T) {
	var breakerOpen, wedged atomic.Bool
	s := health.NewStatus()
	s.AddReady("breaker", func(context.Context) error {
		if breakerOpen.Load() {
			return errors.New("open")
		}
		return nil
	})
	s.AddLive("handlers", func(context.Context) error {
		if wedged.Load() {
			return errors.New("a handler outlived its deadline")
		}
		return nil
	})
	h := s.Handler(nil)
	type want struct {
		path string
		code int
		body string
	}
	steps := []struct {
		name string
		do   func()
		want []want
	}{
		{"before start-up", func() {}, []want{
			{"/livez", 200, "ok handlers"}, {"/readyz", 503, "fail started"}, {"/startupz", 503, "fail started"}}},
		{"started", s.Started, []want{
			{"/readyz", 200, "ok started\nok breaker"}, {"/startupz", 200, "ok started"}}},
		{"breaker open", func() { breakerOpen.Store(true) }, []want{
			{"/readyz", 503, "fail breaker: open"}, {"/livez", 200, "ok"}}},
		{"breaker closed again", func() { breakerOpen.Store(false) }, []want{{"/readyz", 200, "ok breaker"}}},
		{"wedged", func() { wedged.Store(true) }, []want{
			{"/livez", 503, "fail handlers: a handler outlived its deadline"}, {"/readyz", 200, "ok"}}},
		{"draining", func() { wedged.Store(false); s.Draining("terminated signal received") }, []want{
			{"/readyz", 503, "fail draining: terminated signal received"}, {"/livez", 200, "ok"}, {"/startupz", 200, "ok"}}},
		{"no metrics handler, no route", func() {}, []want{{"/metrics", 404, ""}}},
	}
	for _, st := range steps {
		st.do()
		for _, w := range st.want {
			code, body := get(t, h, w.path)
			if code != w.code || !strings.Contains(body, w.body) {
				t.Errorf("%s: GET %s = %d %q, want %d containing %q", st.name, w.path, code, body, w.code, w.body)
			}
		}
	}
	if err := s.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "draining") {
		t.Errorf("Ready = %v, want draining", err)
	}
}

func TestMetricsRoute(t *testing.T) {
	s := health.NewStatus()
	h := s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "orders_total 3\n") }))
	if code, body := get(t, h, "/metrics"); code != 200 || body != "orders_total 3\n" {
		t.Errorf("GET /metrics = %d %q", code, body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/readyz", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz = %d, want 405", rec.Code)
	}
}

// A check that does not return is cut off by the request's deadline: the
// probe fails, it does not hang.
func TestCheckHonoursDeadline(t *testing.T) {
	s := health.NewStatus()
	s.Started()
	s.AddReady("store", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	rec := httptest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil).WithContext(ctx))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "fail store: context deadline exceeded") {
		t.Errorf("GET /readyz = %d %q", rec.Code, rec.Body.String())
	}
}

// Shutdown is bounded: a request that never finishes is cut off when the
// timeout ends, and the listener stops accepting at once.
func TestShutdownIsBounded(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{})
	s := health.NewStatus()
	srv, err := health.Listen("127.0.0.1:0", s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + srv.Addr().String()
	resp, err := http.Get(url + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /livez = %d", resp.StatusCode)
	}
	hung := make(chan error, 1)
	go func() {
		resp, err := http.Get(url + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	<-entered
	if err := srv.Shutdown(100 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a request in progress = %v, want the deadline exceeded", err)
	}
	if err := <-hung; err == nil {
		t.Error("the hung request got an answer; its connection should have been closed")
	}
	if _, err := http.Get(url + "/livez"); err == nil {
		t.Error("the listener still accepts after Shutdown")
	}
	if err := srv.Shutdown(time.Second); err != nil {
		t.Errorf("second Shutdown = %v", err)
	}
}
