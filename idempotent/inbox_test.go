package idempotent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// callCounter is a memstore whose every call is counted, and whose reads,
// creates and replaces fail with the errors set.
type callCounter struct {
	*memstore.Store
	mu                             sync.Mutex
	calls                          int
	readErr, createErr, replaceErr error
}

func newCallCounter() *callCounter {
	return &callCounter{Store: memstore.New("/tenantId")}
}

func (s *callCounter) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls }

func (s *callCounter) inc() { s.mu.Lock(); s.calls++; s.mu.Unlock() }

func (s *callCounter) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	s.inc()
	if s.createErr != nil {
		return nil, s.createErr
	}
	return s.Store.CreateBatch(ctx, pk, docs)
}

func (s *callCounter) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	s.inc()
	if s.readErr != nil {
		return nil, "", s.readErr
	}
	return s.Store.ReadDocument(ctx, pk, id)
}

func (s *callCounter) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	s.inc()
	if s.replaceErr != nil {
		return "", s.replaceErr
	}
	return s.Store.ReplaceDocument(ctx, pk, d, ifMatch)
}

func (s *callCounter) PatchDocument(ctx context.Context, pk, id string, p idempotent.Patch) (string, error) {
	s.inc()
	return s.Store.PatchDocument(ctx, pk, id, p)
}

var (
	_ idempotent.DocumentStore = (*callCounter)(nil)
	_ idempotent.Patcher       = (*callCounter)(nil)
)

// horizon is a RetentionHorizon of a fixed minimum.
type horizon time.Duration

func (h horizon) MinRetention() (time.Duration, string) {
	return time.Duration(h), "the test's horizon"
}

var inboxNow = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }

// points is a business write with a random id, which cannot detect a
// duplicate itself: the inbox marker does.
func points(tenant string, n int) func(at time.Time) ([]idempotent.Document, error) {
	return func(at time.Time) ([]idempotent.Document, error) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := "points-" + hex.EncodeToString(b[:])
		body, err := json.Marshal(map[string]any{"id": id, "tenantId": tenant, "points": n, "at": at})
		return []idempotent.Document{{ID: id, Body: body}}, err
	}
}

func newTestInbox(t testing.TB, s idempotent.Store, consumer string) *idempotent.Inbox {
	t.Helper()
	in, err := idempotent.NewInbox(s, idempotent.InboxConfig{Consumer: consumer, PartitionKeyField: "/tenantId",
		MarkerTTL: time.Hour, Horizon: horizon(time.Hour), Now: inboxNow, ReusedReason: "EventIdReused"})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func delivery(id string, n uint32) idempotent.Message {
	return idempotent.Message{ID: id, DeliveryCount: n}
}

// TestInbox_RoundTrips pins the outcome and the store calls of every path:
// a first delivery writes first (a new message: the batch, 1; a copy: the
// conflicting batch and a read, 2), a redelivery reads first (a duplicate:
// the read, 1; a message whose earlier delivery wrote nothing: the read
// that misses and the batch, 2). Only Created writes, and it writes the
// marker and the business documents together.
func TestInbox_RoundTrips(t *testing.T) {
	for _, tt := range []struct {
		name       string
		seed       bool // the message was processed before, with hash "h1"
		m          idempotent.Message
		hash       string
		want       idempotent.Outcome
		wantReason string
		calls      int
	}{
		{"new, first delivery", false, delivery("ev-1", 1), "h1", idempotent.Created, "", 1},
		{"duplicate, redelivery", true, delivery("ev-1", 2), "h1", idempotent.Duplicate, "", 1},
		{"duplicate, tenth delivery", true, delivery("ev-1", 10), "h1", idempotent.Duplicate, "", 1},
		{"id reused, redelivery", true, delivery("ev-1", 2), "h2", idempotent.Mismatch, "EventIdReused", 1},
		{"new, redelivery (nothing written before)", false, delivery("ev-1", 2), "h1", idempotent.Created, "", 2},
		{"copy, first delivery (a republish)", true, delivery("ev-1", 1), "h1", idempotent.Duplicate, "", 2},
		{"id reused, first delivery", true, delivery("ev-1", 1), "h2", idempotent.Mismatch, "EventIdReused", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newCallCounter()
			in := newTestInbox(t, s, "loyalty")
			if tt.seed {
				if r := in.Process(t.Context(), delivery("ev-1", 1), "t-1", "h1", points("t-1", 5)); r.Outcome != idempotent.Created {
					t.Fatalf("seed: %v %s", r.Outcome, r.Description)
				}
			}
			before, items := s.count(), len(s.Items())
			r := in.Process(t.Context(), tt.m, "t-1", tt.hash, points("t-1", 5))
			if r.Outcome != tt.want || r.Reason != tt.wantReason || r.Key != "t-1" {
				t.Errorf("Process = %v %q key %q (%s), want %v %q key t-1", r.Outcome, r.Reason, r.Key, r.Description, tt.want, tt.wantReason)
			}
			if got := s.count() - before; got != tt.calls {
				t.Errorf("%d store round trips, want %d", got, tt.calls)
			}
			wantItems := items
			if tt.want == idempotent.Created {
				wantItems += 2
			}
			if n := len(s.Items()); n != wantItems {
				t.Errorf("%d documents stored, want %d", n, wantItems)
			}
			if tt.want == idempotent.Mismatch && (!strings.Contains(r.Description, "h1") || !strings.Contains(r.Description, "h2")) {
				t.Errorf("description %q does not name both hashes", r.Description)
			}
		})
	}
}

// TestInbox_MarkerShape: the marker is the document the package documents,
// with the partition key value under the configured field, and the TTL
// rounded up to whole seconds (-1 for UnboundedRetention).
func TestInbox_MarkerShape(t *testing.T) {
	for _, tt := range []struct {
		ttl  time.Duration
		want int
	}{{time.Hour, 3600}, {1500 * time.Millisecond, 2}, {idempotent.UnboundedRetention, -1}} {
		s := memstore.New("/tenantId")
		in, err := idempotent.NewInbox(s, idempotent.InboxConfig{Consumer: "audit", PartitionKeyField: "tenantId", MarkerTTL: tt.ttl, Now: inboxNow})
		if err != nil {
			t.Fatal(err)
		}
		if r := in.Process(t.Context(), delivery("ev-9", 1), "t-9", "h9", points("t-9", 1)); r.Outcome != idempotent.Created {
			t.Fatalf("TTL %v: %v (%s)", tt.ttl, r.Outcome, r.Description)
		}
		it, ok := s.Get("t-9", idempotent.InboxMarkerID("audit", "ev-9"))
		if !ok {
			t.Fatalf("TTL %v: no marker %q", tt.ttl, idempotent.InboxMarkerID("audit", "ev-9"))
		}
		var got map[string]any
		if err := json.Unmarshal(it.Body, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"id": "inbox:audit:ev-9", "tenantId": "t-9", "type": "inbox", "consumer": "audit", "messageId": "ev-9",
			"requestHash": "h9", "processedAt": "2026-11-30T12:00:00Z", "ttl": float64(tt.want)}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("TTL %v: marker field %s = %v, want %v", tt.ttl, k, got[k], v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("TTL %v: marker %v has fields beyond %v", tt.ttl, got, want)
		}
	}
}

// TestInbox_ConsumersDoNotSuppressEachOther: each named consumer processes
// a message once; one consumer's marker never makes another's a duplicate.
func TestInbox_ConsumersDoNotSuppressEachOther(t *testing.T) {
	s := memstore.New("/tenantId")
	loyalty, audit := newTestInbox(t, s, "loyalty"), newTestInbox(t, s, "audit")
	for i, step := range []struct {
		in   *idempotent.Inbox
		want idempotent.Outcome
	}{{loyalty, idempotent.Created}, {audit, idempotent.Created}, {loyalty, idempotent.Duplicate}, {audit, idempotent.Duplicate}} {
		if r := step.in.Process(t.Context(), delivery("ev-1", 1), "t-1", "h1", points("t-1", 5)); r.Outcome != step.want {
			t.Errorf("step %d, consumer %s: %v, want %v", i, step.in.Consumer(), r.Outcome, step.want)
		}
	}
	if n := len(s.Items()); n != 4 {
		t.Errorf("%d documents, want two markers and two entries", n)
	}
}

// TestInbox_ConcurrentDeliveries: of 32 concurrent deliveries of one
// message, first deliveries and redeliveries mixed, exactly one is Created
// and writes the business document; every other is a Duplicate.
func TestInbox_ConcurrentDeliveries(t *testing.T) {
	s := memstore.New("/tenantId")
	in := newTestInbox(t, s, "loyalty")
	const n = 32
	results := make([]idempotent.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = in.Process(context.Background(), delivery("ev-c", uint32(1+i%3)), "t-c", "hc", points("t-c", 1))
		}()
	}
	wg.Wait()
	count := map[idempotent.Outcome]int{}
	for _, r := range results {
		count[r.Outcome]++
	}
	if count[idempotent.Created] != 1 || count[idempotent.Duplicate] != n-1 {
		t.Errorf("outcomes %v, want 1 created and %d duplicates", count, n-1)
	}
	if got := len(s.Items()); got != 2 {
		t.Errorf("%d documents, want the marker and one entry", got)
	}
}

// TestInbox_Failures: a store that fails writes nothing and retries as a
// dependency failure; a marker that cannot be decoded reaches the Failure
// hook as an *UnreadableError; documents that cannot be built are Invalid; a
// conflict on a business document with no marker is retried.
func TestInbox_Failures(t *testing.T) {
	throttled := fmt.Errorf("429: %w", idempotent.ErrTransient)
	t.Run("redelivery's read throttled", func(t *testing.T) {
		s := newCallCounter()
		s.readErr = throttled
		r := newTestInbox(t, s, "loyalty").Process(t.Context(), delivery("ev-1", 2), "t-1", "h1", points("t-1", 1))
		if r.Outcome != idempotent.Transient || !errors.Is(r.Err, throttled) || !r.DependencyFailed() || len(s.Items()) != 0 {
			t.Errorf("%v %q (%s), %d documents: want a dependency retry that wrote nothing", r.Outcome, r.Reason, r.Description, len(s.Items()))
		}
	})
	t.Run("batch throttled", func(t *testing.T) {
		s := newCallCounter()
		s.createErr = throttled
		r := newTestInbox(t, s, "loyalty").Process(t.Context(), delivery("ev-1", 1), "t-1", "h1", points("t-1", 1))
		if r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonStoreUnavailable || len(s.Items()) != 0 {
			t.Errorf("%v %q (%s): want a retry", r.Outcome, r.Reason, r.Description)
		}
	})
	t.Run("undecodable marker", func(t *testing.T) {
		for _, body := range []string{`{"id":"inbox:loyalty:ev-1","tenantId":"t-1","processedAt":5}`, `{"id":"inbox:loyalty:ev-1","tenantId":"t-1"}`} {
			s := memstore.New("/tenantId")
			if _, err := s.CreateBatch(t.Context(), "t-1", []idempotent.Document{{ID: "inbox:loyalty:ev-1", Body: []byte(body)}}); err != nil {
				t.Fatal(err)
			}
			var got error
			in, err := idempotent.NewInbox(s, idempotent.InboxConfig{Consumer: "loyalty", PartitionKeyField: "tenantId", MarkerTTL: time.Hour,
				Failure: func(key, op string, err error) idempotent.Result {
					got = err
					return idempotent.Result{Outcome: idempotent.Invalid, Key: key, Reason: "Unreadable", Err: err}
				}})
			if err != nil {
				t.Fatal(err)
			}
			r := in.Process(t.Context(), delivery("ev-1", 1), "t-1", "h1", points("t-1", 1))
			var me *idempotent.UnreadableError
			if r.Outcome != idempotent.Invalid || !errors.As(got, &me) || me.ID != "inbox:loyalty:ev-1" || me.PartitionKey != "t-1" {
				t.Errorf("marker %s: %v, hook got %v; want the hook's Invalid for an *UnreadableError", body, r.Outcome, got)
			}
		}
	})
	t.Run("undecodable marker, default failure", func(t *testing.T) {
		s := memstore.New("/tenantId")
		if _, err := s.CreateBatch(t.Context(), "t-1", []idempotent.Document{{ID: "inbox:loyalty:ev-1", Body: []byte(`{"id":"inbox:loyalty:ev-1","tenantId":"t-1"}`)}}); err != nil {
			t.Fatal(err)
		}
		r := newTestInbox(t, s, "loyalty").Process(t.Context(), delivery("ev-1", 2), "t-1", "h1", points("t-1", 1))
		if r.Outcome != idempotent.Invalid || r.Reason != idempotent.ReasonStoredDocumentUnreadable || !errors.Is(r.Err, idempotent.ErrUnreadable) {
			t.Errorf("%v %q (%s): want Invalid %s at once, as the Consumer decides an unreadable marker", r.Outcome, r.Reason, r.Description, idempotent.ReasonStoredDocumentUnreadable)
		}
	})
	t.Run("documents cannot be built", func(t *testing.T) {
		s := memstore.New("/tenantId")
		r := newTestInbox(t, s, "loyalty").Process(t.Context(), delivery("ev-1", 1), "t-1", "h1",
			func(time.Time) ([]idempotent.Document, error) { return nil, errors.New("no") })
		if r.Outcome != idempotent.Invalid || len(s.Items()) != 0 {
			t.Errorf("%v (%s): want Invalid, nothing written", r.Outcome, r.Description)
		}
	})
	t.Run("conflict on a business document, no marker", func(t *testing.T) {
		s := memstore.New("/tenantId")
		fixed := func(time.Time) ([]idempotent.Document, error) {
			return []idempotent.Document{{ID: "entry-1", Body: []byte(`{"id":"entry-1","tenantId":"t-1"}`)}}, nil
		}
		if _, err := s.CreateBatch(t.Context(), "t-1", []idempotent.Document{{ID: "entry-1", Body: []byte(`{"id":"entry-1","tenantId":"t-1"}`)}}); err != nil {
			t.Fatal(err)
		}
		r := newTestInbox(t, s, "loyalty").Process(t.Context(), delivery("ev-1", 1), "t-1", "h1", fixed)
		if r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonConcurrentUpdate || len(s.Items()) != 1 {
			t.Errorf("%v %q (%s): want a retry, nothing written", r.Outcome, r.Reason, r.Description)
		}
	})
}

// TestNewInbox_RefusesABadConfiguration: every configuration that would
// make markers illegal, or forget them before the last copy can arrive, is
// refused with an error that says which.
func TestNewInbox_RefusesABadConfiguration(t *testing.T) {
	s := memstore.New("/tenantId")
	ok := idempotent.InboxConfig{Consumer: "loyalty", PartitionKeyField: "tenantId", MarkerTTL: 2 * time.Hour, Horizon: horizon(2 * time.Hour)}
	if _, err := idempotent.NewInbox(s, ok); err != nil {
		t.Fatalf("NewInbox(%+v) = %v", ok, err)
	}
	for _, tt := range []struct {
		name string
		edit func(*idempotent.InboxConfig)
		want string
	}{
		{"illegal name", func(c *idempotent.InboxConfig) { c.Consumer = "loy/alty" }, "character"},
		{"no partition key field", func(c *idempotent.InboxConfig) { c.PartitionKeyField = "" }, "no partition key field"},
		{"nested partition key field", func(c *idempotent.InboxConfig) { c.PartitionKeyField = "/a/b" }, "not a top-level field"},
		{"partition key field of the marker", func(c *idempotent.InboxConfig) { c.PartitionKeyField = "/requestHash" }, "a field of the marker"},
		{"no TTL", func(c *idempotent.InboxConfig) { c.MarkerTTL = 0 }, "not between 1s"},
		{"TTL below a second", func(c *idempotent.InboxConfig) { c.MarkerTTL = 500 * time.Millisecond }, "not between 1s"},
		{"TTL beyond Cosmos DB's", func(c *idempotent.InboxConfig) { c.MarkerTTL = idempotent.MaxMarkerTTL + time.Second }, "not between 1s"},
		{"TTL below the horizon", func(c *idempotent.InboxConfig) { c.MarkerTTL = 2*time.Hour - time.Second }, "below the redelivery horizon's minimum retention 2h0m0s"},
		{"finite TTL, unbounded horizon", func(c *idempotent.InboxConfig) { c.Horizon = horizon(idempotent.UnboundedRetention) }, "the test's horizon"},
	} {
		cfg := ok
		tt.edit(&cfg)
		if _, err := idempotent.NewInbox(s, cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewInbox = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	if _, err := idempotent.NewInbox(nil, ok); err == nil {
		t.Error("NewInbox without a store accepted")
	}
	forever := ok
	forever.MarkerTTL, forever.Horizon = idempotent.UnboundedRetention, horizon(idempotent.UnboundedRetention)
	if _, err := idempotent.NewInbox(s, forever); err != nil {
		t.Errorf("UnboundedRetention under an unbounded horizon: %v", err)
	}
}

// TestValidateConsumerName: every name ValidateConsumerName accepts gives
// legal marker ids for every legal MessageId, and every name with a
// character Cosmos DB forbids in ids, a ':', or too long for the longest
// MessageId, is refused.
func TestValidateConsumerName(t *testing.T) {
	longest := strings.Repeat("n", idempotent.MaxConsumerNameLength)
	for _, name := range []string{"loyalty", "audit-v2", "a.b_c", longest} {
		if err := idempotent.ValidateConsumerName(name); err != nil {
			t.Errorf("ValidateConsumerName(%q) = %v", name, err)
			continue
		}
		if id := idempotent.InboxMarkerID(name, strings.Repeat("m", 128)); len(id) > 255 || strings.ContainsAny(id, `/\?#`) {
			t.Errorf("consumer %q: marker id of the longest MessageId is %d characters or has a forbidden character", name, len(id))
		}
	}
	for _, name := range []string{"", "loy/alty", `loy\alty`, "loyalty?", "loyalty#1", "a:b", "loyalty ", longest + "n"} {
		if err := idempotent.ValidateConsumerName(name); err == nil {
			t.Errorf("ValidateConsumerName(%q) accepted", name)
		}
	}
}
