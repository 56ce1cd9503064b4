package cosmosstore

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// headerSessionToken is the Cosmos DB header that carries a session token,
// in a response (the token of the state the request saw or made) and in a
// request (the state the replica that serves it must have reached):
// x-ms-session-token, in its canonical form (see headerRequestCharge).
const headerSessionToken = "X-Ms-Session-Token"

// SessionTokenPartitions is how many partition keys a Store remembers a
// session token for (about 125 bytes each, 0.5 MB in all): the
// partitions used most recently. When a partition's entry is evicted, its
// next read is sent without a token and is served at the account's
// consistency alone, which for Session consistency means it may land on a
// replica that has not yet applied this Store's latest writes to that
// partition: a lagging read, as from another process. A caller that never
// acts destructively on one read that finds nothing (it confirms before it
// dead-letters) pays at most a retry for an eviction.
const SessionTokenPartitions = 4096

// sessionTokens keeps, per partition key value, the latest session token
// that a response of the Store's container reported, merged as Cosmos DB's
// SDKs merge them (per partition key range, the highest version and LSN),
// for the SessionTokenPartitions partitions used most recently.
//
// azcosmos v1.5.0 keeps no session of its own: it sends x-ms-session-token
// only when ItemOptions.SessionToken or TransactionalBatchOptions.SessionToken
// is set. Without a token, a read under Session consistency may be served by
// a replica that lags behind a write this process has just made or just
// been refused (a 409 carries the token of the state it conflicted with).
// With the token, the replica serves the read only once it has caught up,
// or answers 404 with sub-status 1002, which the SDK retries and the store
// reports as transient.
//
// It is safe for concurrent use. A read sends the token of every response
// that the Store had received for its partition when the read began;
// responses that arrive during the read are merged for the next one.
//
// The entries live in one slice, linked in LRU order by index, so that a
// partition costs no allocation of its own beyond its strings and the
// collector follows no pointer per entry but theirs.
type sessionTokens struct {
	mu    sync.Mutex
	max   int
	byKey map[string]int32 // partition key -> index in slots
	slots []sessionEntry   // grown up to max; then the least recently used is reused
	lru   lruOrder         // of slots: front used most recently
}

// sessionEntry is the session token kept for one partition key. It keeps
// the partition's first range inline: a partition key lives in one
// partition key range, so its token names one range until a split, and the
// map of further ranges is made only then. An entry is then about
// 125 bytes with its slot, the index, a 44-byte partition key and the
// token, instead of the 450 that a map per entry took (and the 156 of a
// container/list element per entry): half a megabyte at
// SessionTokenPartitions entries instead of 1.9 MB, memory that every
// garbage collection scans (TestSessionTokens_Memory).
type sessionEntry struct {
	pk         string
	id, tok    string            // the first range's id and token (without the range id); tok "": none yet
	more       map[string]string // further ranges: range id -> token; nil until a token names a second range
	prev, next int32             // neighbours in the LRU order; -1: none
}

// token returns the token kept for range id, and whether there is one.
func (e *sessionEntry) token(id string) (string, bool) {
	if e.tok != "" && e.id == id {
		return e.tok, true
	}
	tok, ok := e.more[id]
	return tok, ok
}

// set keeps tok as range id's token.
func (e *sessionEntry) set(id, tok string) {
	switch {
	case e.tok == "" || e.id == id:
		e.id, e.tok = id, tok
	default:
		if e.more == nil {
			e.more = make(map[string]string, 1)
		}
		e.more[id] = tok
	}
}

// lruOrder is a doubly linked list of the indexes of sessionTokens.slots,
// linked through their prev and next.
type lruOrder struct {
	front, back int32 // -1: empty
	n           int
}

// Len returns the number of entries in the order.
func (o *lruOrder) Len() int { return o.n }

func newSessionTokens(max int) *sessionTokens {
	return &sessionTokens{max: max, byKey: make(map[string]int32), lru: lruOrder{front: -1, back: -1}}
}

// unlink takes slot i out of the LRU order.
func (t *sessionTokens) unlink(i int32) {
	e := &t.slots[i]
	if e.prev >= 0 {
		t.slots[e.prev].next = e.next
	} else {
		t.lru.front = e.next
	}
	if e.next >= 0 {
		t.slots[e.next].prev = e.prev
	} else {
		t.lru.back = e.prev
	}
	e.prev, e.next = -1, -1
	t.lru.n--
}

// pushFront puts slot i, not in the LRU order, at its front.
func (t *sessionTokens) pushFront(i int32) {
	e := &t.slots[i]
	e.prev, e.next = -1, t.lru.front
	if t.lru.front >= 0 {
		t.slots[t.lru.front].prev = i
	} else {
		t.lru.back = i
	}
	t.lru.front = i
	t.lru.n++
}

// touch moves slot i to the front of the LRU order.
func (t *sessionTokens) touch(i int32) {
	if t.lru.front != i {
		t.unlink(i)
		t.pushFront(i)
	}
}

// get returns the session token to send for partition pk, or "" for none.
func (t *sessionTokens) get(pk string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.byKey[pk]
	if !ok {
		return ""
	}
	t.touch(i)
	e := &t.slots[i]
	if e.more == nil { // one range: nothing to sort
		return e.id + ":" + e.tok
	}
	ids := make([]string, 0, 1+len(e.more))
	ids = append(ids, e.id)
	for id := range e.more {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		tok, _ := e.token(id)
		b.WriteString(id)
		b.WriteByte(':')
		b.WriteString(tok)
	}
	return b.String()
}

// observe merges token, a response's x-ms-session-token for partition pk,
// into what is kept for pk. A token that cannot be parsed replaces the
// entry of its range, so that a format this code does not know is still
// sent back as the service gave it.
func (t *sessionTokens) observe(pk, token string) {
	if token == "" || t.max <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.byKey[pk]
	switch {
	case ok:
		t.touch(i)
	case len(t.slots) < t.max:
		i = int32(len(t.slots))
		t.slots = append(t.slots, sessionEntry{pk: pk, prev: -1, next: -1})
		t.byKey[pk] = i
		t.pushFront(i)
	default: // full: the partition used least recently gives up its slot
		i = t.lru.back
		t.unlink(i)
		delete(t.byKey, t.slots[i].pk)
		t.slots[i] = sessionEntry{pk: pk, prev: -1, next: -1}
		t.byKey[pk] = i
		t.pushFront(i)
	}
	e := &t.slots[i]
	for part := range strings.SplitSeq(token, ",") {
		id, tok, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || tok == "" {
			continue
		}
		if old, ok := e.token(id); ok && !newer(tok, old) {
			continue
		}
		e.set(id, tok)
	}
}

// newer reports whether session token tok (of one partition key range,
// without its range id) is at least as recent as old: a simple token is an
// LSN; a vector token is "version#globalLSN#region=LSN…", compared by
// version, then global LSN. Tokens that cannot be parsed count as newer.
func newer(tok, old string) bool {
	v1, l1, ok1 := parseSessionToken(tok)
	v2, l2, ok2 := parseSessionToken(old)
	if !ok1 || !ok2 {
		return true
	}
	if v1 != v2 {
		return v1 > v2
	}
	return l1 >= l2
}

func parseSessionToken(tok string) (version, lsn int64, ok bool) {
	first, rest, vector := strings.Cut(tok, "#")
	if !vector {
		lsn, err := strconv.ParseInt(first, 10, 64)
		return 0, lsn, err == nil
	}
	global, _, _ := strings.Cut(rest, "#")
	version, err1 := strconv.ParseInt(first, 10, 64)
	lsn, err2 := strconv.ParseInt(global, 10, 64)
	return version, lsn, err1 == nil && err2 == nil
}

// sessionTokenOf returns the session token of a response, or of the
// response an *azcore.ResponseError carries.
func sessionTokenOf(resp *http.Response, err error) string {
	var re *azcore.ResponseError
	if resp == nil && errors.As(err, &re) {
		resp = re.RawResponse
	}
	if resp == nil {
		return ""
	}
	return resp.Header.Get(headerSessionToken)
}
