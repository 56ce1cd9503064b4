package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// TestOpenStore_FakeGateway_ReadsAtLowPriority checks that orderctl's Cosmos
// DB reads carry x-ms-cosmos-priority-level: Low, against a fake gateway
// that answers the account read and a document read (404) and records the
// header of each request.
func TestOpenStore_FakeGateway_ReadsAtLowPriority(t *testing.T) {
	var (
		mu   sync.Mutex
		docs []string // the priority header of each document read
	)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/":
			loc := []map[string]string{{"name": "local", "databaseAccountEndpoint": srv.URL + "/"}}
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "fake", "writableLocations": loc, "readableLocations": loc,
				"userConsistencyPolicy": map[string]string{"defaultConsistencyLevel": "Session"}})
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/dbs/orders/colls/orders/docs/"):
			mu.Lock()
			docs = append(docs, r.Header.Get("x-ms-cosmos-priority-level"))
			mu.Unlock()
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"NotFound","message":"fake"}`))
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL)
			http.Error(w, "unexpected", http.StatusNotImplemented)
		}
	}))
	t.Cleanup(srv.Close)
	s, err := openStore(config{CosmosEndpoint: srv.URL + "/", CosmosKey: cosmiumtest.Key,
		CosmosDatabase: "orders", CosmosContainer: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadDocument(context.Background(), "ord-1", "ord-1"); err == nil {
		t.Fatal("read of a missing order succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(docs) == 0 {
		t.Fatal("no document read reached the gateway")
	}
	for i, p := range docs {
		if p != "Low" {
			t.Errorf("document read %d sent priority %q, want Low", i, p)
		}
	}
}
