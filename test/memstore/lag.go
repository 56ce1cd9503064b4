package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// ReplicaLag configures the replica-lag mode of a Store (SetReplicaLag).
//
// The rule it stands for is Cosmos DB's Session consistency, the
// consistency of the Bicep template's account: a read sees every write whose
// session token it carries (read your writes, within the session); a read
// without one, or with an older one, may be served by a replica that has not
// yet applied the latest writes of the partition, and sees the partition as
// it was a few writes ago, never a state that did not exist and never one
// older than the token it carries. In this model a replica's state is a
// prefix of the partition's writes: a read that lags sees the partition as
// it was after one of its last Versions writes (picked by Pick, or at
// random), documents written together in one batch appear together, and
// each read may land on another replica.
//
// Replicas catch up: a write is applied everywhere within Window of its
// commit, so a read never sees a state that a write older than Window
// replaced. Without that bound (Window zero) a partition that no one writes
// again would lag for ever, which Cosmos DB's replication does not do: a
// model that stale makes every delivery of a message re-read the same old
// state until MaxDeliveryCount, a failure no deployment can show. Zero is
// for unit tests that pin one state with Pick.
type ReplicaLag struct {
	// Versions bounds the lag: a read sees the partition as it was at most
	// Versions writes before its latest (at least 1).
	Versions int
	// Pick chooses, for a read that may lag, which of n states it sees:
	// 0 is the oldest allowed, n-1 the latest. Nil picks at random from a
	// source seeded with Seed. Pick is called with the Store's lock held
	// and must not call the Store.
	Pick func(n int) int
	// Seed seeds the random choice when Pick is nil.
	Seed uint64
	// Window bounds the lag in time: a state replaced by a write committed
	// more than Window ago is never served. Zero: no time bound.
	Window time.Duration
}

// lagState is the replica-lag mode's state; s.mu guards it.
type lagState struct {
	cfg  ReplicaLag
	rng  *rand.Rand
	log  map[string][]uint64             // partition -> the LSNs of the states after its last Versions+1 writes (0: before the first), oldest first
	at   map[string][]time.Time          // partition -> when each state of log came to be, in step with log
	docs map[string]map[string][]version // partition -> id -> its last Versions+1 versions, oldest first
}

// version is one state of a document, from the write with LSN from on.
type version struct {
	from      uint64
	body      []byte
	etag      string
	expiresAt time.Time
}

// SetReplicaLag turns the replica-lag mode on (see ReplicaLag): from then
// on, the reads of a Session (see NewSession) without the session token of
// the latest write to the partition may return an older state. The Store's
// own ReadDocument, Get and Items always return the latest state, as a read
// with the latest session token does. The mode keeps up to Versions+1
// versions of every document written after it was turned on. It is safe
// for concurrent use, but meant to be called before the store is used.
func (s *Store) SetReplicaLag(l ReplicaLag) {
	if l.Versions < 1 {
		l.Versions = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lag = &lagState{cfg: l, rng: rand.New(rand.NewPCG(l.Seed, l.Seed^0x9e3779b97f4a7c15)),
		log: make(map[string][]uint64), at: make(map[string][]time.Time), docs: make(map[string]map[string][]version)}
}

// recordVersion keeps it, just written, in the lag mode's history. s.mu
// must be held.
func (s *Store) recordVersion(it *Item) {
	l := s.lag
	if l == nil {
		return
	}
	keep := l.cfg.Versions + 1
	part := l.docs[it.PartitionKey]
	if part == nil {
		part = make(map[string][]version)
		l.docs[it.PartitionKey] = part
	}
	v := version{from: it.lsn, body: it.Body, etag: it.ETag, expiresAt: it.ExpiresAt}
	part[it.ID] = trimTo(append(part[it.ID], v), keep)
}

// commitLag records, in the lag mode, the end of one write of partition pk
// (a whole batch is one): a state a replica may serve. A partition's first
// write also records the state before it, with no document (LSN 0). s.mu
// must be held.
func (s *Store) commitLag(pk string) {
	l := s.lag
	if l == nil {
		return
	}
	log, at := l.log[pk], l.at[pk]
	if len(log) == 0 {
		log, at = append(log, 0), append(at, time.Time{})
	}
	l.log[pk] = trimTo(append(log, s.etag), l.cfg.Versions+1)
	l.at[pk] = trimTo(append(at, s.now()), l.cfg.Versions+1)
}

// forgetIdleLag drops the lag mode's state of every partition that holds
// no document and whose last write every replica has applied (committed
// more than Window ago): a read of it can only see the latest state, which
// has no document, so the state says nothing. Without a Window a replica
// may lag for ever, and the state stays. s.mu must be held.
func (s *Store) forgetIdleLag(now time.Time) {
	l := s.lag
	if l == nil || l.cfg.Window <= 0 {
		return
	}
	for pk, at := range l.at {
		if _, live := s.parts[pk]; live || len(at) == 0 || now.Sub(at[len(at)-1]) < l.cfg.Window {
			continue
		}
		delete(l.log, pk)
		delete(l.at, pk)
		delete(l.docs, pk)
	}
}

// forgetVersions drops the history of pk/id, deleted. s.mu must be held.
func (s *Store) forgetVersions(pk, id string) {
	if s.lag != nil {
		delete(s.lag.docs[pk], id)
	}
}

func trimTo[T any](s []T, n int) []T {
	if len(s) > n {
		return append(s[:0:0], s[len(s)-n:]...)
	}
	return s
}

// readAt reads pk/id for a read that carries session token token (the LSN
// of the latest write of pk it must see; 0 for none). It returns the state
// served and the session token of the response: the LSN of the partition's
// write the state is as of (0 when the partition has no write). Without the
// lag mode, or with a token at or past the partition's latest write, it is
// the latest state.
func (s *Store) readAt(ctx context.Context, pk, id string, token uint64) (Item, uint64, error) {
	if err := ctx.Err(); err != nil {
		return Item{}, 0, err
	}
	if p := checkID(id); p != nil {
		return Item{}, 0, &StatusError{Op: opReadDocument, PartitionKey: pk, ID: id, Index: -1, StatusCode: p.status, Reason: p.reason}
	}
	if err := s.failure(OpRead, opReadDocument, pk, id); err != nil {
		return Item{}, 0, err
	}
	notFound := &StatusError{Op: opReadDocument, PartitionKey: pk, ID: id, Index: -1, StatusCode: http.StatusNotFound, Reason: "no such document"}
	s.mu.Lock()
	defer s.mu.Unlock()
	var latest uint64
	var log []uint64
	if s.lag != nil {
		log = s.lag.log[pk]
	}
	if len(log) > 0 {
		latest = log[len(log)-1]
	}
	if s.lag == nil || token >= latest || len(log) == 0 {
		it, ok := s.live(pk, id)
		if !ok {
			return Item{}, max(token, latest), notFound
		}
		c := *it
		c.Body = append([]byte(nil), it.Body...)
		return c, max(token, latest), nil
	}
	// The states a replica may serve: after one of the partition's last
	// writes, none older than the token, and none replaced by a write that
	// every replica has applied by now (committed more than Window ago).
	var states []uint64
	times, now := s.lag.at[pk], s.now()
	for k, lsn := range log {
		replaced := k+1 < len(log) && s.lag.cfg.Window > 0 && now.Sub(times[k+1]) >= s.lag.cfg.Window
		if lsn >= token && !replaced {
			states = append(states, lsn)
		}
	}
	var i int
	if pick := s.lag.cfg.Pick; pick != nil {
		i = min(max(pick(len(states)), 0), len(states)-1)
	} else {
		i = s.lag.rng.IntN(len(states))
	}
	at := states[i]
	if at == latest {
		it, ok := s.live(pk, id)
		if !ok {
			return Item{}, at, notFound
		}
		c := *it
		c.Body = append([]byte(nil), it.Body...)
		return c, at, nil
	}
	var found *version
	for k, v := range s.lag.docs[pk][id] {
		if v.from <= at {
			found = &s.lag.docs[pk][id][k]
		}
	}
	if found == nil || !found.expiresAt.IsZero() && !s.now().Before(found.expiresAt) {
		return Item{}, at, notFound
	}
	return Item{PartitionKey: pk, ID: id, Body: append([]byte(nil), found.body...), ETag: found.etag, ExpiresAt: found.expiresAt}, at, nil
}

// latestLSN returns the LSN of the latest write of partition pk that the
// lag mode recorded, 0 for none.
func (s *Store) latestLSN(pk string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lag == nil {
		return 0
	}
	log := s.lag.log[pk]
	if len(log) == 0 {
		return 0
	}
	return log[len(log)-1]
}

// Session is a client of a Store that reads as one Cosmos DB session does
// (see ReplicaLag): it keeps, per partition, the session token of the
// responses it got and sends it on its reads. It learns the token of every
// write it makes and of every read (the state the read saw); a refused write
// (409, 412) teaches it nothing, the conservative reading of Cosmos DB,
// which documents the token on successful responses. So after a 409, its
// reads of a partition that another session wrote may lag, until one of its
// reads sees the newer state. Without the Store's lag mode a Session reads
// as the Store does.
//
// A Session is safe for concurrent use; a read sends the token it had when
// the read began. It implements idempotent.DocumentStore and
// idempotent.Patcher.
type Session struct {
	s      *Store
	mu     sync.Mutex
	tokens map[string]uint64 // partition -> session token (an LSN)
}

var (
	_ idempotent.DocumentStore = (*Session)(nil)
	_ idempotent.Patcher       = (*Session)(nil)
)

// NewSession returns a new session of s with no session token.
func (s *Store) NewSession() *Session {
	return &Session{s: s, tokens: make(map[string]uint64)}
}

func (c *Session) token(pk string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens[pk]
}

func (c *Session) learn(pk string, token uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens[pk] = max(c.tokens[pk], token)
}

// learnWrite learns the token of a write to pk that succeeded: the latest
// LSN of the partition right after it, which includes the write.
func (c *Session) learnWrite(pk string, err error) {
	if err == nil {
		c.learn(pk, c.s.latestLSN(pk))
	}
}

// ReadDocument implements idempotent.DocumentStore: it reads with the
// session's token for pk, so it may lag in the Store's lag mode.
func (c *Session) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	it, tok, err := c.s.readAt(ctx, pk, id, c.token(pk))
	c.learn(pk, tok)
	if err != nil {
		return nil, "", err
	}
	return it.Body, it.ETag, nil
}

// CreateBatch implements idempotent.Store (see Store.CreateBatch).
func (c *Session) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	etags, err := c.s.CreateBatch(ctx, pk, docs)
	c.learnWrite(pk, err)
	return etags, err
}

// ReplaceDocument implements idempotent.DocumentStore (see
// Store.ReplaceDocument).
func (c *Session) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	etag, err := c.s.ReplaceDocument(ctx, pk, d, ifMatch)
	c.learnWrite(pk, err)
	return etag, err
}

// PatchDocument implements idempotent.Patcher (see Store.PatchDocument).
func (c *Session) PatchDocument(ctx context.Context, pk, id string, p idempotent.Patch) (string, error) {
	etag, err := c.s.PatchDocument(ctx, pk, id, p)
	c.learnWrite(pk, err)
	return etag, err
}

// String describes the session's tokens, for test failures.
func (c *Session) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("memstore session %v", c.tokens)
}
