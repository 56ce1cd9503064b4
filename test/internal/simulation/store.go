package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// Store is the store a consumer under test gets: the order writes and the
// document-level calls of status changes, payment records and inbox
// markers, all in one Cosmos DB container, as the project's stores provide.
type Store interface {
	idempotent.DocumentStore
}

// faultStore is a Store that injects the plan's store faults around the
// in-memory Cosmos DB model:
//
//   - Transient: a create, read, batch or replace fails with a throttling or
//     unavailability error (matching idempotent.ErrTransient) before it touches
//     the store;
//   - Ambiguous: an order's create (or an inbox consumer's batch) commits,
//     then reports a timeout (matching idempotent.ErrTransient), as when the
//     response to a committed write is lost;
//   - Outage: every call for the order fails as Transient does;
//   - Poison: the order's document reads back undecodable, or fails every
//     read and patch with 500 (see poison.go);
//   - PaymentCrash: the delivery marked by the payment gateway dies at its
//     next payment record write, which never happens (see faultGateway);
//   - PaymentRecordOutage: from the first write that marks an order's
//     payment record completed on, every write of the record fails with
//     503, until the queues have drained;
//   - PaymentMarkFailure: the first write that marks an order's payment
//     record completed fails with 503 before writing (or, if the plan spares
//     it, none does);
//   - ReplicaLag: the reads of an order may see its partition a few writes
//     behind, as reads without the session token do (see faultStore.read);
//   - the dependency outages of outage.go: while one is on, every call
//     (OutageStore), every write (OutageStoreWrites) or every call in one
//     key range (OutagePartition) fails with 503 before it touches the
//     store, for every consumer of the store.
//
// It records every call and its result in the run's history.
// It tells the tracker which delivery committed each order (or, for an
// inbox consumer, each marker). It is safe for concurrent use.
type faultStore struct {
	mem     *memstore.Store
	plan    *plan
	tr      *tracker
	inbox   bool // the store of an inbox consumer: its batches are its writes
	hist    *history
	queue   string        // the inbox consumer's name, "" for the order writers
	latency time.Duration // of every call, as a round trip to Cosmos DB takes
	outs    *outages      // the run's dependency outages, shared by every consumer's store

	mu       sync.Mutex
	creates  map[string]uint64     // create calls so far, by order id
	reads    map[string]uint64     // read calls so far, by order id
	docCalls map[string]uint64     // document calls so far, by order id
	outages  map[string]bool       // orders under a permanent outage
	poison   map[string]poisonKind // poison orders: their document cannot be used
	marked   map[string]bool       // orders whose completed-mark was offered to PaymentMarkFailure

	recordDown    map[string]bool // orders whose payment record PaymentRecordOutage made unwritable
	recordsBackUp bool            // the PaymentRecordOutages have ended

	// lagging holds the memstore sessions that serve the reads of the
	// orders FaultRates.ReplicaLag picked: sessions that never learn the
	// tokens of the writes, only of their own reads.
	lagging map[string]*memstore.Session
}

// read reads pk/id from the model: for an order FaultRates.ReplicaLag
// picked (order writers only), through its lagging session, counting the
// reads that saw an older state than the latest.
func (s *faultStore) read(ctx context.Context, pk, id string) ([]byte, string, error) {
	if s.inbox || !s.plan.replicaLag(pk) {
		return s.mem.ReadDocument(ctx, pk, id)
	}
	s.mu.Lock()
	sess := s.lagging[pk]
	if sess == nil {
		sess = s.mem.NewSession()
		s.lagging[pk] = sess
	}
	s.mu.Unlock()
	body, etag, err := sess.ReadDocument(ctx, pk, id)
	if latest, ok := s.mem.Get(pk, id); ok && (err != nil || latest.ETag != etag) {
		s.tr.count(func(c *FaultCounts) {
			c.ReplicaLag++
			if err != nil {
				c.ReplicaLagMissing++
			}
		})
	}
	return body, etag, err
}

// recordOutage reports whether a write of order id's payment record fails
// under PaymentRecordOutage: from its first completed-mark (completes) on,
// for the orders the plan picks, until endRecordOutages.
func (s *faultStore) recordOutage(id string, completes bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.recordsBackUp:
		return false
	case s.recordDown[id]:
		return true
	case completes && s.plan.recordOutage(id):
		s.recordDown[id] = true
		s.tr.count(func(c *FaultCounts) { c.PaymentRecordOutage++ })
		return true
	}
	return false
}

// endRecordOutages ends every PaymentRecordOutage: the store is whole
// again, before the operator resubmits what was dead-lettered.
func (s *faultStore) endRecordOutages() {
	s.mu.Lock()
	s.recordsBackUp = true
	s.mu.Unlock()
}

// recordOutages returns the orders whose payment record PaymentRecordOutage
// made unwritable.
func (s *faultStore) recordOutages() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.recordDown)
}

// Probe is the circuit breaker's probe, as cosmosstore's Probe, which
// cmd/orderworker's breaker calls: a point read of a missing item, then a
// delete of it, two round trips, against the model. The plan's per-order
// outages are not of the whole store, so the probe sees none of them, as a
// real probe does not see a fault of one partition. Of the dependency
// outages it sees OutageStore's, OutageStoreWrites' (its delete is a
// write), and OutagePartition's when the key range down holds its
// partition key value (probeKey, cosmosstore's), as a physical partition
// holding it would fail it.
func (s *faultStore) Probe(ctx context.Context) error {
	for _, write := range []bool{false, true} {
		if err := s.wait(ctx); err != nil {
			return err
		}
		kinds := []string{OutageStore, OutagePartition}
		if write {
			kinds = append(kinds, OutageStoreWrites)
		}
		if o, down := s.outs.fails(probeKey, kinds...); down {
			return errOutage(o, "probe", probeKey)
		}
	}
	return s.mem.Probe(ctx)
}

// probeKey is the partition key value, and id, of the item cosmosstore's
// Probe reads and deletes.
const probeKey = "cosmosstore-ping"

// down returns the failure of a call op with partition key pk while a
// dependency outage strikes it: write tells a write (which OutageStoreWrites
// fails too) from a read.
func (s *faultStore) down(op, pk string, write bool) error {
	kinds := []string{OutageStore, OutagePartition}
	if write {
		kinds = append(kinds, OutageStoreWrites)
	}
	o, down := s.outs.fails(pk, kinds...)
	if !down {
		return nil
	}
	return errOutage(o, op, pk)
}

// markFailOnce reports whether order id's completed-mark may still fail:
// PaymentMarkFailure strikes each order's mark at most once.
func (s *faultStore) markFailOnce(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marked[id] {
		return false
	}
	s.marked[id] = true
	return true
}

var _ Store = (*faultStore)(nil)

func newFaultStore(mem *memstore.Store, p *plan, tr *tracker, outages map[string]bool, inbox bool) *faultStore {
	return &faultStore{mem: mem, plan: p, tr: tr, inbox: inbox, outages: outages,
		creates: make(map[string]uint64), reads: make(map[string]uint64), docCalls: make(map[string]uint64), marked: make(map[string]bool),
		recordDown: make(map[string]bool), lagging: make(map[string]*memstore.Session)}
}

// errThrottled and errUnavailable are the transient failures the store
// reports; both match idempotent.ErrTransient, as the Cosmos DB adapter's do.
var (
	errThrottled   = fmt.Errorf("simulated 429 Too Many Requests: %w", idempotent.ErrTransient)
	errUnavailable = fmt.Errorf("simulated 503 Service Unavailable: %w", idempotent.ErrTransient)
	errTimedOut    = fmt.Errorf("simulated 408 Request Timeout after the write committed: %w", idempotent.ErrTransient)
)

// wait waits the store's latency, as a call's round trip does, or until
// ctx ends.
func (s *faultStore) wait(ctx context.Context) error {
	if s.latency <= 0 || sleep(ctx, s.latency) != nil {
		return ctx.Err()
	}
	return nil
}

// next returns the number of the call being made for id, from 1, and
// whether id is under an outage.
func (s *faultStore) next(calls map[string]uint64, id string) (n uint64, outage bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls[id]++
	return calls[id], s.outages[id]
}

// orderView is the faultStore as the order Processor's Store (Env.Orders):
// its batches are order writes and its reads order reads, with the faults
// and counters of those, while the Processor's document calls (status
// changes, payment records) go to the faultStore itself.
type orderView struct{ *faultStore }

var _ idempotent.Store = orderView{}

// CreateBatch implements idempotent.Store: an order's batch (order document,
// event, and a payment claim if it has one).
func (v orderView) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	what := "create order and its event"
	if len(docs) > 2 {
		var rec order.PaymentRecord
		if json.Unmarshal(docs[2].Body, &rec) == nil {
			what += " and payment claim (" + rec.State + " by " + rec.Owner + ")"
		}
	}
	etags, err := v.writeOrder(ctx, pk, docs)
	return etags, v.logged(pk, what, err)
}

func (s *faultStore) writeOrder(ctx context.Context, id string, docs []idempotent.Document) ([]string, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	if err := s.down("create order", id, true); err != nil {
		return nil, err
	}
	n, outage := s.next(s.creates, id)
	switch {
	case outage:
		s.tr.count(func(c *FaultCounts) { c.OutageErrors++ })
		return nil, fmt.Errorf("create order %q: %w", id, errUnavailable)
	case s.plan.inject(faultTransientCreate, id, n, 0):
		s.tr.count(func(c *FaultCounts) { c.Transient++ })
		return nil, fmt.Errorf("create order %q: %w", id, errThrottled)
	}
	etags, err := s.mem.CreateBatch(ctx, id, docs)
	if err != nil {
		return nil, err
	}
	ambiguous := s.plan.inject(faultAmbiguous, id, n, 0)
	s.tr.wrote(deliveryFrom(ctx), id, ambiguous)
	if ambiguous {
		// The response is lost: the caller learns no ETags.
		return nil, fmt.Errorf("create order %q: %w", id, errTimedOut)
	}
	return etags, nil
}

// ReadDocument implements idempotent.Store: a read of the order document.
func (v orderView) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	body, etag, err := v.readOrder(ctx, pk, id)
	return body, etag, v.logged(pk, "read order", err)
}

func (s *faultStore) readOrder(ctx context.Context, orderID, id string) ([]byte, string, error) {
	if err := s.wait(ctx); err != nil {
		return nil, "", err
	}
	if err := s.down("read order", orderID, false); err != nil {
		return nil, "", err
	}
	n, outage := s.next(s.reads, orderID)
	switch {
	case outage:
		s.tr.count(func(c *FaultCounts) { c.OutageErrors++ })
		return nil, "", fmt.Errorf("read order %q: %w", orderID, errUnavailable)
	case s.plan.inject(faultTransientRead, orderID, n, 0):
		s.tr.count(func(c *FaultCounts) { c.Transient++ })
		return nil, "", fmt.Errorf("read order %q: %w", orderID, errThrottled)
	}
	if err := s.poisonCall(orderID, id); err != nil {
		return nil, "", err
	}
	body, etag, err := s.read(ctx, orderID, id)
	if err == nil && s.poisoned(orderID, id) == poisonUndecodable {
		body = s.undecodable(body)
	}
	return body, etag, err
}

// fail returns the injected failure of document call n for order id, if any.
func (s *faultStore) fail(op, id string, n uint64, outage bool) error {
	switch {
	case outage:
		s.tr.count(func(c *FaultCounts) { c.OutageErrors++ })
		return fmt.Errorf("%s in partition %q: %w", op, id, errUnavailable)
	case s.plan.inject(faultTransientDocument, id, n, 0):
		s.tr.count(func(c *FaultCounts) { c.Transient++ })
		return fmt.Errorf("%s in partition %q: %w", op, id, errThrottled)
	}
	return nil
}

// ReadDocument implements idempotent.DocumentStore.
func (s *faultStore) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	if err := s.wait(ctx); err != nil {
		return nil, "", s.logged(pk, "read "+id, err)
	}
	if err := s.down("read "+id, pk, false); err != nil {
		return nil, "", s.logged(pk, "read "+id, err)
	}
	n, outage := s.next(s.docCalls, pk)
	if err := s.fail("read "+id, pk, n, outage); err != nil {
		return nil, "", s.logged(pk, "read "+id, err)
	}
	if err := s.poisonCall(pk, id); err != nil {
		return nil, "", s.logged(pk, "read "+id, err)
	}
	body, etag, err := s.read(ctx, pk, id)
	if err == nil && s.poisoned(pk, id) == poisonUndecodable {
		body = s.undecodable(body)
	}
	what := "read " + id
	if st := paymentState(body); st != "" {
		what += " (" + st + ")"
	}
	return body, etag, s.logged(pk, what, err)
}

// CreateBatch implements idempotent.DocumentStore.
func (s *faultStore) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	etags, err := s.createDocuments(ctx, pk, docs)
	return etags, s.logged(pk, fmt.Sprintf("create batch %q", ids), err)
}

func (s *faultStore) createDocuments(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	if err := s.down("create batch", pk, true); err != nil {
		return nil, err
	}
	n, outage := s.next(s.docCalls, pk)
	if err := s.fail("create batch", pk, n, outage); err != nil {
		return nil, err
	}
	etags, err := s.mem.CreateBatch(ctx, pk, docs)
	if err != nil {
		return nil, err
	}
	if !s.inbox {
		return etags, nil
	}
	ambiguous := s.plan.inject(faultAmbiguous, pk, n, 1)
	s.tr.wrote(deliveryFrom(ctx), pk, ambiguous)
	if ambiguous {
		return nil, fmt.Errorf("create batch in partition %q: %w", pk, errTimedOut)
	}
	return etags, nil
}

// errPaymentCrash is what the payment record write of a delivery that
// "died" returns: in a real crash the call would never be made, and the
// store sees the same.
var errPaymentCrash = errors.New("simulated crash: the worker died after the capture call, before marking the payment record completed")

// ReplaceDocument implements idempotent.DocumentStore.
func (s *faultStore) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	what := "replace " + d.ID
	st := paymentState(d.Body)
	if st != "" {
		what += " (" + st + ")"
	}
	etag, err := s.replaceDocument(ctx, pk, d, ifMatch, strings.HasPrefix(st, order.PaymentCompleted+" "))
	return etag, s.logged(pk, what, err)
}

func (s *faultStore) replaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string, completes bool) (string, error) {
	if dl := deliveryFrom(ctx); dl != nil && d.ID == order.PaymentRecordID(pk) && s.tr.diesAtPaymentWrite(dl) {
		return "", errPaymentCrash
	}
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	if err := s.down("replace "+d.ID, pk, true); err != nil {
		return "", err
	}
	n, outage := s.next(s.docCalls, pk)
	if err := s.fail("replace "+d.ID, pk, n, outage); err != nil {
		return "", err
	}
	if d.ID == order.PaymentRecordID(pk) && s.recordOutage(pk, completes) {
		return "", fmt.Errorf("fault: payment record in partition %q cannot be written until the queues drain: %w", pk, errUnavailable)
	}
	if completes && d.ID == order.PaymentRecordID(pk) && s.markFailOnce(pk) && s.plan.inject(faultMarkFailure, pk, n, 2) {
		s.tr.count(func(c *FaultCounts) { c.PaymentMarkFailure++ })
		return "", fmt.Errorf("fault: mark payment record completed in partition %q: %w", pk, errUnavailable)
	}
	return s.mem.ReplaceDocument(ctx, pk, d, ifMatch)
}

var _ idempotent.Patcher = (*faultStore)(nil)

// PatchDocument implements idempotent.Patcher (the status changes' one-call
// path), with the document calls' faults.
func (s *faultStore) PatchDocument(ctx context.Context, pk, id string, p idempotent.Patch) (string, error) {
	what := "patch " + id
	for _, op := range p.Ops {
		if op.Path == "/version" {
			what += fmt.Sprintf(" (to version %v)", op.Value)
		}
	}
	etag, err := s.patchDocument(ctx, pk, id, p)
	return etag, s.logged(pk, what, err)
}

func (s *faultStore) patchDocument(ctx context.Context, pk, id string, p idempotent.Patch) (string, error) {
	if err := s.wait(ctx); err != nil {
		return "", err
	}
	if err := s.down("patch "+id, pk, true); err != nil {
		return "", err
	}
	n, outage := s.next(s.docCalls, pk)
	if err := s.fail("patch "+id, pk, n, outage); err != nil {
		return "", err
	}
	if err := s.poisonCall(pk, id); err != nil {
		return "", err
	}
	if s.poisoned(pk, id) == poisonUndecodable {
		if _, _, err := s.mem.ReadDocument(ctx, pk, id); err != nil {
			return "", err // not yet created
		}
		return "", errPoisonPatch
	}
	return s.mem.PatchDocument(ctx, pk, id, p)
}

// logged records a store call of order id and its result in the history.
func (s *faultStore) logged(id, what string, err error) error {
	res := "ok"
	if err != nil {
		res = err.Error()
	}
	s.hist.add(id, s.queue, "store: %s: %s", what, res)
	return err
}

// paymentState returns the state a payment record body carries, or "".
func paymentState(body []byte) string {
	var r struct {
		Type  string `json:"type"`
		State string `json:"state"`
		Owner string `json:"owner"`
	}
	if json.Unmarshal(body, &r) != nil || r.Type != order.TypePayment {
		return ""
	}
	return r.State + " by " + r.Owner
}
