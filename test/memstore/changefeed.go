package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ChangeFeedOptions configures a ChangeFeed.
type ChangeFeedOptions struct {
	// Ranges is the number of feed ranges the partition key space is split
	// into; 0 means 1. Cosmos DB has one per physical partition.
	Ranges int
	// Seed drives the interleaving of partition keys within a page.
	Seed uint64
}

// DefaultChangeFeedPageSize is the page size of ReadChanges when maxItems is
// not positive, as Cosmos DB's default of 100 items.
const DefaultChangeFeedPageSize = 100

// ChangeFeed is a model of the Cosmos DB change feed of a Store in latest
// version mode, with the interface relay.ChangeFeed names. Make one with
// (*Store).ChangeFeed. It is safe for concurrent use.
//
// # What it keeps of Cosmos DB
//
// Every write of the store (create, replace) is a change with a sequence
// number, as a write is a log sequence number (_lsn) in Cosmos DB. The
// partition key space is split into feed ranges by a hash of the partition
// key value, so one partition key value always belongs to one range, as to
// one physical partition. A read of a range returns, after its continuation,
// the documents whose latest write is newer, each once, in its latest
// version: a document written twice between two reads appears once, with its
// second version, at the position of that write; a document written again
// after a read appears again. A page holds at most maxItems documents and
// ends at a sequence number, so the continuation it returns (an opaque
// string naming the range and that number) resumes exactly after it. A page
// with no documents stands for Cosmos DB's 304 Not Modified and returns its
// continuation unchanged. Deletions and time-to-live expiries are not in the
// feed (Cosmos DB's latest version mode has none); a document that expired
// before a read is not returned. Each returned document carries the system
// properties _etag and _lsn, as Cosmos DB's do, so a reader must expect
// fields it did not write.
//
// To answer reads the store keeps a write log of exactly what latest
// version mode can return: each live document once, at its latest write
// (see (*Store).ChangeFeedLen). A document written again leaves its earlier
// place and goes to the end; a deleted or expired document leaves the log
// with the store (expired documents nobody reads again are swept out of
// both once the writes since the last sweep outnumber the documents that
// sweep left). The log therefore costs one pointer per document the store
// holds, however many writes, deletes and expiries came before, and never
// keeps the body of a document the store no longer has.
//
// # What it simplifies, and why that cannot hide a defect
//
// It is stricter than Cosmos DB where Cosmos DB promises little: within a
// page, documents of different partition key values are interleaved in a
// random order (seeded by ChangeFeedOptions.Seed) that keeps only the order
// of each partition key value's changes, which is all Cosmos DB promises;
// Cosmos DB would usually return them in write order within a physical
// partition, and a reader that relies on that order would pass against it
// and fail here. Ranges are fixed for the feed's lifetime: there are no
// splits or merges, which the SDK handles inside its composite continuation
// token (a parent range's token goes on through its children), and which a
// reader must therefore see only as a continuation it stores and passes
// back unchanged; cosmosstore's adapter passes the SDK's token through as
// it is. Changes are visible to the feed as soon as the write returns,
// where Cosmos DB may show them later; a reader cannot tell a late change
// from one not yet made, so nothing can depend on the difference. The write
// log drops only what no read could return: a superseded write, a deleted
// or an expired document is skipped by every read of Cosmos DB's latest
// version mode, and was skipped here before the log was compacted, so a
// read from any continuation (kept for any time) returns the same documents
// in the same order as from a log of every write; a continuation names an
// lsn, not a log entry, so dropping the entry it was taken at cannot move
// it. It never throttles or fails: tests inject failures around it.
type ChangeFeed struct {
	s      *Store
	ranges []feedRange

	mu  sync.Mutex
	rnd *rand.Rand
}

// feedRange is the half-open hash interval [min, max) of a feed range.
type feedRange struct {
	name     string
	min, max uint64
}

// ChangeFeed returns the change feed of s.
func (s *Store) ChangeFeed(o ChangeFeedOptions) *ChangeFeed {
	n := max(o.Ranges, 1)
	f := &ChangeFeed{s: s, rnd: rand.New(rand.NewPCG(o.Seed, 0x5eed))}
	const space = uint64(1) << 32
	for i := 0; i < n; i++ {
		lo, hi := space*uint64(i)/uint64(n), space*uint64(i+1)/uint64(n)
		f.ranges = append(f.ranges, feedRange{name: fmt.Sprintf("%08X-%08X", lo, hi), min: lo, max: hi})
	}
	return f
}

// hashKey is the position of a partition key value in the hash space.
func hashKey(pk string) uint64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(pk))
	return uint64(h.Sum32())
}

// FeedRanges returns the names of the feed's ranges, which together cover
// every partition key value once.
func (f *ChangeFeed) FeedRanges(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]string, len(f.ranges))
	for i, r := range f.ranges {
		out[i] = r.name
	}
	return out, nil
}

// RangeOf returns the feed range that holds partition key value pk.
func (f *ChangeFeed) RangeOf(pk string) string {
	h := hashKey(pk)
	for _, r := range f.ranges {
		if h >= r.min && h < r.max {
			return r.name
		}
	}
	return f.ranges[len(f.ranges)-1].name
}

// ErrUnknownFeedRange is returned for a feed range the feed does not have,
// or a continuation of another range: Cosmos DB's SDK refuses both.
var ErrUnknownFeedRange = errors.New("memstore: unknown feed range or a continuation of another range")

// ReadChanges returns up to maxItems documents of range name changed after
// continuation ("" is the beginning), and the continuation after them (see
// the type's documentation). maxItems of 0 or less means
// DefaultChangeFeedPageSize.
func (f *ChangeFeed) ReadChanges(ctx context.Context, name, continuation string, maxItems int) ([][]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var fr *feedRange
	for i := range f.ranges {
		if f.ranges[i].name == name {
			fr = &f.ranges[i]
		}
	}
	if fr == nil {
		return nil, "", fmt.Errorf("%w: %q", ErrUnknownFeedRange, name)
	}
	var from uint64
	if continuation != "" {
		rn, lsn, ok := strings.Cut(continuation, "@")
		n, err := strconv.ParseUint(lsn, 10, 64)
		if !ok || rn != name || err != nil {
			return nil, "", fmt.Errorf("%w: continuation %q for range %q", ErrUnknownFeedRange, continuation, name)
		}
		from = n
	}
	if maxItems <= 0 {
		maxItems = DefaultChangeFeedPageSize
	}
	type change struct {
		pk   string
		lsn  uint64
		body []byte
	}
	var changes []change
	f.s.mu.Lock()
	// The write log holds every live document once, in the order of its
	// latest write: start past the continuation and take the documents of
	// the range that have not expired (live drops an expired one from the
	// log, so the same index is then the next entry).
	for i := sort.Search(len(f.s.writes), func(i int) bool { return f.s.writes[i].lsn > from }); i < len(f.s.writes) && len(changes) < maxItems; {
		it := f.s.writes[i]
		if h := it.pkHash; h < fr.min || h >= fr.max {
			i++
			continue
		}
		if _, ok := f.s.live(it.PartitionKey, it.ID); !ok {
			if i < len(f.s.writes) && f.s.writes[i] == it {
				i++ // not dropped: never happens while the log is kept right
			}
			continue
		}
		changes = append(changes, change{pk: it.PartitionKey, lsn: it.lsn, body: withSystemProperties(it.Body, it.ETag, it.lsn)})
		i++
	}
	f.s.mu.Unlock()
	next := from
	if len(changes) > 0 {
		next = changes[len(changes)-1].lsn
	}
	// Interleave partition key values at random, keeping each one's order.
	var keys []string
	queues := map[string][][]byte{}
	for _, c := range changes {
		if queues[c.pk] == nil {
			keys = append(keys, c.pk)
		}
		queues[c.pk] = append(queues[c.pk], c.body)
	}
	docs := make([][]byte, 0, len(changes))
	f.mu.Lock()
	for len(keys) > 0 {
		i := f.rnd.IntN(len(keys))
		q := queues[keys[i]]
		docs = append(docs, q[0])
		if len(q) == 1 {
			keys = append(keys[:i], keys[i+1:]...)
		} else {
			queues[keys[i]] = q[1:]
		}
	}
	f.mu.Unlock()
	return docs, name + "@" + strconv.FormatUint(next, 10), nil
}

// unlog removes it from the write log if it is there. s.mu must be held.
func (s *Store) unlog(it *Item) {
	i := sort.Search(len(s.writes), func(i int) bool { return s.writes[i].lsn >= it.lsn })
	if i == len(s.writes) || s.writes[i] != it {
		return
	}
	s.writes = slices.Delete(s.writes, i, i+1)
	if c := cap(s.writes); c > 64 && len(s.writes) < c/4 {
		s.writes = slices.Clone(s.writes) // give back what a mass delete freed
	}
}

// sweepExpired removes every expired document from the store and its write
// log, as a read of each would. write calls it once the writes since the
// last sweep outnumber the entries that sweep left, so that the log (and
// the store) holds at most twice the documents live at the last sweep plus
// one, whatever expires unread, at an amortised constant cost per write.
// s.mu must be held.
func (s *Store) sweepExpired() {
	s.sinceSweep = 0
	now := s.now()
	kept := s.writes[:0]
	for _, it := range s.writes {
		if !it.ExpiresAt.IsZero() && !now.Before(it.ExpiresAt) {
			s.remove(it.PartitionKey, it.ID)
			continue
		}
		kept = append(kept, it)
	}
	clear(s.writes[len(kept):])
	s.writes = kept
	s.swept = len(kept)
	s.forgetIdleLag(now)
}

// withSystemProperties returns body, a JSON object, with Cosmos DB's _etag
// and _lsn added.
func withSystemProperties(body []byte, etag string, lsn uint64) []byte {
	b := strings.TrimRight(string(body), " \t\r\n")
	if !strings.HasSuffix(b, "}") {
		return append([]byte(nil), body...)
	}
	b = strings.TrimSuffix(b, "}")
	sep := ","
	if strings.TrimSpace(b) == "{" {
		sep = ""
	}
	return []byte(b + sep + `"_etag":` + strconv.Quote(`"`+etag+`"`) + `,"_lsn":` + strconv.FormatUint(lsn, 10) + "}")
}

// ChangeFeedLen returns how many entries the store's change-feed write log
// holds. The log keeps what the latest version mode of the change feed can
// return and nothing more: one entry per live document, at its latest write.
// A document's earlier entry leaves the log when it is written again, and a
// deleted or expired document's entry leaves it with the document;
// ChangeFeedLen first drops the documents that have expired, as a read of
// them would. It is meant for tests that bound the store's memory, and is
// safe for concurrent use.
func (s *Store) ChangeFeedLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepExpired()
	return len(s.writes)
}
