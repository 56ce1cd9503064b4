package e2etest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FeedProxy is a Cosmos DB gateway for tests and the local stack
// (test/e2etest/cmd/feedproxy, which scripts/local.sh starts) that gives
// cosmium, which has no change feed, one: it forwards every request to cosmium unchanged,
// except the change feed reads (a GET of a container's documents with
// A-IM: Incremental Feed) and the read of its partition key ranges, which
// it answers itself, the feed from a log of changes it
// builds incrementally at each change feed read: it reads from cosmium the
// documents written since its previous read (cosmium gives every write a
// new _etag) and logs those whose content changed, keeping the latest
// version of every other.
//
// It learns what was written in two ways. Every write it forwards (a
// create, upsert, replace, patch or delete, alone or in a transactional
// batch) names its documents, which the next read fetches by id: when every
// writer goes through the proxy, as on the local stack, a read costs what
// its page and the writes since the previous read cost, not what the
// container holds. Writes that reach cosmium directly, as in the end-to-end
// tests' workers, only a listing of the ids and ETags of the whole
// container finds: the first read makes one, and so does every read at
// least [FeedProxy.SetRescan]'s interval after the previous listing (by
// default 0: every read). The log is kept in change order, so a page read
// finds its continuation by binary search and visits the page's changes
// (and the versions superseded since, compacted away once they are half
// the log); many new documents (a first read of a full container) are
// fetched by one query instead of one read each. [FeedProxy.Work] counts
// each.
//
// # What it keeps of Cosmos DB, and what it does not
//
// Its change feed is the latest-version mode of one physical partition
// (cosmium reports one partition key range, "0"): each document whose
// content changed since the previous read gets the next log sequence
// number, and a read after an ETag (If-None-Match, as the SDK sends the
// continuation) returns, in log order, the latest version of every document
// changed after it, up to x-ms-max-item-count, with the ETag of the last
// one; 304 Not Modified with the same ETag when nothing changed. Documents
// carry cosmium's system properties and an _lsn. Writes between two reads
// collapse into their latest version, as in Cosmos DB; documents that
// changed between the same two reads get their numbers in the order the
// proxy reads them (by id, or as cosmium lists them), not in their write
// order (Cosmos DB orders one
// partition key value's changes; a reader of this feed must not depend on
// more, and the relay does not). Deletions are not in the feed, as in the
// latest-version mode. The feed is computed from snapshots, not from
// Cosmos DB's log: its latency, paging cost, splits and the service's
// continuation tokens are not exercised (cosmosstore's fake-gateway tests
// cover the SDK's side of those). Leases and checkpoints go to cosmium,
// which ignores If-Match: they are not fenced, so a test runs one relay
// instance at a time.
//
// The account read's answer is rewritten to name the proxy as the
// account's endpoints, so that the SDK sends every request through it.
//
// It is safe for concurrent use.
type FeedProxy struct {
	// Endpoint is the proxy's account endpoint, "http://127.0.0.1:PORT/".
	Endpoint string

	srv      *httptest.Server // nil when the caller serves it
	addr     string           // host:port it is served on
	forward  http.Handler     // to cosmium
	target   *url.URL
	key      string
	db, coll string

	mu       sync.Mutex
	lsn      int64
	versions map[string]string // document key -> body of its latest version
	changed  map[string]int64  // document key -> lsn of its latest change
	log      []logEntry        // every change in lsn order; superseded ones until compacted
	stale    int               // entries of log whose key changed again since
	etags    map[string]string // document id -> the _etag of the version last read
	listedAt time.Time         // of the last listing of the whole container; zero: none yet
	rescan   time.Duration     // see SetRescan
	work     Work

	dirtyMu  sync.Mutex
	dirty    map[string]bool // ids written through the proxy since the last read
	dirtyAll bool            // a write through the proxy named no ids it could read

	holdMu   sync.Mutex
	holdCond func() bool   // nil: nothing armed
	held     chan struct{} // closed when a write is held
	released chan struct{} // closed to let the held write fail
}

// HoldLeaseWrite arms the proxy to hold the first replace of a relay's
// lease document for which cond, called at each such replace, returns
// true: the request is not forwarded, held is closed, and once release is
// called the request fails with 503. A test uses it to SIGKILL a relay
// between the publish of a page and its checkpoint.
func (p *FeedProxy) HoldLeaseWrite(cond func() bool) (held <-chan struct{}, release func()) {
	p.holdMu.Lock()
	defer p.holdMu.Unlock()
	p.holdCond, p.held, p.released = cond, make(chan struct{}), make(chan struct{})
	rel := p.released
	var once sync.Once
	return p.held, func() { once.Do(func() { close(rel) }) }
}

// hold holds r if it is the write HoldLeaseWrite armed for, and reports
// whether it answered r.
func (p *FeedProxy) hold(r *http.Request) bool {
	p.holdMu.Lock()
	cond, held, released := p.holdCond, p.held, p.released
	if cond == nil || !cond() {
		p.holdMu.Unlock()
		return false
	}
	p.holdCond = nil
	p.holdMu.Unlock()
	close(held)
	select {
	case <-released:
	case <-r.Context().Done():
	}
	return true
}

// StartFeedProxy starts a proxy in front of the cosmium at endpoint with
// account key key, serving the change feed of container coll of database
// db. The test's cleanup stops it.
func StartFeedProxy(tb testing.TB, endpoint, key, db, coll string) *FeedProxy {
	tb.Helper()
	p, err := NewFeedProxy(endpoint, key, db, coll)
	if err != nil {
		tb.Fatal(err)
	}
	p.srv = httptest.NewUnstartedServer(p)
	p.SetAddr(p.srv.Listener.Addr().String())
	p.srv.Start()
	tb.Cleanup(p.srv.Close)
	return p
}

// NewFeedProxy returns a proxy in front of the cosmium at endpoint with
// account key key, serving the change feed of container coll of database
// db, as an http.Handler for a server of the caller's (the command
// test/e2etest/cmd/feedproxy serves one on a fixed address). SetAddr must
// name the address it is served on before the first request.
func NewFeedProxy(endpoint, key, db, coll string) (*FeedProxy, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("feed proxy: cosmium endpoint %q: %w", endpoint, err)
	}
	if target.Scheme == "" || target.Host == "" {
		return nil, fmt.Errorf("feed proxy: cosmium endpoint %q is not an absolute URL such as http://127.0.0.1:8081/", endpoint)
	}
	if db == "" || coll == "" {
		return nil, errors.New("feed proxy: the database and the container must be named")
	}
	p := &FeedProxy{target: target, key: key, db: db, coll: coll, versions: make(map[string]string), changed: make(map[string]int64), etags: make(map[string]string),
		dirty: make(map[string]bool)}
	rp := httputil.NewSingleHostReverseProxy(target)
	// The account read names the regional endpoints the SDK sends every
	// later request to: cosmium's own. They must name the proxy.
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodGet || resp.Request.URL.Path != "/" {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		body = bytes.ReplaceAll(body, []byte(target.Host), []byte(p.addr))
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	p.forward = rp
	return p, nil
}

// SetAddr names the host:port the proxy is served on, and so its Endpoint,
// "http://ADDR/".
func (p *FeedProxy) SetAddr(addr string) {
	p.addr = addr
	p.Endpoint = "http://" + addr + "/"
}

// ServeHTTP answers the change feed reads and the read of the partition
// key ranges itself and forwards every other request to cosmium.
func (p *FeedProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	feedPath := "/dbs/" + p.db + "/colls/" + p.coll + "/docs"
	if r.Method == http.MethodGet && r.URL.Path == feedPath && r.Header.Get("A-IM") != "" {
		p.serveFeed(w, r)
		return
	}
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, feedPath+"/lease:") && p.hold(r) {
		http.Error(w, `{"code":"ServiceUnavailable","message":"held by the test"}`, http.StatusServiceUnavailable)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/dbs/"+p.db+"/colls/"+p.coll+"/pkranges" {
		p.servePartitionKeyRanges(w, r)
		return
	}
	body, err := bufferBody(r)
	if err != nil {
		http.Error(w, `{"code":"BadRequest","message":`+strconv.Quote("read the request body: "+err.Error())+`}`, http.StatusBadRequest)
		return
	}
	p.forward.ServeHTTP(w, r)
	// After the answer, so that the write is in cosmium when a read
	// fetches what it names.
	if r.URL.Path == feedPath || strings.HasPrefix(r.URL.Path, feedPath+"/") {
		p.noteWrite(r, strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, feedPath), "/"), body)
	}
}

// noteWrite records the ids of the documents that r, a request on the
// container's documents (docID: the document of its path, if any) with the
// body body, may have written, for the next change feed read to fetch; a
// write whose ids it cannot tell makes that read list the container.
func (p *FeedProxy) noteWrite(r *http.Request, docID string, body []byte) {
	var ids []string
	all := false
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return
	case r.Method == http.MethodPost && docID == "" && (strings.EqualFold(r.Header.Get("x-ms-documentdb-isquery"), "true") ||
		strings.HasPrefix(r.Header.Get("Content-Type"), "application/query+json")):
		return // a query
	case docID != "": // a replace, patch or delete of the document of the path (decoded by net/http)
		ids = []string{docID}
	case strings.EqualFold(r.Header.Get("x-ms-cosmos-is-batch-request"), "true"):
		var ops []struct {
			ID           string `json:"id"`
			ResourceBody struct {
				ID string `json:"id"`
			} `json:"resourceBody"`
		}
		all = json.Unmarshal(body, &ops) != nil
		for _, op := range ops {
			ids = append(ids, cmp.Or(op.ID, op.ResourceBody.ID))
		}
	default: // a create or an upsert
		var doc struct {
			ID string `json:"id"`
		}
		all = json.Unmarshal(body, &doc) != nil
		ids = append(ids, doc.ID)
	}
	p.dirtyMu.Lock()
	defer p.dirtyMu.Unlock()
	for _, id := range ids {
		if id == "" {
			all = true
			continue
		}
		p.dirty[id] = true
	}
	p.dirtyAll = p.dirtyAll || all
}

// bufferBody reads r's body into memory and returns it, so that forwarding
// r reads a copy and never the connection's. net/http's transport, once it has sent a
// body of known length, reads once more to check that nothing is left;
// cosmium may have answered by then, and once the reverse proxy writes
// that answer's header, the server closes the incoming body (so that the
// connection can serve the next request). That last read then fails, the
// transport takes it for a failed write and closes its connection to
// cosmium in the middle of the answer's body, and the client gets a cut
// response: the SDK retried the query or batch, and under -race reported
// a data race in azcore's rewind of the retried body. Cosmos DB request
// bodies are at most 2 MB.
func bufferBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	return b, nil
}

// logEntry is a change of the log: the lsn it got and its document's key.
type logEntry struct {
	lsn int64
	key string
}

// Work counts what the proxy did to answer the change feed reads.
type Work struct {
	Reads    int // change feed reads answered
	Modified int // of them, with documents
	// Listings counts the listings of the ids and ETags of the whole
	// container: the first read's, and then one per SetRescan interval
	// (with 0, one per read); Listed the documents they returned in all.
	Listings, Listed int
	// Fetched counts the documents read from cosmium in full: those a
	// write through the proxy named or a listing found changed, each by
	// id, or, when a listing finds more than bulkFetch, every document by
	// one query.
	Fetched int
	// Scanned counts the entries of the change log the page reads
	// visited: each change returned, and each superseded version passed
	// over.
	Scanned int
}

// bulkFetch is the most new documents a change feed read fetches by id;
// more are fetched by one query.
const bulkFetch = 100

// Work returns what the proxy did so far.
func (p *FeedProxy) Work() Work {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.work
}

// SetRescan sets how long a listing of the whole container serves: a change
// feed read at least d after the previous listing makes another, to find
// the writes that did not go through the proxy; 0, the default, lists at
// every read. Set it longer when every writer goes through the proxy.
func (p *FeedProxy) SetRescan(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rescan = d
}

// Reads returns how many change feed reads the proxy answered, and how
// many of them returned documents.
func (p *FeedProxy) Reads() (reads, modified int) {
	w := p.Work()
	return w.Reads, w.Modified
}

// CosmiumReads returns how many times the proxy listed the ids and ETags of
// the whole container and how many documents it read from cosmium in full,
// in all.
func (p *FeedProxy) CosmiumReads() (listings, documents int) {
	w := p.Work()
	return w.Listings, w.Fetched
}

// Documents returns every document of the container, as cosmium lists
// them.
func (p *FeedProxy) Documents(ctx context.Context) ([]json.RawMessage, error) {
	return p.list(ctx, "")
}

// query returns the result of the query q on the container.
func (p *FeedProxy) query(ctx context.Context, q string) ([]json.RawMessage, error) {
	return p.list(ctx, q)
}

// list lists the container's documents (q == "") or runs the query q on
// it.
func (p *FeedProxy) list(ctx context.Context, q string) ([]json.RawMessage, error) {
	link := "dbs/" + p.db + "/colls/" + p.coll
	method, reqBody := http.MethodGet, io.Reader(nil)
	if q != "" {
		b, err := json.Marshal(map[string]string{"query": q})
		if err != nil {
			return nil, err
		}
		method, reqBody = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.target.JoinPath(link, "docs").String(), reqBody)
	if err != nil {
		return nil, err
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2018-12-31")
	req.Header.Set("Authorization", authorization(method, "docs", link, date, p.key))
	if q != "" {
		req.Header.Set("Content-Type", "application/query+json")
		req.Header.Set("x-ms-documentdb-isquery", "True")
		req.Header.Set("x-ms-documentdb-query-enablecrosspartition", "True")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cosmium listed the documents with %s: %s", resp.Status, body)
	}
	var list struct {
		Documents []json.RawMessage `json:"Documents"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	return list.Documents, nil
}

// authorization is the master-key Authorization header of a request
// (Cosmos DB's REST API, "Access control on Cosmos DB resources").
func authorization(verb, resourceType, resourceLink, date, key string) string {
	k, _ := base64.StdEncoding.DecodeString(key)
	mac := hmac.New(sha256.New, k)
	fmt.Fprintf(mac, "%s\n%s\n%s\n%s\n\n", strings.ToLower(verb), strings.ToLower(resourceType), resourceLink, strings.ToLower(date))
	return url.QueryEscape("type=master&ver=1.0&sig=" + base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}

// refresh reads from cosmium the documents written since the previous
// read: those the writes through the proxy named, or, at the first read,
// after the rescan interval or after a write whose ids it could not read, those whose
// ETag a listing of the whole container shows it has not seen. It logs
// those whose content changed. Cosmium keys documents by id alone, so a
// document read by id is the one listed. p.mu is held.
func (p *FeedProxy) refresh(ctx context.Context) error {
	// Taken before the listing or the reads: a write answered from now on
	// stays for the next read.
	p.dirtyMu.Lock()
	named, all := p.dirty, p.dirtyAll
	p.dirty, p.dirtyAll = make(map[string]bool), false
	p.dirtyMu.Unlock()
	now := time.Now()
	var ids []string
	listing := all || p.listedAt.IsZero() || now.Sub(p.listedAt) >= p.rescan
	if listing {
		heads, err := p.query(ctx, "SELECT c.id, c._etag FROM c")
		if err != nil {
			p.forget(named, all)
			return err
		}
		p.listedAt = now
		p.work.Listings++
		p.work.Listed += len(heads)
		for _, h := range heads {
			var head struct {
				ID   string `json:"id"`
				ETag string `json:"_etag"`
			}
			if err := json.Unmarshal(h, &head); err != nil {
				p.forget(named, true)
				return fmt.Errorf("cosmium listing %s: %w", h, err)
			}
			if p.etags[head.ID] != head.ETag {
				ids = append(ids, head.ID)
			}
		}
	} else {
		ids = slices.Sorted(maps.Keys(named))
	}
	var docs []json.RawMessage
	if listing && len(ids) > bulkFetch {
		// Many found by a listing (a first read): one query, which
		// cosmium answers by a scan of the container, instead of a
		// request per document.
		var err error
		if docs, err = p.query(ctx, "SELECT * FROM c"); err != nil {
			p.forget(named, true)
			return err
		}
	} else {
		for _, id := range ids {
			d, err := p.read(ctx, id)
			if errors.Is(err, errNoDocument) {
				continue // deleted: deletions are not in the feed
			}
			if err != nil {
				p.forget(named, all)
				return err
			}
			docs = append(docs, d)
		}
	}
	p.work.Fetched += len(docs)
	for _, d := range docs {
		var head struct {
			ID      string `json:"id"`
			OrderID string `json:"orderId"`
			ETag    string `json:"_etag"`
		}
		if err := json.Unmarshal(d, &head); err != nil {
			return fmt.Errorf("cosmium document %s: %w", d, err)
		}
		if p.etags[head.ID] == head.ETag {
			continue // unchanged since it was read last
		}
		p.etags[head.ID] = head.ETag
		key := head.OrderID + "\x00" + head.ID
		if p.versions[key] == string(d) {
			continue
		}
		p.append(key, string(d))
	}
	return nil
}

// forget puts back what a failed refresh took of the writes named through
// the proxy, for the next read.
func (p *FeedProxy) forget(named map[string]bool, all bool) {
	p.dirtyMu.Lock()
	defer p.dirtyMu.Unlock()
	for id := range named {
		p.dirty[id] = true
	}
	p.dirtyAll = p.dirtyAll || all
}

// append logs a new version of the document key. p.mu is held.
func (p *FeedProxy) append(key, body string) {
	if _, ok := p.changed[key]; ok {
		p.stale++ // its earlier entry is superseded
	}
	p.lsn++
	p.versions[key], p.changed[key] = body, p.lsn
	p.log = append(p.log, logEntry{p.lsn, key})
	if p.stale > len(p.log)/2 {
		p.log = slices.DeleteFunc(p.log, func(e logEntry) bool { return p.changed[e.key] != e.lsn })
		p.stale = 0
	}
}

// errNoDocument reports a document that cosmium does not hold.
var errNoDocument = errors.New("no such document")

// read reads the document id from cosmium.
func (p *FeedProxy) read(ctx context.Context, id string) (json.RawMessage, error) {
	link := "dbs/" + p.db + "/colls/" + p.coll + "/docs/" + id
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.target.JoinPath("dbs", p.db, "colls", p.coll, "docs", id).String(), nil)
	if err != nil {
		return nil, err
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", "2018-12-31")
	req.Header.Set("Authorization", authorization(http.MethodGet, "docs", link, date, p.key))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusNotFound:
		return nil, errNoDocument
	}
	return nil, fmt.Errorf("cosmium read document %s with %s: %s", id, resp.Status, body)
}

// servePartitionKeyRanges answers the read of the container's partition
// key ranges with cosmium's one range, "0" over the whole hash space: cosmium
// serves it too, but checks the SDK's signature of this read (made with
// A-IM: Incremental Feed) against another resource id and answers 401.
func (p *FeedProxy) servePartitionKeyRanges(w http.ResponseWriter, r *http.Request) {
	const etag = `"pkranges-1"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-ms-item-count", "1")
	fmt.Fprintf(w, `{"_rid":%q,"PartitionKeyRanges":[{"id":"0","_rid":%q,"minInclusive":"","maxExclusive":"FF","ridPrefix":0,"throughputFraction":1,"status":"online","parents":[]}],"_count":1}`,
		p.coll, p.coll+"-pkrange-0")
}

// serveFeed answers a change feed read.
func (p *FeedProxy) serveFeed(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rg := r.Header.Get("x-ms-documentdb-partitionkeyrangeid"); rg != "" && rg != "0" {
		http.Error(w, `{"code":"Gone","message":"no such partition key range"}`, http.StatusGone)
		return
	}
	if err := p.refresh(r.Context()); err != nil {
		http.Error(w, `{"code":"ServiceUnavailable","message":`+strconv.Quote(err.Error())+`}`, http.StatusServiceUnavailable)
		return
	}
	from := int64(0)
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm != "*" {
		n, err := strconv.ParseInt(strings.Trim(inm, `"`), 10, 64)
		if err != nil {
			http.Error(w, `{"code":"BadRequest","message":"If-None-Match is not an ETag of this feed"}`, http.StatusBadRequest)
			return
		}
		from = n
	}
	maxItems := 100
	if n, err := strconv.Atoi(r.Header.Get("x-ms-max-item-count")); err == nil && n > 0 {
		maxItems = n
	}
	type change struct {
		lsn  int64
		body string
	}
	var page []change
	i, _ := slices.BinarySearchFunc(p.log, from+1, func(e logEntry, lsn int64) int { return cmp.Compare(e.lsn, lsn) })
	for ; i < len(p.log) && len(page) < maxItems; i++ {
		e := p.log[i]
		p.work.Scanned++
		if p.changed[e.key] == e.lsn { // else superseded by a later entry
			page = append(page, change{e.lsn, p.versions[e.key]})
		}
	}
	p.work.Reads++
	if len(page) == 0 {
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, from))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	p.work.Modified++
	var b bytes.Buffer
	b.WriteString(`{"_rid":"` + p.coll + `","Documents":[`)
	for i, c := range page {
		if i > 0 {
			b.WriteByte(',')
		}
		// The document with its _lsn, as Cosmos DB's feed carries it.
		body := strings.TrimSpace(c.body)
		b.WriteString(strings.TrimSuffix(body, "}"))
		fmt.Fprintf(&b, `,"_lsn":%d}`, c.lsn)
	}
	fmt.Fprintf(&b, `],"_count":%d}`, len(page))
	w.Header().Set("ETag", fmt.Sprintf(`"%d"`, page[len(page)-1].lsn))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-ms-item-count", strconv.Itoa(len(page)))
	_, _ = w.Write(b.Bytes())
}
