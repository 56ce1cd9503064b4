package idempotent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// note is the smallest message type: an id and a text.
type note struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// noteKind is a Kind of four methods, as a user writes one.
type noteKind struct{}

func (noteKind) Decode(body []byte) (note, error) {
	var n note
	if err := json.Unmarshal(body, &n); err != nil {
		return n, err
	}
	if n.ID == "" {
		return n, errors.New("id is required")
	}
	return n, nil
}

func (noteKind) ID(n note) string { return n.ID }

func (noteKind) RequestHash(n note) string {
	sum := sha256.Sum256([]byte(n.Text))
	return hex.EncodeToString(sum[:])
}

func (noteKind) Documents(_ idempotent.Message, n note, hash string) ([]idempotent.Document, error) {
	body, err := json.Marshal(map[string]string{"id": n.ID, "requestHash": hash, "text": n.Text})
	return []idempotent.Document{{ID: n.ID, Body: body}}, err
}

// mapStore is a Store in a map: an atomic create-or-conflict per
// partition, and calls counted; createErr and readErr fail those calls.
type mapStore struct {
	mu                 sync.Mutex
	docs               map[string][]byte // pk + "/" + id -> body
	creates, reads     int
	createErr, readErr error
}

func newMapStore() *mapStore { return &mapStore{docs: map[string][]byte{}} }

func (s *mapStore) CreateBatch(_ context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creates++
	if s.createErr != nil {
		return nil, s.createErr
	}
	for _, d := range docs {
		if _, ok := s.docs[pk+"/"+d.ID]; ok {
			return nil, fmt.Errorf("409 Conflict on %s: %w", d.ID, idempotent.ErrAlreadyExists)
		}
	}
	etags := make([]string, len(docs))
	for i, d := range docs {
		s.docs[pk+"/"+d.ID] = d.Body
		etags[i] = fmt.Sprintf(`"%d"`, len(s.docs))
	}
	return etags, nil
}

func (s *mapStore) ReadDocument(_ context.Context, pk, id string) ([]byte, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.readErr != nil {
		return nil, "", s.readErr
	}
	body, ok := s.docs[pk+"/"+id]
	if !ok {
		return nil, "", idempotent.ErrNotFound
	}
	return body, `"1"`, nil
}

var _ idempotent.Store = (*mapStore)(nil)

func msg(id, body string, delivery uint32) idempotent.Message {
	return idempotent.Message{ID: id, Body: []byte(body), DeliveryCount: delivery}
}

func TestConsumer(t *testing.T) {
	transient := fmt.Errorf("429: %w", idempotent.ErrTransient)
	rejected := fmt.Errorf("413: %w", idempotent.ErrRejected)
	tests := []struct {
		name                  string
		stored                string // a note already processed, or ""
		m                     idempotent.Message
		createErr, readErr    error
		want                  idempotent.Outcome
		wantReason            string
		wantCreates, wantRead int
		wantDependency        bool
	}{
		{name: "new", m: msg("n1", `{"id":"n1","text":"a"}`, 1), want: idempotent.Created, wantCreates: 1},
		{name: "resend: the create conflicts, the read decides", stored: `{"id":"n1","text":"a"}`, m: msg("n1", `{"id":"n1","text":"a"}`, 1),
			want: idempotent.Duplicate, wantCreates: 1, wantRead: 1},
		{name: "redelivery reads first", stored: `{"id":"n1","text":"a"}`, m: msg("n1", `{"id":"n1","text":"a"}`, 2),
			want: idempotent.Duplicate, wantRead: 1},
		{name: "id reused", stored: `{"id":"n1","text":"a"}`, m: msg("n1", `{"id":"n1","text":"b"}`, 1),
			want: idempotent.Mismatch, wantReason: idempotent.ReasonIDReused, wantCreates: 1, wantRead: 1},
		{name: "redelivery of a new one reads, then creates", m: msg("n1", `{"id":"n1","text":"a"}`, 3),
			want: idempotent.Created, wantCreates: 1, wantRead: 1},
		{name: "not JSON", m: msg("n1", `{`, 1), want: idempotent.Invalid, wantReason: idempotent.ReasonInvalidMessage},
		{name: "missing id", m: msg("n1", `{"text":"a"}`, 1), want: idempotent.Invalid, wantReason: idempotent.ReasonInvalidMessage},
		{name: "MessageId is not the id", m: msg("n2", `{"id":"n1","text":"a"}`, 1), want: idempotent.Invalid, wantReason: idempotent.ReasonMessageIDMismatch},
		{name: "create throttled", m: msg("n1", `{"id":"n1","text":"a"}`, 1), createErr: transient,
			want: idempotent.Transient, wantReason: idempotent.ReasonStoreUnavailable, wantCreates: 1, wantDependency: true},
		{name: "read throttled", m: msg("n1", `{"id":"n1","text":"a"}`, 2), readErr: transient,
			want: idempotent.Transient, wantReason: idempotent.ReasonStoreUnavailable, wantRead: 1, wantDependency: true},
		{name: "store refuses the content", m: msg("n1", `{"id":"n1","text":"a"}`, 1), createErr: rejected,
			want: idempotent.Invalid, wantReason: idempotent.ReasonStoreRejected, wantCreates: 1},
		{name: "a permanent store error is retried", m: msg("n1", `{"id":"n1","text":"a"}`, 1), createErr: errors.New("403 Forbidden"),
			want: idempotent.Transient, wantReason: idempotent.ReasonStoreError, wantCreates: 1, wantDependency: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMapStore()
			if tt.stored != "" {
				c := idempotent.NewConsumer(noteKind{}, s)
				if r := c.Process(t.Context(), msg("n1", tt.stored, 1)); r.Outcome != idempotent.Created {
					t.Fatalf("setup: %v", r)
				}
				s.creates, s.reads = 0, 0
			}
			s.createErr, s.readErr = tt.createErr, tt.readErr
			r := idempotent.NewConsumer(noteKind{}, s).Process(t.Context(), tt.m)
			if r.Outcome != tt.want || r.Reason != tt.wantReason || r.DependencyFailed() != tt.wantDependency {
				t.Errorf("Process = %v %q (dependency %v): %s; want %v %q (dependency %v)", r.Outcome, r.Reason, r.DependencyFailed(), r.Description, tt.want, tt.wantReason, tt.wantDependency)
			}
			if s.creates != tt.wantCreates || s.reads != tt.wantRead {
				t.Errorf("round trips: %d creates, %d reads; want %d, %d", s.creates, s.reads, tt.wantCreates, tt.wantRead)
			}
			if tt.want == idempotent.Mismatch && strings.Count(r.Description, "request hash") != 2 {
				t.Errorf("a mismatch's description names both hashes: %s", r.Description)
			}
		})
	}
}

// TestConsumerConcurrent: many deliveries of one message at once; the
// store's atomic create makes exactly one of them Created.
func TestConsumerConcurrent(t *testing.T) {
	s := newMapStore()
	c := idempotent.NewConsumer(noteKind{}, s)
	var wg sync.WaitGroup
	results := make([]idempotent.Result, 32)
	for i := range results {
		wg.Go(func() { results[i] = c.Process(t.Context(), msg("n1", `{"id":"n1","text":"a"}`, 1)) })
	}
	wg.Wait()
	counts := map[idempotent.Outcome]int{}
	for _, r := range results {
		counts[r.Outcome]++
	}
	if counts[idempotent.Created] != 1 || counts[idempotent.Duplicate] != 31 {
		t.Errorf("outcomes %v, want 1 created and 31 duplicates", counts)
	}
}

// TestConsumerMarkerWithoutHash: a document with the entity's id that is
// no marker is unreadable (every redelivery would read it again: Invalid
// at once, as the inbox decides its markers), never a mismatch of every
// message.
func TestConsumerMarkerWithoutHash(t *testing.T) {
	for _, body := range []string{`{"id":"n1"}`, `{"id":"n1","requestHash":`} {
		s := newMapStore()
		s.docs["n1/n1"] = []byte(body)
		r := idempotent.NewConsumer(noteKind{}, s).Process(t.Context(), msg("n1", `{"id":"n1","text":"a"}`, 2))
		if r.Outcome != idempotent.Invalid || r.Reason != idempotent.ReasonStoredDocumentUnreadable || !errors.Is(r.Err, idempotent.ErrUnreadable) {
			t.Errorf("marker %s: Process = %v %s: %s; want Invalid %s", body, r.Outcome, r.Reason, r.Description, idempotent.ReasonStoredDocumentUnreadable)
		}
	}
}

func TestFactCache(t *testing.T) {
	s := newMapStore()
	cache := idempotent.NewFactCache(2)
	c := idempotent.NewConsumer(noteKind{}, s, idempotent.WithLookup(cache.Wrap))
	if r := c.Process(t.Context(), msg("n1", `{"id":"n1","text":"a"}`, 1)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	s.creates, s.reads = 0, 0
	for _, tt := range []struct {
		body string
		want idempotent.Outcome
	}{{`{"id":"n1","text":"a"}`, idempotent.Duplicate}, {`{"id":"n1","text":"b"}`, idempotent.Mismatch}} {
		if r := c.Process(t.Context(), msg("n1", tt.body, 2)); r.Outcome != tt.want {
			t.Errorf("%s: %v, want %v", tt.body, r.Outcome, tt.want)
		}
	}
	if s.creates+s.reads != 0 {
		t.Errorf("%d round trips for what the cache knows, want 0", s.creates+s.reads)
	}
	if st := cache.Stats(); st.Hits != 2 || st.Misses != 0 || st.Entries != 1 || st.Capacity != 2 || st.HitRate() != 1 {
		t.Errorf("stats %+v (hit rate %v), want 2 hits and no miss (the create taught it; a first delivery creates first), 1 of 2 entries", st, st.HitRate())
	}
	// CLOCK: when the cache is full, the hand passes over an entry used
	// since it last came by (n1, just looked up: its second chance) and
	// evicts the first one that was not (a, never looked up).
	cache.Learn("a", strings.Repeat("a", 64), false)
	cache.Learn("b", strings.Repeat("b", 64), true)
	if _, ok := cache.Get("a"); ok {
		t.Errorf("a still cached: the entry not used since the hand passed must go")
	}
	if _, ok := cache.Get("n1"); !ok {
		t.Errorf("n1 evicted although it was used since the hand passed")
	}
	if f, ok := cache.Get("b"); !ok || !f.Done || !f.Matches(strings.Repeat("b", 64)) || f.Hash() != strings.Repeat("b", 64) {
		t.Errorf("Get(b) = %+v, %v", f, ok)
	}
	cache.Learn("b", strings.Repeat("c", 64), false) // another hash for a known id replaces nothing
	if f, _ := cache.Get("b"); !f.Matches(strings.Repeat("b", 64)) || !f.Done {
		t.Errorf("a known fact changed: %+v", f)
	}
	cache.Learn("x", "not-a-sha256", false)
	if _, ok := cache.Get("x"); ok {
		t.Errorf("a hash that is not hex SHA-256 was cached")
	}
}

// TestFactCacheMemoryFollowsUse: a cache's memory grows with the entities
// it learns, up to its size, and is not taken in full when it is made; once
// full it evicts and keeps its size.
func TestFactCacheMemoryFollowsUse(t *testing.T) {
	allocated := func(f func()) uint64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	var cache *idempotent.FactCache
	// A full cache of a million entities would be more than 50 MB. The
	// least of three: what another goroutine allocates meanwhile only adds.
	n := uint64(math.MaxUint64)
	for range 3 {
		n = min(n, allocated(func() { cache = idempotent.NewFactCache(1_000_000) }))
	}
	if n > 4<<10 {
		t.Errorf("NewFactCache(1_000_000) allocated %d bytes, want at most 4 KB before anything is learned", n)
	}
	if st := cache.Stats(); st.Entries != 0 || st.Capacity != 1_000_000 {
		t.Errorf("stats %+v, want 0 entries of 1000000", st)
	}
	const size = 300 // not a power of two: the last growth stops at size
	cache = idempotent.NewFactCache(size)
	hash := strings.Repeat("ab", 32)
	for i := range 2 * size {
		id := fmt.Sprintf("e%d", i)
		cache.Learn(id, hash, false)
		if _, ok := cache.Get(id); !ok {
			t.Fatalf("%s not cached right after it was learned", id)
		}
		if st := cache.Stats(); st.Entries != min(i+1, size) {
			t.Fatalf("after %d entities: %d entries, want %d", i+1, st.Entries, min(i+1, size))
		}
	}
	if _, ok := cache.Get("e0"); ok {
		t.Errorf("e0 still cached after %d more entities than the cache holds", size)
	}
}

// TestFactCacheFullSize: a full cache of 10,000 entities, the worker's
// default, holds less than 1 MB (0.9 MB: 66 bytes a slot, and an index
// keyed by 8 bytes; an index keyed by the whole 32-byte key made it 1.3
// MB). Live heap after a collection, the least of three: what another
// goroutine keeps meanwhile only adds.
func TestFactCacheFullSize(t *testing.T) {
	const size = 10_000
	hash := strings.Repeat("ab", 32)
	live := uint64(math.MaxUint64)
	for range 3 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		cache := idempotent.NewFactCache(size)
		for i := range size {
			cache.Learn(fmt.Sprintf("ord-%d", i), hash, false)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		if st := cache.Stats(); st.Entries != size {
			t.Fatalf("%d entries, want %d", st.Entries, size)
		}
		live = min(live, m1.HeapAlloc-min(m0.HeapAlloc, m1.HeapAlloc))
		runtime.KeepAlive(cache)
	}
	if live > 1<<20 {
		t.Errorf("a full cache of %d entities holds %d KB, want less than 1 MB", size, live>>10)
	}
}

func TestCopyShare(t *testing.T) {
	var p idempotent.CopyShare
	first, again := msg("n", "", 1), msg("n", "", 2)
	if p.ReadFirst(first) || !p.ReadFirst(again) {
		t.Fatalf("a fresh policy: ReadFirst(first) %v, ReadFirst(redelivery) %v; want false, true", p.ReadFirst(first), p.ReadFirst(again))
	}
	for range 100 {
		p.Observe(again, true) // redeliveries are not counted
	}
	if share, _ := p.Estimate(); share != 0 {
		t.Errorf("redeliveries moved the estimate to %v", share)
	}
	n := 0
	for !p.ReadFirst(first) {
		p.Observe(first, true)
		n++
	}
	if n != 27 {
		t.Errorf("read-first after %d copies, want 27", n)
	}
	for p.ReadFirst(first) {
		p.Observe(first, false)
	}
	if share, rf := p.Estimate(); rf || share >= 7.0/16 {
		t.Errorf("after new entities: share %v, read-first %v; want below 7/16 and off", share, rf)
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[idempotent.Outcome]string{idempotent.Created: "created", idempotent.Ignored: "ignored", 0: "Outcome(0)", 99: "Outcome(99)"} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), got, want)
		}
	}
}

// A message type plugs into the pattern with a Kind of four methods; the
// store is any Store with an atomic batch create.
func ExampleConsumer() {
	c := idempotent.NewConsumer(noteKind{}, newMapStore())
	ctx := context.Background()
	for _, m := range []idempotent.Message{
		msg("n1", `{"id":"n1","text":"hello"}`, 1),
		msg("n1", `{"id":"n1","text":"hello"}`, 2), // a redelivery
		msg("n1", `{"id":"n1","text":"other"}`, 1), // the id reused for other content
		msg("n2", `not json`, 1),
	} {
		r := c.Process(ctx, m)
		fmt.Println(strings.TrimSpace(r.Outcome.String() + " " + r.Reason))
	}
	// Output:
	// created
	// duplicate
	// mismatch IdReused
	// invalid InvalidMessage
}
