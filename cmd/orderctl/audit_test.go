package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
)

// auditEnv is cosmium behind a feed proxy behind a recorder of every
// request's priority header, with a store on it (at the client's default
// priority) to write with.
type auditEnv struct {
	endpoint string
	store    *cosmosstore.Store

	mu   sync.Mutex
	reqs []string // "METHOD PATH priority"
}

func newAuditEnv(t *testing.T) *auditEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs cosmium; skipped with -short")
	}
	srv := cosmiumtest.Start(t)
	p, err := e2etest.NewFeedProxy(srv.Endpoint, srv.Key, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	e := &auditEnv{}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.reqs = append(e.reqs, r.Method+" "+r.URL.Path+" "+r.Header.Get("x-ms-cosmos-priority-level"))
		e.mu.Unlock()
		p.ServeHTTP(w, r)
	}))
	p.SetAddr(hs.Listener.Addr().String())
	hs.Start()
	t.Cleanup(hs.Close)
	e.endpoint = p.Endpoint
	c, err := cosmosstore.NewClientWithKey(e.endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), c, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	if e.store, err = cosmosstore.New(c, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ord-1", "ord-2", "ord-3"} {
		o := order.Order{OrderID: id, CustomerID: "c", Currency: "EUR", Lines: []order.Line{{SKU: "S", Quantity: 1, UnitPriceMinor: 100}},
			TotalMinor: 100, PlacedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
		e2etest.WriteOrder(t, e.store, order.NewWrite(o, id, o.RequestHash(), time.Now().Add(-time.Hour)))
	}
	return e
}

func (e *auditEnv) getenv(k string) string {
	return map[string]string{"COSMOS_ENDPOINT": e.endpoint, "COSMOS_KEY": cosmiumtest.Key}[k]
}

// audit runs orderctl audit with args and returns its output and exit
// status.
func (e *auditEnv) audit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut strings.Builder
	err := run(context.Background(), append([]string{"audit", "-relays="}, args...), e.getenv, &out, &errOut)
	return out.String(), cli.Exit("orderctl", err, &errOut)
}

// TestAudit_Cosmium_ExitStatusAndOutput: orderctl audit against cosmium
// exits 0 on a clean store and prints every invariant; with an event planted
// without its order it exits 1 and names the event, in text and in JSON.
func TestAudit_Cosmium_ExitStatusAndOutput(t *testing.T) {
	e := newAuditEnv(t)
	out, code := e.audit(t)
	if code != 0 || !strings.Contains(out, "0 violations") || !strings.Contains(out, "order-event     ok        3 checked") {
		t.Fatalf("clean store: exit %d, output:\n%s", code, out)
	}
	// The summary gives the rate; its figure depends on the machine.
	if !regexp.MustCompile(`(?m)^audit of \d+ documents \(3 orders\) in \d+ pages, \d+\.\ds: \d+\.\d orders/s$`).MatchString(out) {
		t.Errorf("clean store: no summary with the rate:\n%s", out)
	}
	ev := order.NewWrite(order.Order{OrderID: "ghost", CustomerID: "c", Currency: "EUR"}, "ghost", strings.Repeat("a", 64), time.Now()).Event
	body, _ := json.Marshal(ev)
	if _, err := e.store.CreateBatch(t.Context(), "ghost", []idempotent.Document{{ID: ev.ID, Body: body}}); err != nil {
		t.Fatal(err)
	}
	out, code = e.audit(t)
	if code != 1 || !strings.Contains(out, "event-order     VIOLATED  1 of 4 checked") || !strings.Contains(out, "OrderAccepted:ghost: ") {
		t.Fatalf("planted event without its order: exit %d, output:\n%s", code, out)
	}
	out, code = e.audit(t, "-format", "json")
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 1 || err != nil {
		t.Fatalf("-format json: exit %d, %v:\n%s", code, err, out)
	}
	if r := rep.Result(audit.EventOrder); r.Violations != 1 || r.First[0].ID != "OrderAccepted:ghost" {
		t.Fatalf("-format json: event-order %+v", r)
	}
}

// TestAudit_Cosmium_ResumesFromThePrintedContinuation: an audit stopped by
// -max-pages exits 2 and prints a continuation; the audit resumed with it
// finds the violation the first part had not reached.
func TestAudit_Cosmium_ResumesFromThePrintedContinuation(t *testing.T) {
	e := newAuditEnv(t)
	out, code := e.audit(t, "-page-size", "1", "-max-pages", "2")
	m := regexp.MustCompile(`resume with -continuation (\S+)`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("stopped by -max-pages: exit %d, output:\n%s", code, out)
	}
	pages := 0
	for cont := m[1]; cont != ""; pages++ {
		out, code = e.audit(t, "-page-size", "1", "-max-pages", "2", "-continuation", cont)
		if code != 0 {
			t.Fatalf("resumed: exit %d, output:\n%s", code, out)
		}
		cont = ""
		if m := regexp.MustCompile(`resume with -continuation (\S+)`).FindStringSubmatch(out); m != nil {
			cont = m[1]
		}
		if pages > 20 {
			t.Fatal("the audit does not end")
		}
	}
	if !strings.Contains(out, "0 violations") {
		t.Fatalf("last part:\n%s", out)
	}
}

// TestAudit_Cosmium_ReadsAtLowPriority: every request of orderctl audit
// that reads documents (the change feed, the partition queries) carries
// x-ms-cosmos-priority-level: Low; a clean store costs no point read.
func TestAudit_Cosmium_ReadsAtLowPriority(t *testing.T) {
	e := newAuditEnv(t)
	e.mu.Lock()
	e.reqs = nil
	e.mu.Unlock()
	if out, code := e.audit(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	kinds := map[string]int{}
	for _, r := range e.reqs {
		f := strings.Fields(r)
		if !strings.HasPrefix(f[1], "/dbs/orders/colls/orders/docs") {
			continue // the account, the container and its partition key ranges: metadata, which the SDK sends without
		}
		kind := f[0]
		if f[0] == "GET" && f[1] != "/dbs/orders/colls/orders/docs" {
			kind = "GET one"
		}
		kinds[kind]++
		if len(f) < 3 || f[2] != "Low" {
			t.Errorf("request %q: want priority Low", r)
		}
	}
	if kinds["GET"] < 2 || kinds["POST"] != 3 || kinds["GET one"] != 0 {
		t.Errorf("document requests by method %v: want the change feed (GET), a partition query per order (POST, 3) and no point read (GET one): the query returns the order of every event", kinds)
	}
}

// TestAuditConfig_ReportsEveryProblem: the settings are validated all at
// once, and a mistake exits 2.
func TestAuditConfig_ReportsEveryProblem(t *testing.T) {
	env := map[string]string{"AUDIT_CONSUMERS": "loyalty,a:b,loyalty@yesterday", "AUDIT_PAGE_SIZE": "0", "AUDIT_FORMAT": "xml"}
	var out, errOut strings.Builder
	err := run(context.Background(), []string{"audit", "-max-relay-lag", "0s"}, func(k string) string { return env[k] }, &out, &errOut)
	code := cli.Exit("orderctl", err, io.Discard)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %v", code, err)
	}
	for _, want := range []string{"COSMOS_ENDPOINT (-cosmos-endpoint) is required", `"a:b"`, "yesterday", "AUDIT_PAGE_SIZE (-page-size) 0", `AUDIT_FORMAT (-format) "xml"`, "AUDIT_MAX_RELAY_LAG (-max-relay-lag) 0s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	var help strings.Builder
	if err := run(context.Background(), []string{"audit", "-h"}, func(string) string { return "" }, io.Discard, &help); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage: orderctl audit", "Exit status: 0 clean; 1 violations; 2", "AUDIT_CONSUMERS", "-continuation"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("audit -h does not say %q", want)
		}
	}
}

// TestAuditConfig_EmptyRelayNameTurnsRelayChecksOff: RELAY_NAME set to ""
// turns relay-lag and relay-lease off, as its help says, where RELAY_NAME
// not set checks the deployed relay; a -relays flag overrides both.
func TestAuditConfig_EmptyRelayNameTurnsRelayChecksOff(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{name: "not set", env: map[string]string{}, want: []string{"orderrelay"}},
		{name: "set, empty", env: map[string]string{"RELAY_NAME": ""}, want: nil},
		{name: "set, blank", env: map[string]string{"RELAY_NAME": " "}, want: nil},
		{name: "two relays", env: map[string]string{"RELAY_NAME": "r1, r2"}, want: []string{"r1", "r2"}},
		{name: "empty, the flag names one", env: map[string]string{"RELAY_NAME": ""}, args: []string{"-relays", "r9"}, want: []string{"r9"}},
		{name: "set, the flag empties it", env: map[string]string{"RELAY_NAME": "r1"}, args: []string{"-relays="}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["COSMOS_ENDPOINT"] = "https://localhost:8081/"
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			fs := flag.NewFlagSet("audit", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseAuditConfig(fs, tt.args, lookup)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.relays(); !slices.Equal(got, tt.want) {
				t.Errorf("relays %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAuditProgress: where stderr is not a terminal, a progress line every
// interval of the audit's time, the first after one interval; on a
// terminal one line, redrawn at most every 200 ms and cleared at the end.
func TestAuditProgress(t *testing.T) {
	at := func(d time.Duration, orders int) audit.Progress {
		return audit.Progress{Documents: 3 * orders, Pages: orders / 10, Orders: orders, Range: 1, Ranges: 2, Elapsed: d}
	}
	feed := func(p *auditProgress) {
		for _, pr := range []audit.Progress{at(0, 10), at(30*time.Second, 100), at(61*time.Second, 200), at(61100*time.Millisecond, 201),
			at(90*time.Second, 300), at(121*time.Second, 400), at(240*time.Second, 800)} {
			p.update(pr)
		}
		p.done()
	}
	var log strings.Builder
	feed(&auditProgress{w: &log, every: time.Minute, next: time.Minute})
	want := "audit: feed range 1 of 2, 20 pages, 600 documents, 200 orders, 3.3 orders/s, 1m1s\n" +
		"audit: feed range 1 of 2, 40 pages, 1200 documents, 400 orders, 3.3 orders/s, 2m1s\n" +
		"audit: feed range 1 of 2, 80 pages, 2400 documents, 800 orders, 3.3 orders/s, 4m0s\n"
	if log.String() != want {
		t.Errorf("log lines:\n%s\nwant:\n%s", log.String(), want)
	}
	var tty strings.Builder
	feed(&auditProgress{w: &tty, terminal: true, every: time.Minute})
	if got := strings.Count(tty.String(), "\r\033[K"); got != 7 || !strings.HasSuffix(tty.String(), "4m0s\r\033[K") || strings.Contains(tty.String(), "\n") {
		t.Errorf("terminal: %d redraws (want 6 lines and the clearing), %q", got, tty.String())
	}
}
