package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// TestOpenStore_FakeGateway_SendsNoPriority checks that the worker's Cosmos
// DB requests carry no x-ms-cosmos-priority-level, so that Cosmos DB serves
// them at High, its default, while the relay's change feed reads and
// orderctl's reads go at Low. The fake gateway answers the account read
// and a document read (404) and records the header of every request.
func TestOpenStore_FakeGateway_SendsNoPriority(t *testing.T) {
	var (
		mu    sync.Mutex
		sent  []string // "METHOD path: priority" of every request
		reads int
	)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Method+" "+r.URL.Path+": "+r.Header.Get("x-ms-cosmos-priority-level"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/":
			loc := []map[string]string{{"name": "local", "databaseAccountEndpoint": srv.URL + "/"}}
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "fake", "writableLocations": loc, "readableLocations": loc,
				"userConsistencyPolicy": map[string]string{"defaultConsistencyLevel": "Session"}})
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/dbs/orders/colls/orders/docs/"):
			mu.Lock()
			reads++
			mu.Unlock()
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"NotFound","message":"fake"}`))
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL)
			http.Error(w, "unexpected", http.StatusNotImplemented)
		}
	}))
	t.Cleanup(srv.Close)
	cfg := config{CosmosEndpoint: srv.URL + "/", CosmosKey: cosmiumtest.Key, CosmosDatabase: "orders", CosmosContainer: "orders"}
	s, err := openStore(context.Background(), cfg, telemetry.Disabled(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadDocument(context.Background(), "ord-1", "ord-1"); err == nil {
		t.Fatal("read of a missing order succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if reads == 0 {
		t.Fatal("no document read reached the gateway")
	}
	for _, p := range sent {
		if !strings.HasSuffix(p, ": ") {
			t.Errorf("request %s: the worker's requests must carry no priority", p)
		}
	}
}
