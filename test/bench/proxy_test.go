package bench_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/bench"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// TestLatencyProxyCarriesEverySDKRequest: the SDK, given the proxy's
// endpoint, sends every request through it, and each one waits the
// latency. Without the rewrite of the advertised endpoint only the first
// request (the account document) passes the proxy: the SDK sends the rest
// straight to cosmium.
func TestLatencyProxyCarriesEverySDKRequest(t *testing.T) {
	srv := cosmiumtest.Start(t)
	var mu sync.Mutex
	var waits []time.Duration
	p, err := bench.NewLatencyProxy(srv.Endpoint, bench.ProxyOptions{
		Latency: 5 * time.Millisecond,
		Sleep: func(_ context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, err := cosmosstore.NewClientWithKey(p.Endpoint(), srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, c, "d", "c", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	before := p.Requests()
	s, err := cosmosstore.New(c, "d", "c", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	o := order.Order{OrderID: "ord-1", CustomerID: "c-1", Currency: "EUR",
		Lines: []order.Line{{SKU: "A", Quantity: 1, UnitPriceMinor: 100}}, TotalMinor: 100, PlacedAt: time.Now().UTC()}
	w := order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now())
	docs, err := w.Documents()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateBatch(ctx, w.PartitionKey(), docs); err != nil {
		t.Fatal(err)
	}
	if _, err := order.ReadOrder(ctx, s, o.OrderID); err != nil {
		t.Fatal(err)
	}
	if got := p.Requests() - before; got != 2 {
		t.Errorf("a create and a read sent %d requests through the proxy, want 2", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if int64(len(waits)) != p.Requests() {
		t.Errorf("%d waits for %d requests, want one each", len(waits), p.Requests())
	}
	for _, d := range waits {
		if d != 5*time.Millisecond {
			t.Errorf("waited %v, want the 5ms latency", d)
		}
	}
}

// TestLatencyProxyAdvertisesItself: the account document read through the
// proxy names the proxy's host in every location and keeps the rest.
func TestLatencyProxyAdvertisesItself(t *testing.T) {
	srv := cosmiumtest.Start(t)
	p, err := bench.NewLatencyProxy(srv.Endpoint, bench.ProxyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	direct := accountDocument(t, srv.Endpoint, srv.Key)
	proxied := accountDocument(t, p.Endpoint(), srv.Key)
	self, _ := url.Parse(p.Endpoint())
	cosmium, _ := url.Parse(srv.Endpoint)
	for _, key := range []string{"writableLocations", "readableLocations"} {
		locs := proxied[key].([]any)
		if len(locs) == 0 {
			t.Fatalf("%s is empty", key)
		}
		for i, l := range locs {
			adv, err := url.Parse(l.(map[string]any)["databaseAccountEndpoint"].(string))
			if err != nil || adv.Host != self.Host {
				t.Errorf("%s[%d] advertises %v, want the proxy's host %s", key, i, adv, self.Host)
			}
			orig, _ := url.Parse(direct[key].([]any)[i].(map[string]any)["databaseAccountEndpoint"].(string))
			if orig.Host != cosmium.Host || orig.Scheme != adv.Scheme {
				t.Errorf("%s[%d]: cosmium advertises %v, the proxy %v: want cosmium's own host and the same scheme", key, i, orig, adv)
			}
		}
	}
	if proxied["id"] != direct["id"] || proxied["userConsistencyPolicy"] == nil {
		t.Errorf("the proxy changed more than the endpoints: %v", proxied)
	}
}

func TestNewLatencyProxyRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		target string
		o      bench.ProxyOptions
	}{
		{"not a url", bench.ProxyOptions{}},
		{"http://127.0.0.1:1/", bench.ProxyOptions{Latency: -time.Millisecond}},
	} {
		if p, err := bench.NewLatencyProxy(tc.target, tc.o); err == nil {
			p.Close()
			t.Errorf("NewLatencyProxy(%q, %+v) succeeded, want an error", tc.target, tc.o)
		}
	}
}

// accountDocument reads the account document, GET /, signed with the
// account key as Cosmos DB's master-key authorization requires: an
// HMAC-SHA256 of the verb, the (empty) resource type and link and the date.
func accountDocument(t *testing.T, endpoint, key string) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	date := strings.ToLower(time.Now().UTC().Format(http.TimeFormat))
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, k)
	mac.Write([]byte("get\n\n\n" + date + "\n\n"))
	sig := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2020-07-15")
	req.Header.Set("Authorization", url.QueryEscape("type=master&ver=1.0&sig="+sig))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", endpoint, resp.StatusCode, err, b)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}
