package idempotent_test

import (
	"context"
	"crypto/sha256"
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

// receipt is a message with a side effect: an invoice whose receipt is
// mailed once.
type receipt struct {
	ID string `json:"invoiceId"`
	To string `json:"to"`
}

// receiptKind is a Kind and an EffectKind: the receipt mail's request is
// the recipient.
type receiptKind struct{}

var (
	_ idempotent.Kind[receipt]       = receiptKind{}
	_ idempotent.EffectKind[receipt] = receiptKind{}
)

func (receiptKind) Decode(body []byte) (receipt, error) {
	var r receipt
	if err := json.Unmarshal(body, &r); err != nil {
		return r, err
	}
	if r.ID == "" {
		return r, errors.New("invoiceId is required")
	}
	if r.To == "" {
		return r, &idempotent.EntityError{Entity: r.ID, Err: errors.New("to is required")}
	}
	return r, nil
}

func (receiptKind) ID(r receipt) string { return r.ID }

func (receiptKind) RequestHash(r receipt) string {
	sum := sha256.Sum256([]byte(r.To))
	return hex.EncodeToString(sum[:])
}

func (receiptKind) Documents(_ idempotent.Message, r receipt, hash string) ([]idempotent.Document, error) {
	marker, err := json.Marshal(map[string]string{"id": r.ID, "invoiceId": r.ID, "requestHash": hash, "to": r.To})
	if err != nil {
		return nil, err
	}
	event, err := json.Marshal(map[string]string{"id": "Accepted:" + r.ID, "invoiceId": r.ID})
	return []idempotent.Document{{ID: r.ID, Body: marker}, {ID: "Accepted:" + r.ID, Body: event}}, err
}

func (receiptKind) EffectRequest(r receipt) ([]byte, bool) {
	b, err := json.Marshal(map[string]string{"to": r.To})
	return b, err == nil
}

// mailer is a Downstream that deduplicates on the key, as a real one
// does, and counts what it did: effects are the mails really sent.
type mailer struct {
	mu      sync.Mutex
	sent    map[string]string // key -> ref
	keys    []string          // every call's key
	effects int
	fail    error // every call fails with it
	find    bool  // implements Finder through finder
}

func newMailer() *mailer { return &mailer{sent: map[string]string{}} }

func (m *mailer) Do(_ context.Context, key, entity string, request []byte) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys = append(m.keys, key)
	if m.fail != nil {
		return "", m.fail
	}
	if ref, ok := m.sent[key]; ok {
		return ref, nil
	}
	m.effects++
	ref := fmt.Sprintf("mail-%d", m.effects)
	m.sent[key] = ref
	return ref, nil
}

func (m *mailer) calls() (int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.keys), m.effects
}

// finder is a mailer whose ledger can be searched.
type finder struct{ *mailer }

func (f finder) Find(_ context.Context, entity string, _ []byte) ([]idempotent.Found, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []idempotent.Found
	for key, ref := range f.sent {
		if strings.HasSuffix(key, ":"+entity) {
			out = append(out, idempotent.Found{Ref: ref, Matches: true})
		}
	}
	return out, nil
}

// trips is a memstore that counts round trips and injects failures.
type trips struct {
	*memstore.Store
	mu                       sync.Mutex
	n                        int
	commitThenFail           int   // creates that commit but report a timeout
	replaceErr               error // every replace fails with it
	readsOnly, creates, reps int
}

func (s *trips) count(f *int) {
	s.mu.Lock()
	s.n++
	*f++
	s.mu.Unlock()
}

func (s *trips) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	s.count(&s.creates)
	etags, err := s.Store.CreateBatch(ctx, pk, docs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.commitThenFail > 0 {
		s.commitThenFail--
		return nil, fmt.Errorf("request timed out after the commit: %w", idempotent.ErrTransient)
	}
	return etags, err
}

func (s *trips) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	s.count(&s.readsOnly)
	return s.Store.ReadDocument(ctx, pk, id)
}

func (s *trips) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	s.count(&s.reps)
	if s.replaceErr != nil {
		return "", s.replaceErr
	}
	return s.Store.ReplaceDocument(ctx, pk, d, ifMatch)
}

func (s *trips) roundTrips() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.n
	s.n = 0
	return n
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// receiptsLease is the claims' lease of newReceipts' effect.
const receiptsLease = time.Minute

func newReceipts(s *trips, d idempotent.Downstream, clk *clock, opts ...idempotent.Option) *idempotent.Consumer[receipt] {
	e := idempotent.NewEffect(s, idempotent.EffectOptions{Name: "Receipt", PartitionKeyField: "invoiceId",
		Downstream: d, Lease: receiptsLease, Owner: "w1", Now: clk.Now})
	return idempotent.NewConsumer[receipt](receiptKind{}, s, append([]idempotent.Option{idempotent.WithEffect(e)}, opts...)...)
}

func mailDelivery(id, to string, seq int64, count uint32) idempotent.Message {
	return idempotent.Message{ID: id, Body: []byte(fmt.Sprintf(`{"invoiceId":%q,"to":%q}`, id, to)), SequenceNumber: seq, DeliveryCount: count}
}

// TestEffectOnce: the outcomes, round trips and downstream calls of a
// consumer with an effect.
func TestEffectOnce(t *testing.T) {
	s := &trips{Store: memstore.New("/invoiceId")}
	m := newMailer()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	c := newReceipts(s, m, clk, idempotent.WithFactCache(idempotent.NewFactCache(16)))

	if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 1, 1)); r.Outcome != idempotent.Created {
		t.Fatalf("first delivery: %v %s", r.Outcome, r.Description)
	}
	if n := s.roundTrips(); n != 2 {
		t.Errorf("a new entity cost %d round trips, want 2 (the batch with the claim, the completed mark)", n)
	}
	if calls, effects := m.calls(); calls != 1 || effects != 1 || m.keys[0] != "Receipt:inv-1" {
		t.Errorf("%d calls, %d effects, keys %v; want one call with Receipt:inv-1", calls, effects, m.keys)
	}
	// The record: the configured partition key field, the request's fields
	// beside the record's, the reference.
	it, ok := s.Get("inv-1", "Receipt:inv-1")
	var rec map[string]any
	if !ok || json.Unmarshal(it.Body, &rec) != nil || rec["invoiceId"] != "inv-1" || rec["to"] != "a@x" ||
		rec["ref"] != "mail-1" || rec["state"] != idempotent.EffectCompleted || rec["type"] != "effect" {
		t.Errorf("record %s", it.Body)
	}
	// A hot duplicate: no round trip, no call.
	if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 2, 1)); r.Outcome != idempotent.Duplicate {
		t.Errorf("copy: %v %s", r.Outcome, r.Description)
	}
	if n := s.roundTrips(); n != 0 {
		t.Errorf("a hot duplicate cost %d round trips, want 0", n)
	}
	// A cold duplicate (another worker): one read, of the record.
	c2 := newReceipts(s, m, clk)
	if r := c2.Process(t.Context(), mailDelivery("inv-1", "a@x", 1, 2)); r.Outcome != idempotent.Duplicate {
		t.Errorf("redelivery: %v %s", r.Outcome, r.Description)
	}
	if n := s.roundTrips(); n != 1 {
		t.Errorf("a redelivery cost %d round trips, want 1", n)
	}
	// The id reused: the record's hash tells it.
	if r := c2.Process(t.Context(), mailDelivery("inv-1", "b@x", 1, 3)); r.Outcome != idempotent.Mismatch || r.Reason != idempotent.ReasonIDReused {
		t.Errorf("reused: %v %q %s", r.Outcome, r.Reason, r.Description)
	}
	if calls, effects := m.calls(); calls != 1 || effects != 1 {
		t.Errorf("%d calls, %d effects after the duplicates, want 1 and 1", calls, effects)
	}
	// Invalid names the entity when its id parsed.
	if r := c.Process(t.Context(), idempotent.Message{ID: "inv-2", Body: []byte(`{"invoiceId":"inv-2"}`), DeliveryCount: 1}); r.Outcome != idempotent.Invalid || r.Key != "inv-2" {
		t.Errorf("invalid: %v %q", r.Outcome, r.Key)
	}
}

// TestEffectAfterAnAmbiguousWrite: a create that commits but reports a
// timeout is Transient; every later delivery is a Duplicate, and the
// effect still happens, once.
func TestEffectAfterAnAmbiguousWrite(t *testing.T) {
	s := &trips{Store: memstore.New("/invoiceId"), commitThenFail: 1}
	m := newMailer()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	c := newReceipts(s, m, clk, idempotent.WithFactCache(idempotent.NewFactCache(16)))
	want := []idempotent.Outcome{idempotent.Transient, idempotent.Duplicate, idempotent.Duplicate, idempotent.Duplicate}
	for i, w := range want {
		r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 7, uint32(i+1)))
		if r.Outcome != w {
			t.Fatalf("delivery %d: %v %q %s, want %v", i+1, r.Outcome, r.Reason, r.Description, w)
		}
		if i == 1 && !r.Resumed {
			t.Errorf("delivery 2 did not say it resumed the claim of delivery 1")
		}
	}
	if calls, effects := m.calls(); calls != 1 || effects != 1 {
		t.Errorf("%d calls, %d effects, want 1 and 1", calls, effects)
	}
}

// TestEffectCrashBeforeTheCompletedMark: the call succeeded, the completed
// mark failed; the next delivery of the copy calls again with the same key
// and the downstream answers from it.
func TestEffectCrashBeforeTheCompletedMark(t *testing.T) {
	s := &trips{Store: memstore.New("/invoiceId")}
	m := newMailer()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	c := newReceipts(s, m, clk)
	s.replaceErr = fmt.Errorf("connection reset: %w", idempotent.ErrTransient)
	if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 3, 1)); r.Outcome != idempotent.Transient || !r.DependencyFailed() {
		t.Fatalf("first delivery: %v %q %s, want a retry for the store", r.Outcome, r.Reason, r.Description)
	}
	s.replaceErr = nil
	// Another copy within the lease waits: the claim may be calling. It
	// can only take the claim over when the lease ends, and says when
	// (RetryAfter: a worker with a Scheduler waits in a copy instead of
	// spending deliveries; the clock has not moved, so the whole lease).
	if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 4, 1)); r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonEffectInProgress ||
		r.DependencyFailed() || r.RetryAfter != receiptsLease {
		t.Fatalf("another copy: %v %q %s, RetryAfter %v; want in progress, not a dependency's failure, until the lease of %v ends", r.Outcome, r.Reason, r.Description, r.RetryAfter, receiptsLease)
	}
	// The same copy's next delivery takes the claim over at once.
	r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 3, 2))
	if r.Outcome != idempotent.Duplicate || !r.Resumed {
		t.Fatalf("redelivery: %v %q %s resumed %v", r.Outcome, r.Reason, r.Description, r.Resumed)
	}
	calls, effects := m.calls()
	if calls != 2 || effects != 1 || m.keys[0] != m.keys[1] {
		t.Errorf("%d calls with keys %v, %d effects; want 2 with one key, 1 effect", calls, m.keys, effects)
	}
}

// TestEffectLeaseAndStaleClaims: another copy takes a claim over only
// after the lease; a claim older than the blind-retry age is looked up,
// and without a Finder it is dead-lettered for reconciliation.
func TestEffectLeaseAndStaleClaims(t *testing.T) {
	for _, tt := range []struct {
		name       string
		find       bool
		age        time.Duration
		want       idempotent.Outcome
		wantReason string
		wantCalls  int
	}{
		{"after the lease", false, 2 * time.Minute, idempotent.Duplicate, "", 2},
		{"key may be forgotten, no finder", false, 25 * time.Hour, idempotent.Invalid, idempotent.ReasonEffectNeedsReconciliation, 1},
		{"key may be forgotten, found in the ledger", true, 25 * time.Hour, idempotent.Duplicate, "", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &trips{Store: memstore.New("/invoiceId")}
			m := newMailer()
			var d idempotent.Downstream = m
			if tt.find {
				d = finder{m}
			}
			clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			c := newReceipts(s, d, clk)
			s.replaceErr = fmt.Errorf("unavailable: %w", idempotent.ErrTransient) // the claim stays held
			c.Process(t.Context(), mailDelivery("inv-1", "a@x", 1, 1))
			s.replaceErr = nil
			clk.Add(tt.age)
			r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 2, 1))
			if r.Outcome != tt.want || r.Reason != tt.wantReason {
				t.Fatalf("%v %q %s, want %v %q", r.Outcome, r.Reason, r.Description, tt.want, tt.wantReason)
			}
			if tt.want == idempotent.Invalid && !strings.Contains(r.Description, "Receipt:inv-1") {
				t.Errorf("description %q does not carry the key", r.Description)
			}
			if calls, effects := m.calls(); calls != tt.wantCalls || effects != 1 {
				t.Errorf("%d calls, %d effects, want %d and 1", calls, effects, tt.wantCalls)
			}
		})
	}
}

// TestEffectConcurrentDeliveries: 32 deliveries at once, of copies and
// redeliveries: at most one Created, one effect, one key.
func TestEffectConcurrentDeliveries(t *testing.T) {
	s := &trips{Store: memstore.New("/invoiceId")}
	m := newMailer()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	c := newReceipts(s, m, clk)
	var wg sync.WaitGroup
	results := make([]idempotent.Result, 32)
	for i := range results {
		wg.Go(func() { results[i] = c.Process(t.Context(), mailDelivery("inv-1", "a@x", int64(i%4+1), uint32(i/4+1))) })
	}
	wg.Wait()
	created := 0
	for _, r := range results {
		switch r.Outcome {
		case idempotent.Created:
			created++
		case idempotent.Duplicate, idempotent.Transient:
		default:
			t.Errorf("%v %q %s", r.Outcome, r.Reason, r.Description)
		}
	}
	// Whatever was left in progress completes on a later delivery.
	clk.Add(2 * time.Minute)
	if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 9, 1)); r.Outcome != idempotent.Duplicate {
		t.Errorf("late copy: %v %s", r.Outcome, r.Description)
	}
	if created > 1 {
		t.Errorf("%d deliveries returned Created", created)
	}
	_, effects := m.calls()
	for _, k := range m.keys {
		if k != "Receipt:inv-1" {
			t.Errorf("a call with key %q", k)
		}
	}
	if effects != 1 {
		t.Errorf("%d effects, want 1", effects)
	}
}

// TestMarkerMissing: a create that conflicts on a companion whose marker
// is gone is retried on its first delivery (every read that missed the
// marker may have lagged) and Invalid on a redelivery once a second read
// confirms it; with the companion gone too it is retried.
func TestMarkerMissing(t *testing.T) {
	for _, tt := range []struct {
		name       string
		keepEvent  bool
		want       idempotent.Outcome
		wantReason string
	}{
		{"companion left", true, idempotent.Invalid, idempotent.ReasonMarkerMissing},
		{"marker alone left, then deleted", false, idempotent.Transient, idempotent.ReasonConcurrentUpdate},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New("/invoiceId")
			c := idempotent.NewConsumer[receipt](receiptKind{}, s)
			if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 1, 1)); r.Outcome != idempotent.Created {
				t.Fatal(r)
			}
			s.Delete("inv-1", "inv-1")
			if !tt.keepEvent {
				// The event is gone too, but the create conflicts: a
				// marker written again and deleted between the two.
				s.Delete("inv-1", "Accepted:inv-1")
				if _, err := s.CreateBatch(t.Context(), "inv-1", []idempotent.Document{{ID: "Accepted:inv-1", Body: []byte(`{"id":"Accepted:inv-1","invoiceId":"inv-1"}`)}}); err != nil {
					t.Fatal(err)
				}
				s2 := &deleteAfterConflict{Store: s}
				c = idempotent.NewConsumer[receipt](receiptKind{}, s2)
			}
			dc := uint32(1)
			if tt.want == idempotent.Invalid {
				if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 1, 1)); r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonConcurrentUpdate {
					t.Fatalf("first delivery: %v %q %s, want a retry: its reads may have lagged", r.Outcome, r.Reason, r.Description)
				}
				dc = 2
			}
			r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 1, dc))
			if r.Outcome != tt.want || r.Reason != tt.wantReason || r.Key != "inv-1" {
				t.Fatalf("%v %q %s, want %v %q", r.Outcome, r.Reason, r.Description, tt.want, tt.wantReason)
			}
			if tt.want == idempotent.Invalid && (!strings.Contains(r.Description, `"Accepted:inv-1"`) || !strings.Contains(r.Description, "resubmit")) {
				t.Errorf("description %q does not name the companion and what to do", r.Description)
			}
		})
	}
}

// deleteAfterConflict deletes the companion after a create conflicts on
// it, as a concurrent cleanup would.
type deleteAfterConflict struct{ *memstore.Store }

func (s *deleteAfterConflict) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	etags, err := s.Store.CreateBatch(ctx, pk, docs)
	if errors.Is(err, idempotent.ErrAlreadyExists) {
		s.Store.Delete(pk, "Accepted:"+pk)
	}
	return etags, err
}

// TestEffectAlone: the Effect without a Consumer, and its options checked.
func TestEffectAlone(t *testing.T) {
	s := memstore.New("/invoiceId")
	m := newMailer()
	e := idempotent.NewEffect(s, idempotent.EffectOptions{Name: "Receipt", PartitionKeyField: "invoiceId", Downstream: m, Lease: time.Minute})
	for i := range 3 {
		r, done := e.Run(t.Context(), mailDelivery("inv-9", "a@x", 1, uint32(i+1)), "inv-9", "", []byte(`{"to":"a@x"}`))
		if !done {
			t.Fatalf("run %d: %v %s", i, r.Outcome, r.Description)
		}
	}
	if calls, effects := m.calls(); calls != 1 || effects != 1 {
		t.Errorf("%d calls, %d effects, want 1 and 1", calls, effects)
	}
	// The field may be given as the container's partition key path.
	byPath := idempotent.NewEffect(s, idempotent.EffectOptions{Name: "Receipt", PartitionKeyField: "/invoiceId", Downstream: m, Lease: time.Minute})
	if r, done := byPath.Run(t.Context(), mailDelivery("inv-8", "a@x", 1, 1), "inv-8", "", []byte(`{"to":"a@x"}`)); !done {
		t.Fatalf("run with the path /invoiceId: %v %s", r.Outcome, r.Description)
	}
	if rec, _, err := byPath.Read(t.Context(), "inv-8"); err != nil || rec.State != idempotent.EffectCompleted {
		t.Errorf("record of inv-8: %+v, %v; want it completed", rec, err)
	}
	bad := idempotent.NewEffect(s, idempotent.EffectOptions{Name: "Receipt", PartitionKeyField: "/in/voiceId", Downstream: m})
	if err := bad.Err(); err == nil || !strings.Contains(err.Error(), "lease") || !strings.Contains(err.Error(), "partition key field") {
		t.Errorf("Err = %v, want the lease and the field named", err)
	}
	if r, done := bad.Run(t.Context(), mailDelivery("inv-9", "a@x", 1, 1), "inv-9", "", []byte(`{}`)); done || r.Outcome != idempotent.Transient || !r.DependencyFailed() {
		t.Errorf("misconfigured run: %v %v", r.Outcome, done)
	}
}

// TestEffectResumedFromTheFactCache: the cache knows the entity's hash but
// not that its effect completed (the call failed after the create), so a
// copy it answers makes the effect, and only then is it a Duplicate that
// costs nothing.
func TestEffectResumedFromTheFactCache(t *testing.T) {
	s := &trips{Store: memstore.New("/invoiceId")}
	m := newMailer()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	c := newReceipts(s, m, clk, idempotent.WithFactCache(idempotent.NewFactCache(16)))
	m.fail = fmt.Errorf("mail server down: %w", idempotent.ErrTransient)
	if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 1, 1)); r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonEffectUnavailable || !r.DependencyFailed() {
		t.Fatalf("first delivery: %v %q %s, want a retry for the downstream", r.Outcome, r.Reason, r.Description)
	}
	m.fail = nil
	if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 2, 1)); r.Outcome != idempotent.Duplicate {
		t.Fatalf("copy: %v %q %s", r.Outcome, r.Reason, r.Description)
	}
	if _, effects := m.calls(); effects != 1 {
		t.Fatalf("%d effects after the copy, want 1", effects)
	}
	s.roundTrips()
	if r := c.Process(t.Context(), mailDelivery("inv-1", "a@x", 3, 1)); r.Outcome != idempotent.Duplicate {
		t.Errorf("another copy: %v %s", r.Outcome, r.Description)
	}
	if n := s.roundTrips(); n != 0 {
		t.Errorf("a copy after the effect completed cost %d round trips, want 0", n)
	}
}
