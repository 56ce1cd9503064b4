package audit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// The invariants' names, in the order a Report lists them.
const (
	OrderEvent    = "order-event"
	EventOrder    = "event-order"
	Payment       = "payment"
	PaymentLedger = "payment-ledger"
	PaymentClaim  = "payment-claim"
	Status        = "status"
	Inbox         = "inbox"
	MarkerTTL     = "marker-ttl"
	RelayLag      = "relay-lag"
	RelayLease    = "relay-lease"
)

// Names returns the invariants' names in report order.
func Names() []string {
	return []string{OrderEvent, EventOrder, Payment, PaymentLedger, PaymentClaim, Status, Inbox, MarkerTTL, RelayLag, RelayLease}
}

// Feed is the change feed of the orders container in latest version mode,
// with the methods of relay.ChangeFeed (which cosmosstore.ChangeFeed and
// memstore.ChangeFeed implement): the package does not import relay, which
// links the Service Bus SDK.
type Feed interface {
	// FeedRanges returns the container's feed ranges, which together
	// cover every partition key value once.
	FeedRanges(ctx context.Context) ([]string, error)
	// ReadChanges returns up to maxItems documents of feedRange changed
	// after continuation ("" is the beginning of the feed), each in its
	// latest version, and the continuation that follows them; no
	// documents: nothing changed since continuation.
	ReadChanges(ctx context.Context, feedRange, continuation string, maxItems int) (docs [][]byte, next string, err error)
}

// Container reads one container: a document by id and partition key value,
// and every document of one partition key value. cosmosstore.Store and
// memstore.Store implement it.
type Container interface {
	idempotent.Reader
	// ReadPartition returns every document whose partition key value is pk
	// (none: an empty slice), each a JSON object.
	ReadPartition(ctx context.Context, pk string) ([][]byte, error)
}

// Consumer is an inbox consumer of the OrderAccepted events (a topic
// subscription and the worker in inbox mode that drains it).
type Consumer struct {
	Name string // its name, which its markers and entries carry (order.InboxConsumer.Name)
	// Store is the container of its markers and entries (in Azure its own;
	// on emulators the orders container).
	Store Container
	// Since is when its subscription was created: events that occurred
	// before it are not required to have its marker. Zero: always.
	Since time.Time
	// MarkerTTL is its markers' time to live (order.UnboundedRetention for
	// never): an event older than it may have lost its marker.
	MarkerTTL time.Duration
}

// Config is what Run audits and how.
type Config struct {
	Orders Container // the orders container; required
	Feed   Feed      // its change feed; required
	// Leases is where the relays' lease documents live; nil: Orders.
	Leases idempotent.Reader
	// Relays names the relays (relay.Options.Name) whose leases are
	// checked; none: relay-lag and relay-lease are not checked.
	Relays []string
	// MaxRelayLag is how old the oldest event after a lease's checkpoint
	// may be. Zero means DefaultMaxRelayLag.
	MaxRelayLag time.Duration
	// Consumers are the inbox consumers; none: inbox and marker-ttl are not
	// checked.
	Consumers []Consumer
	// MinMarkerRetention is the shortest marker ttl allowed (the redelivery
	// horizon's order.RedeliveryHorizon.MinRetention); zero: not checked.
	MinMarkerRetention time.Duration
	// ClaimHorizon is the redelivery horizon: a payment claim in progress
	// for longer cannot be completed by any copy of its message. Zero
	// means no claim is too old.
	ClaimHorizon time.Duration
	// Payments says the workers capture payments: an order with a total
	// older than ClaimHorizon must have a completed payment record.
	Payments bool
	// Ledger, when not nil, is the payments service's lookup by order
	// reference (payments.Gateway): payment-ledger is checked with it.
	Ledger order.PaymentLookup
	// Settle is how old an event must be before its consumers' markers are
	// required. Zero means DefaultSettle.
	Settle time.Duration
	// ClockSkew is how far an inbox consumer's clock, which stamps its
	// markers and entries, may differ from the store's, which expires the
	// markers: a marker is taken as certainly stored until its
	// Consumer.MarkerTTL less ClockSkew has passed, and as possibly expired
	// by design after. Zero means DefaultClockSkew; negative means none
	// (the consumers and the store share one clock, as in a simulation).
	ClockSkew time.Duration
	// PageSize is the number of documents per change feed page. Zero means
	// DefaultPageSize.
	PageSize int
	// MaxPages, when positive, stops Run after that many pages with a
	// continuation.
	MaxPages int
	// MaxIDs bounds the violation ids a Result keeps. Zero means
	// DefaultMaxIDs.
	MaxIDs int
	// Progress, when not nil, is called after every page of the feed with
	// how far the scan has come, from Run's goroutine: it must return
	// quickly (print, or hand over).
	Progress func(Progress)
	// Now is the clock ages are measured on; nil means time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultMaxRelayLag = 5 * time.Minute
	DefaultSettle      = time.Hour
	DefaultPageSize    = 100
	DefaultMaxIDs      = 20
	DefaultClockSkew   = idempotent.ClockSkew
)

// Violation is one breach of an invariant.
type Violation struct {
	ID     string `json:"id"`     // the document (or lease) at fault: an order id, an event id, a lease id
	Detail string `json:"detail"` // what is wrong
}

// Result is what Run found for one invariant.
type Result struct {
	Name       string      `json:"name"`
	Checked    int         `json:"checked"`    // how many things it checked
	Violations int         `json:"violations"` // how many of them broke it
	First      []Violation `json:"first"`      // the first Config.MaxIDs violations
	// NotChecked, when not empty, says why the invariant was not checked
	// (Checked is then 0).
	NotChecked string `json:"notChecked,omitempty"`
}

// Progress is how far a Run's scan has come, as Config.Progress receives
// it after every page.
type Progress struct {
	Documents int           // documents read from the feed so far
	Pages     int           // pages read so far
	Orders    int           // order documents checked so far
	Range     int           // the feed range being read, from 1
	Ranges    int           // the feed ranges to read (the total documents are not known ahead)
	Elapsed   time.Duration // since Run began, on the monotonic clock (not Config.Now)
}

// OrdersPerSecond is p's rate: Orders over Elapsed; 0 before any time passed.
func (p Progress) OrdersPerSecond() float64 { return rate(p.Orders, p.Elapsed) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Report is the result of Run.
type Report struct {
	Invariants []Result `json:"invariants"`
	Documents  int      `json:"documents"` // documents read from the feed
	Pages      int      `json:"pages"`
	Orders     int      `json:"orders"` // order documents checked
	// Seconds is how long Run took, in wall time (the monotonic clock, not
	// Config.Now), and OrdersPerSecond its rate: Orders over Seconds.
	Seconds         float64 `json:"seconds"`
	OrdersPerSecond float64 `json:"ordersPerSecond"`
	// Continuation, when not empty, is where the scan stopped: pass it to
	// Run to go on. Empty: the scan completed.
	Continuation string `json:"continuation,omitempty"`
}

// Violations returns the number of violations of every invariant.
func (r *Report) Violations() int {
	n := 0
	for _, res := range r.Invariants {
		n += res.Violations
	}
	return n
}

// Result returns the result of the invariant name.
func (r *Report) Result(name string) *Result {
	for i := range r.Invariants {
		if r.Invariants[i].Name == name {
			return &r.Invariants[i]
		}
	}
	return nil
}

// position is the decoded continuation: the feed ranges as the scan began,
// the one it is in and the feed's continuation within it.
type position struct {
	Ranges []string `json:"r"`
	Index  int      `json:"i"`
	Token  string   `json:"c,omitempty"`
}

func (p position) encode() string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePosition(s string) (position, error) {
	var p position
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || len(p.Ranges) == 0 || p.Index < 0 || p.Index > len(p.Ranges) {
		return position{}, fmt.Errorf("audit: continuation %.40q is not one this audit printed", s)
	}
	return p, nil
}

// ErrConfig is matched by the errors of a Config Run cannot work with.
var ErrConfig = errors.New("audit: invalid configuration")

func (c *Config) withDefaults() Config {
	o := *c
	if o.MaxRelayLag == 0 {
		o.MaxRelayLag = DefaultMaxRelayLag
	}
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
	switch {
	case o.ClockSkew == 0:
		o.ClockSkew = DefaultClockSkew
	case o.ClockSkew < 0:
		o.ClockSkew = 0
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.MaxIDs <= 0 {
		o.MaxIDs = DefaultMaxIDs
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Leases == nil {
		o.Leases = o.Orders
	}
	return o
}

// Run audits the store cfg describes, from continuation ("" is the
// beginning), and returns the report. When ctx ends, or a read fails,
// during the scan it returns the report so far with the continuation of
// the last page it completed, and the error; a Run given that
// continuation checks the rest.
func Run(ctx context.Context, cfg Config, continuation string) (*Report, error) {
	if cfg.Orders == nil || cfg.Feed == nil {
		return nil, fmt.Errorf("%w: the orders container and its change feed are required", ErrConfig)
	}
	for _, c := range cfg.Consumers {
		if c.Name == "" || c.Store == nil {
			return nil, fmt.Errorf("%w: inbox consumer %q needs a name and a container", ErrConfig, c.Name)
		}
	}
	a := &auditor{cfg: cfg.withDefaults(), results: map[string]*Result{}, began: time.Now()}
	a.now = a.cfg.Now().UTC()
	rep := &Report{}
	a.rep = rep
	for _, n := range Names() {
		a.results[n] = &Result{Name: n}
	}
	switch {
	case a.cfg.Ledger == nil:
		a.results[PaymentLedger].NotChecked = "no payments service configured (its lookup by order reference is the ledger)"
	}
	if len(a.cfg.Consumers) == 0 {
		a.results[Inbox].NotChecked = "no inbox consumers configured"
		a.results[MarkerTTL].NotChecked = "no inbox consumers configured"
	}
	if len(a.cfg.Relays) == 0 {
		a.results[RelayLag].NotChecked = "no relays configured"
		a.results[RelayLease].NotChecked = "no relays configured"
	}
	err := a.scan(ctx, rep, continuation)
	if err == nil && rep.Continuation == "" && len(a.cfg.Relays) > 0 {
		err = a.checkRelays(ctx)
	}
	for _, n := range Names() {
		r := a.results[n]
		sort.SliceStable(r.First, func(i, j int) bool { return r.First[i].ID < r.First[j].ID })
		rep.Invariants = append(rep.Invariants, *r)
	}
	elapsed := time.Since(a.began)
	rep.Seconds, rep.OrdersPerSecond = elapsed.Seconds(), rate(rep.Orders, elapsed)
	return rep, err
}

// auditor is one Run's state: the results so far. It holds no document
// beyond the page and the partition it is checking.
type auditor struct {
	cfg     Config
	now     time.Time
	results map[string]*Result
	rep     *Report
	began   time.Time // on the monotonic clock, for the rate

	// The event-order check without a read per event: an event's order
	// lives in its partition, so in its feed range, whose scan meets every
	// live document once. An event whose order the scan met in its page or
	// the page before is checked; another waits in pending until the scan
	// meets its order, and is read at the end of the range (or when the
	// scan stops) if it does not.
	pageOrders, prevOrders map[string]bool     // order ids met in this page and the one before
	pending                map[string][]string // order id → its events met before it
	nPending               int
	pendingAt              position // the start of the page of the oldest pending event
}

// maxPending bounds the events waiting for their order (about 100 bytes
// each); the events beyond it are checked with a point read of their order
// at once.
const maxPending = 10_000

func (a *auditor) checked(name string) { a.results[name].Checked++ }

func (a *auditor) violate(name, id, format string, args ...any) {
	r := a.results[name]
	r.Violations++
	if len(r.First) < a.cfg.MaxIDs {
		r.First = append(r.First, Violation{ID: id, Detail: fmt.Sprintf(format, args...)})
	}
}

// scan pages through the feed from continuation.
func (a *auditor) scan(ctx context.Context, rep *Report, continuation string) error {
	var p position
	if continuation != "" {
		var err error
		if p, err = decodePosition(continuation); err != nil {
			return err
		}
	} else {
		ranges, err := a.cfg.Feed.FeedRanges(ctx)
		if err != nil {
			return fmt.Errorf("audit: read the feed ranges: %w", err)
		}
		p = position{Ranges: ranges}
	}
	// stop ends the scan at p: the events still waiting for their order
	// are read now, or, when that fails, the scan resumes from the page
	// of the oldest of them (its checks are idempotent).
	stop := func(err error) error {
		rep.Continuation = p.encode()
		if perr := a.resolvePending(ctx); perr != nil {
			rep.Continuation = a.pendingAt.encode()
			err = errors.Join(err, perr)
		}
		return err
	}
	a.prevOrders = map[string]bool{}
	for p.Index < len(p.Ranges) {
		if a.cfg.MaxPages > 0 && rep.Pages >= a.cfg.MaxPages {
			return stop(nil)
		}
		if err := ctx.Err(); err != nil {
			return stop(err)
		}
		docs, next, err := a.cfg.Feed.ReadChanges(ctx, p.Ranges[p.Index], p.Token, a.cfg.PageSize)
		if err != nil {
			return stop(fmt.Errorf("audit: read the change feed of range %s: %w", p.Ranges[p.Index], err))
		}
		if len(docs) == 0 {
			if err := stop(nil); err != nil {
				return err
			}
			rep.Continuation = ""
			p = position{Ranges: p.Ranges, Index: p.Index + 1}
			a.prevOrders = map[string]bool{}
			continue
		}
		heads := make([]head, len(docs))
		a.pageOrders = make(map[string]bool)
		for i, d := range docs {
			if json.Unmarshal(d, &heads[i]) != nil {
				heads[i] = head{} // not ours to judge
			} else if heads[i].Type == order.TypeOrder && heads[i].ID == heads[i].OrderID {
				a.pageOrders[heads[i].OrderID] = true
			}
		}
		for i, d := range docs {
			if err := a.document(ctx, p, heads[i], d); err != nil {
				return stop(err) // this page again: its checks are idempotent
			}
		}
		a.prevOrders = a.pageOrders
		rep.Pages++
		rep.Documents += len(docs)
		p.Token = next
		if a.cfg.Progress != nil {
			a.cfg.Progress(Progress{Documents: rep.Documents, Pages: rep.Pages, Orders: rep.Orders,
				Range: p.Index + 1, Ranges: len(p.Ranges), Elapsed: time.Since(a.began)})
		}
	}
	return nil
}

// resolvePending reads the order of every event still waiting for it.
func (a *auditor) resolvePending(ctx context.Context) error {
	for _, orderID := range slices.Sorted(maps.Keys(a.pending)) {
		events := a.pending[orderID]
		_, _, err := a.cfg.Orders.ReadDocument(ctx, orderID, orderID)
		switch {
		case errors.Is(err, idempotent.ErrNotFound):
			for _, id := range events {
				a.violate(EventOrder, id, "event %s of order %s has no order document", id, orderID)
			}
		case err != nil:
			return fmt.Errorf("audit: read order %s of events %q: %w", orderID, events, err)
		}
		delete(a.pending, orderID)
		a.nPending -= len(events)
	}
	return nil
}

// head is the part of every document the scan dispatches on.
type head struct {
	ID        string `json:"id"`
	OrderID   string `json:"orderId"`
	Type      string `json:"type"`
	EventType string `json:"eventType"`
	TS        int64  `json:"_ts"`
}

// document checks one document of the feed, met in the page that starts
// at p, whose head is h (zero: not a JSON object, which is not ours to
// judge: the relay and the worker skip it too): an order with everything
// in its partition, an event against its order; others are checked with
// their order.
func (a *auditor) document(ctx context.Context, p position, h head, body []byte) error {
	switch h.Type {
	case order.TypeOrder:
		if h.ID == h.OrderID {
			a.nPending -= len(a.pending[h.OrderID])
			delete(a.pending, h.OrderID) // their order exists
		}
		return a.order(ctx, h, body)
	case order.TypeEvent:
		a.checked(EventOrder)
		switch {
		case a.pageOrders[h.OrderID] || a.prevOrders[h.OrderID]:
			return nil
		case a.nPending < maxPending:
			if a.nPending == 0 {
				a.pendingAt = p
			}
			if a.pending == nil {
				a.pending = make(map[string][]string)
			}
			a.pending[h.OrderID] = append(a.pending[h.OrderID], h.ID)
			a.nPending++
			return nil
		}
		_, _, err := a.cfg.Orders.ReadDocument(ctx, h.OrderID, h.OrderID)
		switch {
		case errors.Is(err, idempotent.ErrNotFound):
			a.violate(EventOrder, h.ID, "event %s of order %s has no order document", h.ID, h.OrderID)
		case err != nil:
			return fmt.Errorf("audit: read order %s of event %s: %w", h.OrderID, h.ID, err)
		}
	}
	return nil
}

// partition is the documents of one order's partition, decoded by type.
type partition struct {
	events   []order.AcceptedEvent
	payments []order.PaymentRecord
	markers  []markerDoc
	entries  []order.LoyaltyEntry
}

type markerDoc struct {
	order.InboxMarker
	hasTTL bool
	ts     int64
}

func decodePartition(docs [][]byte) (partition, error) {
	var p partition
	for _, d := range docs {
		var h head
		if err := json.Unmarshal(d, &h); err != nil {
			return p, err
		}
		var err error
		switch h.Type {
		case order.TypeEvent:
			var e order.AcceptedEvent
			err = json.Unmarshal(d, &e)
			p.events = append(p.events, e)
		case order.TypePayment:
			var r order.PaymentRecord
			err = json.Unmarshal(d, &r)
			p.payments = append(p.payments, r)
		case order.TypeInboxMarker:
			var m markerDoc
			var raw map[string]json.RawMessage
			if err = json.Unmarshal(d, &m.InboxMarker); err == nil {
				err = json.Unmarshal(d, &raw)
			}
			_, m.hasTTL = raw["ttl"]
			m.ts = h.TS
			p.markers = append(p.markers, m)
		case order.TypeLoyaltyEntry:
			var e order.LoyaltyEntry
			err = json.Unmarshal(d, &e)
			p.entries = append(p.entries, e)
		}
		if err != nil {
			return p, fmt.Errorf("document %s: %w", h.ID, err)
		}
	}
	return p, nil
}

// order checks an order document and its partition.
func (a *auditor) order(ctx context.Context, h head, body []byte) error {
	a.rep.Orders++
	var doc order.OrderDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		a.checked(OrderEvent)
		a.violate(OrderEvent, h.ID, "order document does not decode: %v", err)
		return nil
	}
	docs, err := a.cfg.Orders.ReadPartition(ctx, doc.OrderID)
	if err != nil {
		return fmt.Errorf("audit: read the partition of order %s: %w", doc.OrderID, err)
	}
	p, err := decodePartition(docs)
	if err != nil {
		a.checked(OrderEvent)
		a.violate(OrderEvent, doc.ID, "a document of the order's partition does not decode: %v", err)
		return nil
	}
	a.orderEvent(doc, p)
	a.status(doc, raw(body))
	if err := a.payment(ctx, doc, p); err != nil {
		return err
	}
	for _, c := range a.cfg.Consumers {
		var cdocs [][]byte
		if sameContainer(c.Store, a.cfg.Orders) {
			cdocs = docs // read already
		} else if cdocs, err = c.Store.ReadPartition(ctx, doc.OrderID); err != nil {
			return fmt.Errorf("audit: read consumer %s's partition of order %s: %w", c.Name, doc.OrderID, err)
		}
		a.inbox(c, doc, p, cdocs)
	}
	return nil
}

// sameContainer reports whether a and b are the same container: equal
// pointers (other kinds are taken as different, without comparing them).
func sameContainer(a, b Container) bool {
	t := reflect.TypeOf(a)
	return t != nil && t.Kind() == reflect.Pointer && t == reflect.TypeOf(b) && a == b
}

func raw(body []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	return m
}

func (a *auditor) orderEvent(doc order.OrderDocument, p partition) {
	a.checked(OrderEvent)
	o := order.Order{OrderID: doc.OrderID, CustomerID: doc.CustomerID, Currency: doc.Currency, Lines: doc.Lines,
		TotalMinor: doc.TotalMinor, PlacedAt: doc.PlacedAt}
	if h := o.RequestHash(); h != doc.RequestHash {
		a.violate(OrderEvent, doc.ID, "stored request hash %s is not the hash of the order's stored fields, %s", doc.RequestHash, h)
		return
	}
	var accepted []order.AcceptedEvent
	for _, e := range p.events {
		if e.EventType == order.EventOrderAccepted {
			accepted = append(accepted, e)
		}
	}
	switch {
	case len(accepted) != 1:
		a.violate(OrderEvent, doc.ID, "%d OrderAccepted events in the order's partition, want 1", len(accepted))
	case accepted[0].ID != order.EventID(doc.OrderID):
		a.violate(OrderEvent, doc.ID, "OrderAccepted event %q, want id %q", accepted[0].ID, order.EventID(doc.OrderID))
	case accepted[0].RequestHash != doc.RequestHash:
		a.violate(OrderEvent, doc.ID, "OrderAccepted event has request hash %s, the order %s", accepted[0].RequestHash, doc.RequestHash)
	}
}

var statuses = map[string]bool{"paid": true, "shipped": true, "delivered": true, "cancelled": true}

func (a *auditor) status(doc order.OrderDocument, fields map[string]json.RawMessage) {
	a.checked(Status)
	bad := func(format string, args ...any) { a.violate(Status, doc.ID, format, args...) }
	if doc.Version < 1 {
		bad("version %d is below 1", doc.Version)
		return
	}
	if doc.Version == 1 {
		if doc.Status != "accepted" || len(doc.StatusHashes) > 0 || doc.StatusChangedAt != nil {
			bad("version 1 is the creation: status %q (want accepted), %d status hashes (want 0), statusChangedAt set %t", doc.Status, len(doc.StatusHashes), doc.StatusChangedAt != nil)
		}
		return
	}
	if !statuses[doc.Status] || doc.StatusChangedAt == nil {
		bad("version %d has status %q and statusChangedAt set %t: want paid, shipped, delivered or cancelled, with its change time", doc.Version, doc.Status, doc.StatusChangedAt != nil)
		return
	}
	if _, ok := fields["statusHashCount"]; ok && doc.StatusHashCount != len(doc.StatusHashes) {
		bad("statusHashCount %d, but %d status hashes are recorded", doc.StatusHashCount, len(doc.StatusHashes))
		return
	}
	if len(doc.StatusHashes) > order.MaxStatusHashes {
		bad("%d status hashes recorded, more than %d", len(doc.StatusHashes), order.MaxStatusHashes)
		return
	}
	if len(doc.StatusHashes) == 0 {
		return // written before hashes were recorded
	}
	for v := range doc.StatusHashes {
		if v < 2 || v > doc.Version {
			bad("a status hash is recorded for version %d, outside 2 to the order's version %d", v, doc.Version)
			return
		}
	}
	c := order.StatusChange{OrderID: doc.OrderID, Status: doc.Status, Version: doc.Version, ChangedAt: *doc.StatusChangedAt}
	switch got, ok := doc.StatusHashes[doc.Version]; {
	case !ok:
		bad("no status hash recorded for the current version %d", doc.Version)
	case got != c.ContentHash():
		bad("version %d's recorded hash %s is not the hash of its status %s and change time, %s", doc.Version, got, doc.Status, c.ContentHash())
	}
}

// claimedAt is when rec's current claim began: its ClaimedAt, or for a
// released claim (zero) its first attempt.
func claimedAt(rec order.PaymentRecord, doc order.OrderDocument) time.Time {
	switch {
	case !rec.ClaimedAt.IsZero():
		return rec.ClaimedAt
	case rec.FirstAttemptAt != nil:
		return *rec.FirstAttemptAt
	}
	return doc.ProcessedAt
}

func (a *auditor) payment(ctx context.Context, doc order.OrderDocument, p partition) error {
	old := a.cfg.ClaimHorizon > 0 && a.now.Sub(doc.ProcessedAt) > a.cfg.ClaimHorizon
	if len(p.payments) == 0 {
		if a.cfg.Payments && doc.TotalMinor > 0 {
			a.checked(Payment)
			if old {
				a.violate(Payment, doc.ID, "order of %d %s accepted %s ago, beyond the claim horizon %v, has no payment record", doc.TotalMinor, doc.Currency, a.now.Sub(doc.ProcessedAt).Round(time.Second), a.cfg.ClaimHorizon)
			}
		}
		return nil
	}
	a.checked(Payment)
	bad := func(format string, args ...any) { a.violate(Payment, doc.ID, format, args...) }
	if len(p.payments) != 1 {
		bad("%d payment records in the order's partition, want 1", len(p.payments))
		return nil
	}
	rec := p.payments[0]
	switch {
	case rec.ID != order.PaymentRecordID(doc.OrderID):
		bad("payment record %q, want id %q", rec.ID, order.PaymentRecordID(doc.OrderID))
		return nil
	case doc.TotalMinor == 0:
		bad("order with a total of zero has a payment record (nothing is to be captured)")
		return nil
	case rec.AmountMinor != doc.TotalMinor || rec.Currency != doc.Currency:
		bad("payment record for %d %s, the order's total is %d %s", rec.AmountMinor, rec.Currency, doc.TotalMinor, doc.Currency)
		return nil
	case rec.RequestHash != "" && rec.RequestHash != doc.RequestHash:
		bad("payment record has request hash %s, the order %s", rec.RequestHash, doc.RequestHash)
		return nil
	case rec.IdempotencyKey != order.PaymentKey(doc.OrderID):
		bad("payment record's idempotency key %q, want %q", rec.IdempotencyKey, order.PaymentKey(doc.OrderID))
		return nil
	}
	if rec.State == order.PaymentInProgress {
		a.checked(PaymentClaim)
		if at := claimedAt(rec, doc); a.cfg.ClaimHorizon > 0 && a.now.Sub(at) > a.cfg.ClaimHorizon {
			a.violate(PaymentClaim, doc.ID, "payment claim by %s in progress since %s, longer than the redelivery horizon %v: no copy of the message can complete it; reconcile it with the payments service",
				rec.Owner, at.Format(time.RFC3339), a.cfg.ClaimHorizon)
		}
		if old {
			bad("payment record still in progress %s after the order was accepted, beyond the claim horizon %v", a.now.Sub(doc.ProcessedAt).Round(time.Second), a.cfg.ClaimHorizon)
		}
		return nil
	}
	if rec.State != order.PaymentCompleted || rec.PaymentID == "" {
		bad("payment record in state %q with payment id %q, want completed with one", rec.State, rec.PaymentID)
		return nil
	}
	if a.cfg.Ledger == nil {
		return nil
	}
	a.checked(PaymentLedger)
	ps, err := a.cfg.Ledger.LookupPayments(ctx, doc.OrderID)
	if err != nil {
		return fmt.Errorf("audit: look up the payments of order %s: %w", doc.OrderID, err)
	}
	switch {
	case len(ps) != 1:
		a.violate(PaymentLedger, doc.ID, "the ledger holds %d charges for the order, want 1", len(ps))
	case ps[0].PaymentID != rec.PaymentID || ps[0].AmountMinor != doc.TotalMinor || ps[0].Currency != doc.Currency:
		a.violate(PaymentLedger, doc.ID, "the ledger's charge is %s for %d %s; the record names %s for %d %s",
			ps[0].PaymentID, ps[0].AmountMinor, ps[0].Currency, rec.PaymentID, doc.TotalMinor, doc.Currency)
	}
	return nil
}

// inbox checks consumer c's markers and entries for the order doc, whose
// partition in the orders container is p and in c's container docs.
func (a *auditor) inbox(c Consumer, doc order.OrderDocument, p partition, docs [][]byte) {
	cp, err := decodePartition(docs)
	if err != nil {
		a.checked(Inbox)
		a.violate(Inbox, doc.ID, "a document of consumer %s's partition does not decode: %v", c.Name, err)
		return
	}
	// A marker and its entry are written in one batch with one time
	// (processedAt, awardedAt): both are young (their marker certainly
	// stored) or both old (their marker may have expired by design, the
	// entry stays). Young ones pair exactly; an old marker still needs
	// its entry.
	var markers []markerDoc
	youngMarkers, oldMarkers := 0, 0
	for _, m := range cp.markers {
		if m.Consumer != c.Name {
			continue
		}
		markers = append(markers, m)
		if a.markerMayHaveExpired(c, m.written()) {
			oldMarkers++
		} else {
			youngMarkers++
		}
	}
	youngEntries, oldEntries := 0, 0
	for _, e := range cp.entries {
		switch {
		case e.Consumer != c.Name:
		case a.markerMayHaveExpired(c, e.AwardedAt):
			oldEntries++
		default:
			youngEntries++
		}
	}
	for _, m := range markers {
		a.markerTTL(c, m)
	}
	for _, e := range p.events {
		if !a.eventDue(c, e) {
			continue
		}
		a.checked(Inbox)
		id := order.InboxMarkerID(c.Name, e.ID)
		i := -1
		for j, m := range markers {
			if m.ID == id {
				i = j
			}
		}
		switch {
		case i < 0:
			a.violate(Inbox, e.ID, "consumer %s has no marker %q for the event, which occurred %s (after its subscription existed, more than the settle time %v ago, within its marker TTL)",
				c.Name, id, e.OccurredAt.Format(time.RFC3339), a.cfg.Settle)
		case markers[i].RequestHash != e.RequestHash:
			a.violate(Inbox, e.ID, "consumer %s's marker has request hash %s, the event %s", c.Name, markers[i].RequestHash, e.RequestHash)
		}
	}
	if len(markers) > 0 || youngEntries+oldEntries > 0 {
		a.checked(Inbox)
		switch {
		case youngEntries != youngMarkers:
			a.violate(Inbox, doc.ID, "consumer %s has %d entries and %d markers written within the markers' TTL %v in the order's partition: each marker's batch writes exactly one entry", c.Name, youngEntries, youngMarkers, c.MarkerTTL)
		case oldMarkers > oldEntries:
			a.violate(Inbox, doc.ID, "consumer %s has %d markers and %d entries older than the markers' TTL %v in the order's partition: each marker's batch writes exactly one entry", c.Name, oldMarkers, oldEntries, c.MarkerTTL)
		}
	}
}

// boundedTTL reports whether c's markers expire.
func boundedTTL(c Consumer) bool {
	return c.MarkerTTL > 0 && c.MarkerTTL != order.UnboundedRetention
}

// markerMayHaveExpired reports whether a marker of c written at written
// may have expired by design by now: its TTL, less Config.ClockSkew
// between the writer and the store that expires it, has elapsed. Before
// that the marker is certainly stored.
func (a *auditor) markerMayHaveExpired(c Consumer, written time.Time) bool {
	return boundedTTL(c) && !a.now.Before(written.Add(c.MarkerTTL-a.cfg.ClockSkew))
}

// written is when m was written: its processedAt, or its _ts.
func (m markerDoc) written() time.Time {
	if m.ProcessedAt.IsZero() && m.ts > 0 {
		return time.Unix(m.ts, 0)
	}
	return m.ProcessedAt
}

// eventDue reports whether e must have c's marker by now.
func (a *auditor) eventDue(c Consumer, e order.AcceptedEvent) bool {
	at := e.OccurredAt
	switch {
	case !c.Since.IsZero() && at.Before(c.Since):
		return false
	case a.now.Sub(at) < a.cfg.Settle:
		return false
	case a.markerMayHaveExpired(c, at):
		return false // its marker, written after it occurred, may have expired by design
	}
	return true
}

func (a *auditor) markerTTL(c Consumer, m markerDoc) {
	a.checked(MarkerTTL)
	bad := func(format string, args ...any) { a.violate(MarkerTTL, m.ID, format, args...) }
	switch {
	case !m.hasTTL || m.TTL == 0 || m.TTL < -1:
		bad("consumer %s's marker has no legal ttl (%d): it never expires, or Cosmos DB rejects it", c.Name, m.TTL)
		return
	case m.TTL > 0 && a.cfg.MinMarkerRetention > 0 && time.Duration(m.TTL)*time.Second < a.cfg.MinMarkerRetention:
		bad("consumer %s's marker ttl %ds is below the redelivery horizon's minimum retention %v: a late copy would be processed again", c.Name, m.TTL, a.cfg.MinMarkerRetention)
		return
	case m.TTL == -1:
		return
	}
	written := m.written()
	if expiry := written.Add(time.Duration(m.TTL) * time.Second); a.now.After(expiry.Add(order.PaymentClockSkew)) {
		bad("consumer %s's marker expired at %s (processed %s, ttl %ds) but is still stored: the container's time to live is off", c.Name,
			expiry.Format(time.RFC3339), written.Format(time.RFC3339), m.TTL)
	}
}
