package e2etest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestEndToEndPoisonMessagesDoNotStopTheWorker runs the real orderworker
// against the test broker and cosmium with eight status changes of one
// poison order at the head of the queue and 400 healthy orders behind
// them. The store answers the breaker's probe (a point read) throughout,
// so the breaker must never open, every healthy order must be created, and
// the eight must end in the dead-letter queue, with a reason. Before the
// breaker's rule, with the poison messages' failure a retried StoreError,
// the same eight reopened it after every probe, its backoff doubling: 8
// openings and none of the 400 orders created in 3 minutes (the issue saw
// 7 and none in 91 s).
//
// The poison order is, in one subtest, a stored document that cannot be
// decoded (written straight into cosmium: its version is a string), which
// the worker dead-letters at the first delivery of each change, and in the
// other a partition whose every call fails with 500 (a proxy in front of
// cosmium answers so), a StoreError that stays retried until
// MaxDeliveryCount: the failure the breaker must not mistake for an
// outage.
func TestEndToEndPoisonMessagesDoNotStopTheWorker(t *testing.T) {
	t.Run("undecodable document", func(t *testing.T) {
		runPoison(t, false)
	})
	t.Run("partition answering 500", func(t *testing.T) {
		runPoison(t, true)
	})
}

// poisonID is the poison order.
const poisonID = "poison-order"

// failingPartition is a Cosmos DB gateway in front of cosmium (through
// e2etest.FeedProxy, which rewrites the account's endpoints to its own)
// that answers every request on a document of poisonID with 500.
func failingPartition(t *testing.T, e *relayEnv) string {
	t.Helper()
	fp, err := e2etest.NewFeedProxy(e.cosmos.Endpoint, e.cosmos.Key, e2eDatabase, e2eContainer)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/docs/"+poisonID) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"code":"InternalServerError","message":"this partition fails every call (test)"}`)
			return
		}
		fp.ServeHTTP(w, r)
	}))
	fp.SetAddr(srv.Listener.Addr().String())
	srv.Start()
	t.Cleanup(srv.Close)
	return fp.Endpoint
}

func runPoison(t *testing.T, failing bool) {
	e := newRelayEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cosmos := e.container(t)

	env := e.baseEnv
	if failing {
		env = append(append([]string(nil), e.baseEnv...), "COSMOS_ENDPOINT="+failingPartition(t, e))
	}
	w := e2etest.Start(t, env, e.bin, "order worker", "orderworker", "-concurrency", "8")
	e2etest.Until(t, ctx, "the container", func() bool {
		_, err := cosmos.Read(ctx, nil)
		return err == nil
	})

	const changes, healthy = 8, 400
	if !failing {
		broken := map[string]any{
			"id": poisonID, "orderId": poisonID, "type": order.TypeOrder, "customerId": "c-1", "currency": "EUR",
			"totalMinor": 100, "status": "accepted", "version": "not a number",
		}
		body, err := json.Marshal(broken)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cosmos.UpsertItem(ctx, azcosmos.NewPartitionKeyString(poisonID), body, nil); err != nil {
			t.Fatalf("writing the broken document: %v", err)
		}
	}
	statuses := []string{"paid", "shipped", "delivered", "cancelled"}
	changedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v := int64(2); v < 2+changes; v++ {
		c := order.StatusChange{OrderID: poisonID, Status: statuses[int(v)%len(statuses)], Version: v, ChangedAt: changedAt.Add(time.Duration(v) * time.Minute)}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		m := sbqueue.Message{MessageID: order.StatusMessageID(poisonID, v), Subject: order.SubjectOrderStatusChanged, Body: b, ContentType: "application/json"}
		if _, err := e.queue.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	pc := e2etest.RunProducer(t, ctx, e.baseEnv, e.bin, "-count", fmt.Sprint(healthy), "-seed", "19", "-id-prefix", "healthy", "-batch-size", "50")
	if pc.Orders != healthy || pc.Sent != healthy {
		t.Fatalf("producer sent %d messages, %d orders; want %d orders, nothing else", pc.Sent, pc.Orders, healthy)
	}

	// Wait on the state, not on a time: every message settled. The
	// timeout is generous (the run takes seconds: ten deliveries of each
	// poison message, 3 s locks); past it the test still reports what the
	// breaker did.
	settleCtx, stopWaiting := context.WithTimeout(ctx, 3*time.Minute)
	defer stopWaiting()
	for {
		s := e.queue.Snapshot()
		if len(s.Active) == 0 && len(s.Locked) == 0 && s.Counters.Completed+int64(len(s.DeadLetters)) >= healthy+changes {
			break
		}
		select {
		case <-settleCtx.Done():
			t.Errorf("not every message settled within %v: %d available, %d locked, %d completed, %d dead-lettered",
				3*time.Minute, len(s.Active), len(s.Locked), s.Counters.Completed, len(s.DeadLetters))
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	settled := time.Since(began)
	s := e.queue.Snapshot()
	if s.Counters.Completed != healthy || len(s.DeadLetters) != changes {
		t.Errorf("%d completed, %d dead-lettered; want the %d orders completed and the %d status changes dead-lettered", s.Counters.Completed, len(s.DeadLetters), healthy, changes)
	}
	for _, m := range s.DeadLetters {
		if !strings.HasPrefix(m.MessageID, poisonID+":v") || m.DeadLetterReason == "" {
			t.Errorf("dead-lettered %s with reason %q: want only the poison order's status changes, each with a reason", m.MessageID, m.DeadLetterReason)
		}
	}
	created := 0
	for i := range healthy {
		if _, ok := e2etest.ReadOrder(t, ctx, cosmos, fmt.Sprintf("healthy-%06d", i)); ok {
			created++
		}
	}

	w.Cmd.Process.Signal(syscall.SIGTERM)
	if err := w.Wait(ctx); err != nil {
		t.Fatalf("orderworker: %v", err)
	}
	logs := w.Output()
	openings, staysClosed := 0, 0
	for _, line := range strings.Split(logs, "\n") {
		var rec struct{ Msg string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case strings.HasPrefix(rec.Msg, "circuit breaker open"):
			openings++
		case strings.HasPrefix(rec.Msg, "circuit breaker stays closed"):
			staysClosed++
		}
	}
	sum := e2etest.FinalSummary(logs)
	reasons := make(map[string]int)
	for _, m := range s.DeadLetters {
		reasons[m.DeadLetterReason]++
	}
	t.Logf("%d of %d healthy orders created, %d status changes dead-lettered %v, %v after the producer started; breaker: %d openings, %d probes that kept it closed, final summary breaker_opened=%d",
		created, healthy, len(s.DeadLetters), reasons, settled.Round(time.Millisecond), openings, staysClosed, sum["breaker_opened"])
	if created != healthy {
		t.Errorf("%d of %d healthy orders created", created, healthy)
	}
	if openings != 0 || sum["breaker_opened"] != 0 {
		t.Errorf("the breaker opened %d times (final summary: %d): want never, the store answered its probe throughout", openings, sum["breaker_opened"])
	}
}
