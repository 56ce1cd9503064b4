package e2etest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

const (
	e2eLock      = 3 * time.Second // short, so a killed process's locks lapse quickly
	e2eDatabase  = "orders"
	e2eContainer = "orders"
)

// relayEnv is the test broker with the orders queue, cosmium, and the
// binaries, as test/sbbroker's end-to-end tests set them up.
type relayEnv struct {
	ns      *sbqueue.Namespace
	queue   *sbqueue.Queue
	cosmos  *cosmiumtest.Server
	bin     string
	baseEnv []string
}

func newRelayEnv(t *testing.T) *relayEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the real binaries and cosmium; skipped with -short")
	}
	bin := e2etest.BuildCommands(t)
	// e2eLock is below Service Bus's 5 s minimum, so that a killed process's
	// locks lapse quickly; the processes read it as they would from Azure.
	ns := sbqueue.NewNamespaceWith(sbqueue.RealClock(), sbqueue.NamespaceOptions{AllowUnrealisticTimings: true})
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: e2eLock})
	if err != nil {
		t.Fatal(err)
	}
	b := sbbroker.New(ns, sbbroker.Options{})
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	srv := cosmiumtest.Start(t)
	return &relayEnv{ns: ns, queue: q, cosmos: srv, bin: bin, baseEnv: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"SERVICEBUS_CONNECTION_STRING=" + b.ConnectionString(),
		"SERVICEBUS_QUEUE=orders",
		"SERVICEBUS_LOCK_DURATION=" + e2eLock.String(),
		"COSMOS_ENDPOINT=" + srv.Endpoint,
		"COSMOS_KEY=" + srv.Key,
		"COSMOS_DATABASE=" + e2eDatabase,
		"COSMOS_CONTAINER=" + e2eContainer,
		"COSMOS_CREATE_CONTAINER=true",
		"LOG_FORMAT=json",
		"WORKER_SHUTDOWN_GRACE=20s",
		"WORKER_SUMMARY_INTERVAL=1s",
	}}
}

func (e *relayEnv) start(t *testing.T, name, binary string, args ...string) *e2etest.Process {
	t.Helper()
	return e2etest.Start(t, e.baseEnv, e.bin, name, binary, args...)
}

func (e *relayEnv) container(t *testing.T) *azcosmos.ContainerClient {
	t.Helper()
	cred, err := azcosmos.NewKeyCredential(e.cosmos.Key)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azcosmos.NewClientWithKey(e.cosmos.Endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := client.NewContainer(e2eDatabase, e2eContainer)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEndToEndRelaySurvivesSIGKILL runs the whole outbox loop with the real
// binaries: orderproducer → queue orders → orderworker (order + event in one
// batch in cosmium) → orderrelay (change feed, leases, publish then
// checkpoint) → topic order-events (duplicate detection) → subscriptions
// loyalty and audit → one orderworker each in subscription mode (the inbox
// consumer). The relay is SIGKILLed mid-run between the publish of a page
// and its checkpoint; a second relay instance takes its lease over once it
// expires, goes on from the last checkpoint and so republishes the page,
// whose copies the topic's duplicate detection drops. Every stored order's event must
// reach both subscribers, each of which awards it exactly once with its own
// marker, and orderctl audit finds the final store clean.
//
// cosmium has no change feed: the relay reads a latest-version feed that
// e2etest.FeedProxy computes from cosmium's documents, and its leases live
// in cosmium, which ignores If-Match, so only one relay instance runs at a
// time (fencing is proven on memstore and against the fake gateway). The
// feed is not Cosmos DB's.
func TestEndToEndRelaySurvivesSIGKILL(t *testing.T) {
	e := newRelayEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic, err := e.ns.CreateTopic("order-events", sbqueue.TopicOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	consumers := []string{"loyalty", "audit"}
	subs := make(map[string]*sbqueue.Queue)
	for _, name := range consumers {
		if subs[name], err = topic.CreateSubscription(name, sbqueue.SubscriptionOptions{LockDuration: e2eLock}); err != nil {
			t.Fatal(err)
		}
	}
	proxy := e2etest.StartFeedProxy(t, e.cosmos.Endpoint, e.cosmos.Key, e2eDatabase, e2eContainer)
	cosmos := e.container(t)

	w := e.start(t, "order worker", "orderworker", "-concurrency", "8")
	e2etest.Until(t, ctx, "the container", func() bool {
		_, err := cosmos.Read(ctx, nil)
		return err == nil
	})
	var subscribers []*e2etest.Process
	for _, name := range consumers {
		env := append(append([]string(nil), e.baseEnv...), "SERVICEBUS_TOPIC=order-events", "SERVICEBUS_SUBSCRIPTION="+name)
		subscribers = append(subscribers, e2etest.Start(t, env, e.bin, name+" subscriber", "orderworker", "-concurrency", "4"))
	}
	relayEnv := func(owner string) []string {
		return append(append([]string(nil), e.baseEnv...),
			"COSMOS_ENDPOINT="+proxy.Endpoint, "SERVICEBUS_TOPIC=order-events", "RELAY_NAME=e2e", "RELAY_OWNER="+owner,
			"RELAY_LEASE_DURATION=3s", "RELAY_CALL_TIMEOUT=1s", "RELAY_POLL_INTERVAL=100ms",
			"RELAY_PAGE_SIZE=10", "RELAY_BATCH_MESSAGES=4")
	}
	r1 := e2etest.Start(t, relayEnv("relay-1"), e.bin, "relay 1", "orderrelay")

	const count = 150
	produced := make(chan e2etest.ProducerSummary, 1)
	go func() {
		produced <- e2etest.RunProducer(t, ctx, e.baseEnv, e.bin, "-count", fmt.Sprint(count), "-duplicates", "0.1", "-seed", "11", "-id-prefix", "relay", "-batch-size", "25")
	}()
	// Hold relay 1's checkpoint of a page it published, once the topic has
	// accepted a quarter of the events, and SIGKILL it then: between the
	// publish and the checkpoint. (A lease write that follows a publish
	// with no lease write in between is that page's checkpoint.)
	var lastSent int64
	held, release := proxy.HoldLeaseWrite(func() bool {
		sent := topic.Counters().Sent
		published := sent > lastSent
		lastSent = sent
		return published && sent >= count/4
	})
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("relay 1 never checkpointed a published page")
	}
	if err := r1.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r1.Wait(ctx)
	release()
	atKill := topic.Counters()
	t.Logf("relay 1 SIGKILLed before its checkpoint, after the topic accepted %d events", atKill.Sent)
	r2 := e2etest.Start(t, relayEnv("relay-2"), e.bin, "relay 2", "orderrelay")

	pc := <-produced
	if pc.Orders != count {
		t.Fatalf("producer sent %d orders, want %d", pc.Orders, count)
	}
	e2etest.Until(t, ctx, "the orders queue settled", func() bool {
		s := e.queue.Snapshot()
		return len(s.Active) == 0 && len(s.Locked) == 0 && s.Counters.Completed+int64(len(s.DeadLetters)) >= int64(pc.Sent)
	})
	e2etest.Until(t, ctx, "every event through the topic and both subscriptions", func() bool {
		if topic.Counters().Sent < count {
			return false
		}
		for _, q := range subs {
			s := q.Snapshot()
			if len(s.Active) > 0 || len(s.Locked) > 0 || s.Counters.Completed+int64(len(s.DeadLetters)) < topic.Counters().Sent {
				return false
			}
		}
		return true
	})
	for _, p := range append([]*e2etest.Process{r2, w}, subscribers...) {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		if err := p.Wait(ctx); err != nil {
			t.Errorf("%s after SIGTERM: %v", p.Name, err)
		}
	}

	tc := topic.Counters()
	reads, modified := proxy.Reads()
	t.Logf("topic accepted %d events, dropped %d republishes; the proxy answered %d change feed reads, %d with changes", tc.Sent, tc.DuplicatesDropped, reads, modified)
	if tc.DuplicatesDropped == 0 {
		t.Errorf("relay 2 republished nothing: it should have sent again the page relay 1 published and never checkpointed")
	}
	if tc.Sent != count {
		t.Errorf("the topic accepted %d events, want one per order: %d (a republish inside the window is dropped)", tc.Sent, count)
	}
	for name, q := range subs {
		s := q.Snapshot()
		if s.Counters.Completed != tc.Sent || len(s.DeadLetters) != 0 {
			t.Errorf("subscription %s: %d completed, %d dead-lettered; want every one of the %d events completed", name, s.Counters.Completed, len(s.DeadLetters), tc.Sent)
		}
	}
	docs, err := proxy.Documents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := make(map[string]bool)
	entries := make(map[string]map[string]int) // consumer -> order -> loyalty entries
	markers := make(map[string]map[string]order.InboxMarker)
	var leases []relay.Lease
	for _, c := range consumers {
		entries[c], markers[c] = make(map[string]int), make(map[string]order.InboxMarker)
	}
	for _, d := range docs {
		var f struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(d, &f); err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case order.TypeEvent:
			var ev order.AcceptedEvent
			_ = json.Unmarshal(d, &ev)
			events[ev.OrderID] = true
		case order.TypeLoyaltyEntry:
			var le order.LoyaltyEntry
			_ = json.Unmarshal(d, &le)
			entries[le.Consumer][le.OrderID]++
		case order.TypeInboxMarker:
			var m order.InboxMarker
			_ = json.Unmarshal(d, &m)
			markers[m.Consumer][m.OrderID] = m
		case relay.TypeLease:
			var l relay.Lease
			_ = json.Unmarshal(d, &l)
			leases = append(leases, l)
		}
	}
	if len(events) != count {
		t.Errorf("%d events stored, want %d", len(events), count)
	}
	for _, c := range consumers {
		for id := range events {
			m, ok := markers[c][id]
			if n := entries[c][id]; n != 1 || !ok || m.ID != order.InboxMarkerID(c, order.EventID(id)) {
				t.Errorf("%s: order %s has %d loyalty entries and marker %+v (found %v); want one entry and the marker %s",
					c, id, n, m, ok, order.InboxMarkerID(c, order.EventID(id)))
			}
		}
	}
	if len(leases) != 1 || leases[0].Owner != "" || leases[0].Continuation == "" {
		t.Errorf("leases after relay 2's SIGTERM: %+v; want cosmium's one range released with its checkpoint", leases)
	}
	if out := r2.Output(); !containsLog(out, "lease acquired", "relay-1") {
		t.Errorf("relay 2 did not take the lease over from relay-1:\n%s", out)
	}

	// The run's final store audits clean with the real orderctl binary,
	// which reads it at low priority through the same feed proxy, one page
	// of 20 documents at a time.
	auditEnv := append(append([]string(nil), e.baseEnv...), "COSMOS_ENDPOINT="+proxy.Endpoint, "RELAY_NAME=e2e",
		"AUDIT_CONSUMERS=loyalty,audit", "AUDIT_SETTLE=1ms", "AUDIT_PAGE_SIZE=20", "AUDIT_FORMAT=json")
	a := e2etest.Start(t, auditEnv, e.bin, "orderctl audit", "orderctl", "audit")
	if err := a.Wait(ctx); err != nil {
		t.Fatalf("orderctl audit of the final store: %v\n%s", err, a.Output())
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(a.Output()), &rep); err != nil {
		t.Fatalf("orderctl audit -format json: %v\n%s", err, a.Output())
	}
	for name, want := range map[string]int{audit.OrderEvent: count, audit.EventOrder: count, audit.Status: count,
		audit.Inbox: 2 * 2 * count, audit.MarkerTTL: 2 * count, audit.RelayLag: 1, audit.RelayLease: 1} {
		if r := rep.Result(name); r.Checked != want || r.Violations != 0 {
			t.Errorf("orderctl audit: %s checked %d with %d violations %v, want %d checked, none violated", name, r.Checked, r.Violations, r.First, want)
		}
	}
	t.Logf("orderctl audit of %d documents in %d pages: %d violations", rep.Documents, rep.Pages, rep.Violations())
}

// containsLog reports whether a JSON log line with message msg mentions
// want.
func containsLog(logs, msg, want string) bool {
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			for _, v := range rec {
				if fmt.Sprint(v) == want {
					return true
				}
			}
		}
	}
	return false
}
