package invoice_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// mailService is a fake mail service: it deduplicates on the idempotency
// key as a real provider does (a key it has seen answers the first call's
// message id and sends nothing), and records every call's key and every
// mail it really sent.
type mailService struct {
	mu    sync.Mutex
	byKey map[string]string // key -> message id
	keys  []string          // every call's key, in order
	sent  []invoice.Mail    // every mail really sent
	fail  error             // every call fails with it, sending nothing
	// afterSend, if set, runs after the service answered and before the
	// call returns: a crash there is one between the call and the
	// completed record.
	afterSend func()
	// entered, if set, receives once per call on entry; hold, if set, is
	// waited for (or the call's context) before the call goes on.
	entered chan struct{}
	hold    chan struct{}
}

var _ invoice.Mailer = (*mailService)(nil)

func newMailService() *mailService { return &mailService{byKey: map[string]string{}} }

func (s *mailService) SendInvoice(ctx context.Context, key string, m invoice.Mail) (string, error) {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	s.mu.Lock()
	s.keys = append(s.keys, key)
	if s.fail != nil {
		err := s.fail
		s.mu.Unlock()
		return "", err
	}
	id, ok := s.byKey[key]
	if !ok {
		s.sent = append(s.sent, m)
		id = fmt.Sprintf("msg-%d", len(s.sent))
		s.byKey[key] = id
	}
	after := s.afterSend
	s.mu.Unlock()
	if after != nil {
		after()
	}
	return id, nil
}

// counts returns the calls so far and the mails really sent.
func (s *mailService) counts() (calls, mails int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys), len(s.sent)
}

// otherKeys returns the calls' keys that are not want.
func (s *mailService) otherKeys(want string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(s.keys), func(k string) bool { return k == want })
}

// docStore is a DocumentStore that counts the round trips it passes to the
// store it wraps and injects failures.
type docStore struct {
	idempotent.DocumentStore
	createErr atomic.Pointer[error] // creates fail with it
	// down makes every call fail transiently: the process crashed, and
	// nothing it does reaches the store any more.
	down                     atomic.Bool
	creates, reads, replaces atomic.Int64
}

var errCrashed = fmt.Errorf("the process has crashed: %w", idempotent.ErrTransient)

func (s *docStore) setCreateErr(err error) {
	if err == nil {
		s.createErr.Store(nil)
		return
	}
	s.createErr.Store(&err)
}

func (s *docStore) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	s.creates.Add(1)
	if s.down.Load() {
		return nil, errCrashed
	}
	if err := s.createErr.Load(); err != nil {
		return nil, *err
	}
	return s.DocumentStore.CreateBatch(ctx, pk, docs)
}

func (s *docStore) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	s.reads.Add(1)
	if s.down.Load() {
		return nil, "", errCrashed
	}
	return s.DocumentStore.ReadDocument(ctx, pk, id)
}

func (s *docStore) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	s.replaces.Add(1)
	if s.down.Load() {
		return "", errCrashed
	}
	return s.DocumentStore.ReplaceDocument(ctx, pk, d, ifMatch)
}

// roundTrips returns the calls counted so far and resets the counters.
func (s *docStore) roundTrips() [3]int64 {
	return [3]int64{s.creates.Swap(0), s.reads.Swap(0), s.replaces.Swap(0)}
}

// clock is a clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
