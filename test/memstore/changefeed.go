package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
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
// from one not yet made, so nothing can depend on the difference. It never
// throttles or fails: tests inject failures around it.
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
	// The write log is in lsn order: start past the continuation, and keep
	// each document's latest write only (an earlier write of a document
	// written again is superseded), if it is in the range and still there.
	log := f.s.writes
	for i := sort.Search(len(log), func(i int) bool { return log[i].lsn > from }); i < len(log) && len(changes) < maxItems; i++ {
		w := log[i]
		if w.lsn != w.it.lsn {
			continue
		}
		pk := w.it.PartitionKey
		if h := w.it.pkHash; h < fr.min || h >= fr.max {
			continue
		}
		if it, ok := f.s.live(pk, w.it.ID); ok && it == w.it {
			changes = append(changes, change{pk: pk, lsn: it.lsn, body: withSystemProperties(it.Body, it.ETag, it.lsn)})
		}
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

// loggedWrite is one entry of the store's write log: the item written and
// the lsn that write gave it.
type loggedWrite struct {
	lsn uint64
	it  *Item
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
