// Package memstore is an in-memory document store with the Cosmos DB semantics
// the idempotent consumer relies on: documents addressed by partition key and
// id, an atomic create that fails with a conflict when the id exists, and a
// transactional batch that applies all of its operations or none and reports
// the conflict on the operation that caused it (409) and 424 on the others.
//
// It implements order.Store and order.DocumentStore for tests and for the
// project's embedded default, which runs the whole pipeline with no Azure and
// no Docker. Like Cosmos DB, it gives every write a new ETag, honours
// If-Match conditions on replace (412 when the ETag moved), and expires a
// document whose JSON has a "ttl" field (seconds) that long after its last
// write. A Store is safe for concurrent use; every operation is atomic with
// respect to every other.
package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
)

// Store is an in-memory document container. The zero value is not usable;
// call New.
type Store struct {
	mu    sync.Mutex
	parts map[string]map[string]*Item // partition key -> id -> item
	etag  uint64
	now   func() time.Time
}

var (
	_ order.Store         = (*Store)(nil)
	_ order.DocumentStore = (*Store)(nil)
)

// New returns an empty Store on the real clock.
func New() *Store { return NewWithClock(time.Now) }

// NewWithClock returns an empty Store whose time-to-live expiry follows now.
func NewWithClock(now func() time.Time) *Store {
	return &Store{parts: make(map[string]map[string]*Item), now: now}
}

// Item is a stored document.
type Item struct {
	PartitionKey string
	ID           string
	Body         []byte    // the JSON document as written
	ETag         string    // changes on every write
	Writes       int       // how many writes this document has seen; 1 for a document never changed
	ExpiresAt    time.Time // zero: never; set from the document's "ttl" field
}

// BatchError reports the operation that made a transactional batch fail, as
// Cosmos DB does: the failing operation has StatusCode, every other operation
// 424 (failed dependency), and nothing was written.
type BatchError struct {
	Index      int // the failing operation, 0-based
	ID         string
	StatusCode int // http.StatusConflict for an existing id
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("transactional batch failed: operation %d (id %q): %d %s", e.Index, e.ID, e.StatusCode, http.StatusText(e.StatusCode))
}

// Is makes a conflicting batch match order.ErrAlreadyExists.
func (e *BatchError) Is(target error) bool {
	return target == order.ErrAlreadyExists && e.StatusCode == http.StatusConflict
}

// CreateBatch creates every document in partition pk, atomically: if any id
// exists, it writes nothing and returns a *BatchError for the first
// conflicting operation.
func (s *Store) CreateBatch(ctx context.Context, pk string, docs []order.Document) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range docs {
		if _, ok := s.live(pk, d.ID); ok {
			return &BatchError{Index: i, ID: d.ID, StatusCode: http.StatusConflict}
		}
	}
	part := s.parts[pk]
	if part == nil {
		part = make(map[string]*Item)
		s.parts[pk] = part
	}
	for _, d := range docs {
		it := &Item{PartitionKey: pk, ID: d.ID}
		s.write(it, d.Body)
		part[d.ID] = it
	}
	return nil
}

// CreateDocuments implements order.DocumentStore with CreateBatch.
func (s *Store) CreateDocuments(ctx context.Context, pk string, docs []order.Document) error {
	return s.CreateBatch(ctx, pk, docs)
}

// ReadDocument implements order.DocumentStore.
func (s *Store) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.live(pk, id)
	if !ok {
		return nil, "", fmt.Errorf("read %s/%s: %w", pk, id, order.ErrNotFound)
	}
	return append([]byte(nil), it.Body...), it.ETag, nil
}

// ReplaceDocument implements order.DocumentStore: it replaces d if its ETag
// is still ifMatch (an empty ifMatch replaces unconditionally).
func (s *Store) ReplaceDocument(ctx context.Context, pk string, d order.Document, ifMatch string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.live(pk, d.ID)
	if !ok {
		return "", fmt.Errorf("replace %s/%s: %w", pk, d.ID, order.ErrNotFound)
	}
	if ifMatch != "" && it.ETag != ifMatch {
		return "", fmt.Errorf("replace %s/%s: ETag %s is not %s: %w", pk, d.ID, it.ETag, ifMatch, order.ErrPreconditionFailed)
	}
	s.write(it, d.Body)
	return it.ETag, nil
}

// live returns the document pk/id unless it is absent or expired; expired
// documents are removed. s.mu must be held.
func (s *Store) live(pk, id string) (*Item, bool) {
	it, ok := s.parts[pk][id]
	if ok && !it.ExpiresAt.IsZero() && !s.now().Before(it.ExpiresAt) {
		delete(s.parts[pk], id)
		return nil, false
	}
	return it, ok
}

// write stores body in it with a new ETag and its time-to-live. s.mu must
// be held.
func (s *Store) write(it *Item, body []byte) {
	s.etag++
	it.Body = append([]byte(nil), body...)
	it.ETag = strconv.FormatUint(s.etag, 16)
	it.Writes++
	it.ExpiresAt = time.Time{}
	var ttl struct {
		TTL *int `json:"ttl"`
	}
	if json.Unmarshal(body, &ttl) == nil && ttl.TTL != nil && *ttl.TTL > 0 {
		it.ExpiresAt = s.now().Add(time.Duration(*ttl.TTL) * time.Second)
	}
}

// Get returns a copy of the document pk/id.
func (s *Store) Get(pk, id string) (Item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.live(pk, id)
	if !ok {
		return Item{}, false
	}
	c := *it
	c.Body = append([]byte(nil), it.Body...)
	return c, true
}

// Items returns a copy of every live document, ordered by partition key and
// id.
func (s *Store) Items() []Item {
	s.mu.Lock()
	var out []Item
	for pk, part := range s.parts {
		for id := range part {
			it, ok := s.live(pk, id)
			if !ok {
				continue
			}
			c := *it
			c.Body = append([]byte(nil), it.Body...)
			out = append(out, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].PartitionKey != out[j].PartitionKey {
			return out[i].PartitionKey < out[j].PartitionKey
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// CreateOrder implements order.Store with one transactional batch.
func (s *Store) CreateOrder(ctx context.Context, w order.Write) error {
	docs, err := w.Documents()
	if err != nil {
		return err
	}
	return s.CreateBatch(ctx, w.PartitionKey(), docs)
}

// ReadOrder implements order.Store.
func (s *Store) ReadOrder(ctx context.Context, orderID string) (order.OrderDocument, error) {
	var doc order.OrderDocument
	if err := ctx.Err(); err != nil {
		return doc, err
	}
	it, ok := s.Get(orderID, orderID)
	if !ok {
		return doc, fmt.Errorf("read order %q: %w", orderID, order.ErrNotFound)
	}
	if err := json.Unmarshal(it.Body, &doc); err != nil {
		return doc, fmt.Errorf("read order %q: %w", orderID, err)
	}
	return doc, nil
}
