package emulator_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/emulator"
)

// TestEnvExampleStartsTheEmulators checks that `cp .env.example .env &&
// docker compose up -d` has what compose requires: every variable the
// compose file takes with ${VAR:?...} is set, non-empty, in .env.example,
// and the password meets SQL Server's policy.
func TestEnvExampleStartsTheEmulators(t *testing.T) {
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(readText(t, ".env.example")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf(".env.example: %q is not KEY=value", line)
		}
		env[k] = strings.Trim(v, `"'`)
	}
	required := 0
	for _, m := range regexpAll(`\$\{(\w+):\?`, readText(t, "docker-compose.yaml")) {
		required++
		if env[m] == "" {
			t.Errorf("docker-compose.yaml requires %s, which .env.example leaves empty or unset", m)
		}
	}
	if required == 0 {
		t.Error("docker-compose.yaml requires nothing from .env; expected ACCEPT_EULA and MSSQL_SA_PASSWORD")
	}
	if err := emulator.CheckSAPassword(env["MSSQL_SA_PASSWORD"]); err != nil {
		t.Errorf(".env.example MSSQL_SA_PASSWORD: %v", err)
	}
	if v := env["ACCEPT_EULA"]; v != "Y" && v != "N" {
		t.Errorf(".env.example ACCEPT_EULA=%q, want Y or N", v)
	}
	if strings.ContainsAny(env["MSSQL_SA_PASSWORD"], "$#") {
		t.Error(".env.example MSSQL_SA_PASSWORD contains $ or #, which compose interprets")
	}
}

func TestCheckSAPassword(t *testing.T) {
	for _, tt := range []struct {
		pw string
		ok bool
	}{
		{"", false},
		{"Ab1-", false},                          // too short
		{"abcdefgh1", false},                     // two classes
		{"ABCDEFGH-", false},                     // two classes
		{"abcdEFGH", false},                      // two classes
		{"abcdEFG1", true},                       // three
		{"abcd-fg1", true},                       // three
		{"Local-emulator-0nly", true},            // four
		{strings.Repeat("aB1", 43), false},       // 129 characters
		{strings.Repeat("aB1", 42) + "aB", true}, // 128
	} {
		err := emulator.CheckSAPassword(tt.pw)
		if (err == nil) != tt.ok {
			t.Errorf("CheckSAPassword(%q) = %v, want ok=%v", tt.pw, err, tt.ok)
		}
		if err != nil && !errors.Is(err, emulator.ErrWeakPassword) {
			t.Errorf("CheckSAPassword(%q) = %v, want ErrWeakPassword", tt.pw, err)
		}
	}
}

// TestWaitReadyPollsUntilHealthy serves 503 twice and then 200, as the
// Service Bus emulator does while it waits for its database.
func TestWaitReadyPollsUntilHealthy(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		if calls.Add(1) <= 2 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("healthy"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := emulator.WaitReady(ctx, time.Millisecond, emulator.HTTPHealthProbe(srv.Client(), srv.URL+"/health")); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d requests, want 3 (two 503s, then 200)", n)
	}
}

// TestWaitReadyReportsWhyNotReady: when the deadline passes, the error says
// both that time ran out and what the last probe saw.
func TestWaitReadyReportsWhyNotReady(t *testing.T) {
	notYet := errors.New("connection reset by peer")
	ctx, cancel := context.WithCancel(context.Background())
	var calls int
	err := emulator.WaitReady(ctx, time.Millisecond, func(context.Context) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return notYet
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, notYet) {
		t.Fatalf("WaitReady = %v, want context.Canceled and the probe's error", err)
	}
	if calls != 3 {
		t.Errorf("%d probes, want 3", calls)
	}
}

// TestHTTPHealthProbeRefusesNon200 covers a proxy that accepts the
// connection and answers before the emulator is up.
func TestHTTPHealthProbeRefusesNon200(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer srv.Close()
	if err := emulator.HTTPHealthProbe(srv.Client(), srv.URL+"/health")(context.Background()); err == nil || !strings.Contains(err.Error(), "502") {
		t.Errorf("probe = %v, want an error naming 502", err)
	}
}

// TestCosmosProbe runs the probe against cosmium (a Cosmos DB emulator that
// runs without Docker): ready when the gateway answers, not ready when
// nothing serves the endpoint.
func TestCosmosProbe(t *testing.T) {
	srv := cosmiumtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := cosmosstore.NewClientWithKey(srv.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := emulator.CosmosProbe(client)(ctx); err != nil {
		t.Errorf("probe against a serving emulator: %v", err)
	}

	// The wrong key: refused at once.
	wrongKey, err := cosmosstore.NewClientWithKey(srv.Endpoint, "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IHdyb25nIGtleQ==", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := emulator.CosmosProbe(wrongKey)(ctx); !errors.Is(err, emulator.ErrRefused) {
		t.Errorf("probe with a wrong key = %v, want ErrRefused", err)
	}

	// A port that refuses connections: nothing listens on it any more.
	l := httptest.NewServer(http.NotFoundHandler())
	endpoint := l.URL + "/"
	l.Close()
	down, err := cosmosstore.NewClientWithKey(endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if err := emulator.CosmosProbe(down)(pctx); err == nil {
		t.Error("probe against a closed port reported ready")
	}
}

// TestWaitReadyStopsOnRefusal: a wrong key does not fix itself; waiting to
// the deadline would only hide it.
func TestWaitReadyStopsOnRefusal(t *testing.T) {
	calls := 0
	err := emulator.WaitReady(context.Background(), time.Millisecond, func(context.Context) error {
		calls++
		return fmt.Errorf("%w: 401 Unauthorized", emulator.ErrRefused)
	})
	if !errors.Is(err, emulator.ErrRefused) || calls != 1 {
		t.Errorf("WaitReady = %v after %d probes, want ErrRefused after 1", err, calls)
	}
}
