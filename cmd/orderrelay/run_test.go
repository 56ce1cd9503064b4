package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfig(t *testing.T) {
	azure := map[string]string{
		"SERVICEBUS_NAMESPACE": "sb-x.servicebus.windows.net",
		"COSMOS_ENDPOINT":      "https://x.documents.azure.com:443/",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range azure {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr []string
		check   func(t *testing.T, c config)
	}{
		{name: "azd outputs are enough", env: azure, check: func(t *testing.T, c config) {
			if c.Topic != "order-events" || c.Name != "orderrelay" || c.CosmosContainer != "orders" ||
				c.LeaseDuration != relay.DefaultLeaseDuration || c.PollInterval != relay.DefaultPollInterval ||
				c.CheckpointInterval != relay.DefaultCheckpointInterval || c.options(nil, relay.Hooks{}).CheckpointInterval != relay.DefaultCheckpointInterval {
				t.Errorf("config = %+v", c)
			}
		}},
		{name: "environment and flags", env: with("SERVICEBUS_TOPIC", "events", "RELAY_LEASE_DURATION", "PT1M", "RELAY_NAME", "r1"),
			args: []string{"-poll-interval", "250ms", "-name", "r2", "-checkpoint-interval", "3s"}, check: func(t *testing.T, c config) {
				if c.Topic != "events" || c.LeaseDuration != time.Minute || c.PollInterval != 250*time.Millisecond || c.Name != "r2" ||
					c.options(nil, relay.Hooks{}).CheckpointInterval != 3*time.Second {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "nothing set names every missing variable", env: map[string]string{},
			wantErr: []string{"SERVICEBUS_NAMESPACE", "SERVICEBUS_CONNECTION_STRING", "COSMOS_ENDPOINT"}},
		{name: "every problem at once", env: with("RELAY_NAME", "a:b", "RELAY_LEASE_DURATION", "10s",
			"RELAY_CALL_TIMEOUT", "5s", "RELAY_PAGE_SIZE", "0", "RELAY_POLL_INTERVAL", "0s", "RELAY_CHECKPOINT_INTERVAL", "-1s"), args: []string{"-topic", ""},
			wantErr: []string{"SERVICEBUS_TOPIC", "RELAY_NAME", "RELAY_LEASE_DURATION", "RELAY_PAGE_SIZE", "RELAY_POLL_INTERVAL", "RELAY_CHECKPOINT_INTERVAL"}},
		{name: "unparsable variable", env: with("RELAY_BATCH_MESSAGES", "many"), wantErr: []string{`RELAY_BATCH_MESSAGES="many"`}},
		{name: "two Service Bus identities", env: with("SERVICEBUS_CONNECTION_STRING", "Endpoint=sb://x"), wantErr: []string{"only one"}},
		{name: "emulator switch needs a key", env: with("COSMOS_INSECURE_SKIP_VERIFY", "true"), wantErr: []string{"COSMOS_INSECURE_SKIP_VERIFY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseConfig(fs, tt.args, envOf(tt.env))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, c)
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not name %s:\n%v", want, err)
				}
			}
		})
	}
}

func TestRun_HelpAndRefusals(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, envOf(nil), io.Discard, &stderr); err != nil {
		t.Errorf("-h: %v", err)
	}
	if !strings.Contains(stderr.String(), "RELAY_LEASE_DURATION") {
		t.Errorf("usage does not list the variables:\n%s", stderr.String())
	}
	err := run(context.Background(), nil, envOf(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "COSMOS_ENDPOINT") {
		t.Errorf("empty environment: %v", err)
	}
	var ue *cli.UsageError
	if err := run(context.Background(), []string{"-nope"}, envOf(nil), io.Discard, io.Discard); !errors.As(err, &ue) {
		t.Errorf("unknown flag: %v, want a *cli.UsageError", err)
	}
}

// topic is a fake relay.Sender that records the MessageIds it was sent;
// block, when set, holds every send until it is closed or the send's
// context ends.
type topic struct {
	mu    sync.Mutex
	ids   []string
	msgs  []*azservicebus.Message
	block chan struct{}
}

type batch struct{ msgs []*azservicebus.Message }

func (b *batch) AddMessage(m *azservicebus.Message, _ *azservicebus.AddMessageOptions) error {
	b.msgs = append(b.msgs, m)
	return nil
}
func (b *batch) NumMessages() int32 { return int32(len(b.msgs)) }

func (t *topic) NewBatch(context.Context) (relay.Batch, error) { return &batch{}, nil }
func (t *topic) SendBatch(ctx context.Context, b relay.Batch) error {
	if t.block != nil {
		select {
		case <-t.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range b.(*batch).msgs {
		t.ids = append(t.ids, *m.MessageID)
		t.msgs = append(t.msgs, m)
	}
	return nil
}

func (t *topic) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ids)
}

func writeOrders(t *testing.T, s *memstore.Store, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("ord-%d", i)
		o := order.Order{OrderID: id, CustomerID: "c", Currency: "EUR", Lines: []order.Line{{SKU: "S", Quantity: 1, UnitPriceMinor: 100}},
			TotalMinor: 100, PlacedAt: time.Now()}
		e2etest.WriteOrder(t, s, order.NewWrite(o, id, o.RequestHash(), time.Now()))
	}
}

func testConfig(t *testing.T) config {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := parseConfig(fs, []string{"-poll-interval", "1ms", "-call-timeout", "2s"}, envOf(map[string]string{
		"SERVICEBUS_CONNECTION_STRING": "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;",
		"COSMOS_ENDPOINT":              "http://127.0.0.1:1/", "COSMOS_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The relay loop as the command runs it, on memstore and a fake topic:
// every event is published, and the first signal releases the leases with
// their checkpoints.
func TestServe_PublishesThenReleasesItsLeasesAtTheFirstSignal(t *testing.T) {
	s := memstore.New("/orderId")
	feed := s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 3})
	writeOrders(t, s, 25)
	tp := &topic{}
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&syncWriter{w: &logs}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, testConfig(t), logger, pieces{feed: feed, leases: s, sender: tp}) }()
	deadline := time.Now().Add(10 * time.Second)
	for tp.count() < 25 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if tp.count() != 25 {
		t.Errorf("%d published, want 25", tp.count())
	}
	ranges, _ := feed.FeedRanges(context.Background())
	for _, fr := range ranges {
		id := relay.LeaseID("orderrelay", fr)
		body, _, err := s.ReadDocument(context.Background(), id, id)
		var l relay.Lease
		if err != nil || json.Unmarshal(body, &l) != nil || l.Owner != "" {
			t.Errorf("lease %s after shutdown: %s, %v; want it released", fr, body, err)
		}
	}
	if !strings.Contains(logs.String(), `"published":25`) {
		t.Errorf("the stop is not logged with the count:\n%s", logs.String())
	}
}

// The relay's options are the order example's outbox: each OrderAccepted
// event is published with MessageId = its event id, Subject = its event
// type and the order id as the orderId property, and the lease documents,
// beside the orders, carry their id under orderId, the container's
// partition key path.
func TestOptions_PublishTheOrderExamplesOutbox(t *testing.T) {
	s := memstore.New("/orderId") // partitioned on /orderId, as the orders container
	feed := s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 2})
	writeOrders(t, s, 5)
	tp := &topic{}
	cfg := testConfig(t)
	r, err := relay.New(feed, s, tp, cfg.options(slog.New(slog.DiscardHandler), relay.Hooks{}))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := r.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Stats(); st.Published != 5 || st.Unpublishable != 0 || len(tp.msgs) != 5 {
		t.Fatalf("stats %+v, %d messages; want the 5 events published", st, len(tp.msgs))
	}
	for _, m := range tp.msgs {
		id, _ := m.ApplicationProperties["orderId"].(string)
		if id == "" || *m.MessageID != order.EventID(id) || *m.Subject != order.EventOrderAccepted {
			t.Errorf("message %s, subject %s, properties %v; want an OrderAccepted event with its order id", *m.MessageID, *m.Subject, m.ApplicationProperties)
		}
	}
	ranges, _ := feed.FeedRanges(context.Background())
	for _, id := range []string{relay.ManifestID("orderrelay"), relay.LeaseID("orderrelay", ranges[0])} {
		body, _, err := s.ReadDocument(context.Background(), id, id)
		var doc struct {
			OrderID string `json:"orderId"`
		}
		if err != nil || json.Unmarshal(body, &doc) != nil || doc.OrderID != id {
			t.Errorf("%s: %s, %v; want its id under orderId", id, body, err)
		}
	}
}

// The shutdown line, logged on a goroutine of its own when the signal
// comes, is in the log before the stop's line and before serve returns,
// even when that goroutine is slow to get to it; before, it could come
// after both, and a test reading the log raced with it.
func TestServe_LogsTheShutdownBeforeTheStop(t *testing.T) {
	s := memstore.New("/orderId")
	var logs bytes.Buffer
	h := slowHandler{Handler: slog.NewJSONHandler(&logs, nil), slow: "shutting down", delay: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := serve(ctx, testConfig(t), slog.New(h),
		pieces{feed: s.ChangeFeed(memstore.ChangeFeedOptions{}), leases: s, sender: &topic{}}); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	down, stopped := strings.Index(out, "shutting down"), strings.Index(out, `"msg":"orderrelay stopped"`)
	if down < 0 || stopped < 0 || down > stopped {
		t.Errorf("want the shutdown line, then the stop's, when serve returns:\n%s", out)
	}
}

// slowHandler waits delay before it handles a record whose message starts
// with slow.
type slowHandler struct {
	slog.Handler
	slow  string
	delay time.Duration
}

func (h slowHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.slow) {
		time.Sleep(h.delay)
	}
	return h.Handler.Handle(ctx, r)
}

// A second signal returns at once, even with a send in flight.
func TestServe_SecondSignalStopsAtOnce(t *testing.T) {
	s := memstore.New("/orderId")
	writeOrders(t, s, 3)
	tp := &topic{block: make(chan struct{})}
	defer close(tp.block)
	drain, cancelDrain := context.WithCancel(context.Background())
	force, cancelForce := context.WithCancel(context.Background())
	ctx := cli.WithForce(drain, force)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, testConfig(t), slog.New(slog.NewTextHandler(io.Discard, nil)),
			pieces{feed: s.ChangeFeed(memstore.ChangeFeedOptions{}), leases: s, sender: tp})
	}()
	time.Sleep(20 * time.Millisecond) // let the send block (a longer wait changes nothing)
	cancelDrain()
	cancelForce()
	select {
	case err := <-done:
		if !errors.Is(err, cli.ErrForced) {
			t.Errorf("err = %v, want cli.ErrForced", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return after the second signal")
	}
}

// syncWriter serializes writes from the relay's goroutine and the test.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// feedStub is a relay.ChangeFeed whose calls fail with the errors set.
type feedStub struct {
	ranges           []string
	rangesErr, rdErr error
}

func (f feedStub) FeedRanges(context.Context) ([]string, error) { return f.ranges, f.rangesErr }
func (f feedStub) ReadChanges(context.Context, string, string, int) ([][]byte, string, error) {
	return nil, "", f.rdErr
}

// The start-up check of the change feed says plainly when the endpoint
// serves none (cosmium answers 401), and how to get one on the local stack.
func TestCheckFeed(t *testing.T) {
	unauthorized := errors.New(`cosmosstore: read feed ranges "": 401 Unauthorized`)
	tests := []struct {
		name     string
		feed     feedStub
		want     []string // in the error; none: no error
		dontWant []string
	}{
		{name: "a change feed", feed: feedStub{ranges: []string{"-FF"}}},
		{name: "cosmium: feed ranges refused", feed: feedStub{rangesErr: unauthorized},
			want: []string{"COSMOS_ENDPOINT", "http://127.0.0.1:8081/", "serves no change feed", "cosmium has none", "feed proxy", "401 Unauthorized"}},
		{name: "feed read refused", feed: feedStub{ranges: []string{"-FF"}, rdErr: errors.New("400 Bad Request")},
			want: []string{"serves no change feed", "feed proxy", "400 Bad Request"}},
		{name: "no feed ranges", feed: feedStub{}, want: []string{"serves no change feed", "no feed ranges"}},
		{name: "transient failure is not called a missing feed", feed: feedStub{rangesErr: fmt.Errorf("503: %w", idempotent.ErrTransient)},
			want: []string{"start-up check of the change feed", "COSMOS_ENDPOINT"}, dontWant: []string{"serves no change feed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config{CosmosEndpoint: "http://127.0.0.1:8081/", CosmosContainer: "orders"}
			err := checkFeed(context.Background(), cfg, tt.feed)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error says %q:\n%v", w, err)
				}
			}
			if tt.feed.rangesErr != nil && !errors.Is(err, tt.feed.rangesErr) {
				t.Errorf("error does not wrap %v", tt.feed.rangesErr)
			}
		})
	}
}

// pingStub is an orders container whose read answers err.
type pingStub struct{ err error }

func (p pingStub) Ping(context.Context) error { return p.err }

// The read-only check of the orders container names the role the relay
// needs when Cosmos DB refuses the read, and the settings otherwise.
func TestCheckOrders(t *testing.T) {
	cfg := config{CosmosEndpoint: "https://x.documents.azure.com:443/", CosmosDatabase: "orders", CosmosContainer: "orders", CosmosLeasesContainer: "leases"}
	forbidden := &cosmosstore.Error{Op: "ping", StatusCode: 403}
	for _, tt := range []struct {
		name string
		err  error
		want []string
	}{
		{"readable", nil, nil},
		{"refused", forbidden, []string{"may not read container \"orders\"", "Orders change feed reader", "readChangeFeed", "COSMOS_CONTAINER"}},
		{"unreachable", fmt.Errorf("dial: %w", idempotent.ErrTransient), []string{"COSMOS_ENDPOINT", "COSMOS_DATABASE", "COSMOS_CONTAINER"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkOrders(context.Background(), cfg, pingStub{tt.err})
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not say %q", err, w)
				}
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("error does not wrap %v", tt.err)
			}
		})
	}
}

// COSMOS_LEASES_CONTAINER names the leases' own container; empty, the
// leases share the orders container (emulators).
func TestConfig_LeasesContainer(t *testing.T) {
	env := map[string]string{"SERVICEBUS_NAMESPACE": "sb-x.servicebus.windows.net", "COSMOS_ENDPOINT": "https://x.documents.azure.com:443/"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "orders"},
		{[]string{"-cosmos-leases-container", "leases"}, "leases"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c, err := parseConfig(fs, tt.args, envOf(env))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.leasesContainer(); got != tt.want {
			t.Errorf("args %q: leases container %q, want %q", tt.args, got, tt.want)
		}
	}
}
