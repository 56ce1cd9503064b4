package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// The relay's part of the run: relaySlots instances of package relay,
// unchanged, reading memstore's change feed of the run's store, keeping
// their leases in the same store, and publishing to the topic whose
// subscriptions the inbox consumers receive from.
const (
	relayName  = "orders-relay"
	topicName  = "order-events"
	relaySlots = 2
	feedRanges = 4
	// relayFaultBudget bounds each relay fault (crash, stop, pause, lost
	// acknowledgement) per run, so that a run with high rates still ends.
	relayFaultBudget = 3
	// maxBatchBytes is the size of a batch the model's NewBatch makes:
	// Service Bus standard tier's 256 KB.
	maxBatchBytes = 256 << 10
)

// orderEvents is the shape of the order example's outbox events, as
// cmd/orderrelay passes it to the relay.
var orderEvents = relay.EventFormat{TypeField: order.OutboxTypeField, TypeValue: order.OutboxTypeValue, IDField: order.OutboxIDField,
	SubjectField: order.OutboxSubjectField, PartitionKeyField: order.OutboxPartitionKeyField, TimeField: order.OutboxTimeField}

// errRelayKilled is what every call of a killed relay instance returns: a
// SIGKILLed process makes no further call, and the feed, the store and
// the topic see the same.
var errRelayKilled = errors.New("simulated SIGKILL: the relay process is gone")

// errSendFailed is a send that failed before the topic saw the batch.
var errSendFailed = errors.New("simulated ServerBusy: the topic received nothing of the batch")

// errLostAck is a send the topic accepted whose answer was lost: the relay
// cannot tell that it was sent, so it sends the page again.
var errLostAck = errors.New("simulated lost acknowledgement: the batch was sent, its answer lost")

// RelayReport sums up the relay's part of a run.
type RelayReport struct {
	Enabled   bool
	Instances int // relay instances started: relaySlots plus one per instance a crash or stop ended
	// Ended counts the instances a crash or a stop ended. One that got
	// both (a SIGTERM while it sends, then a SIGKILL before it has
	// finished, as a supervisor sends after the grace period) is counted
	// once, and replaced once.
	Ended int
	// From the relay instances' own Stats, summed.
	Published, Batches, Checkpoints, Acquired, Lost, Skipped, Unpublishable int64
	// Sent counts the messages the relay sent to the topic, whether or not
	// the relay saw the send succeed (a crash right after it, a lost
	// answer); Published counts only those it saw succeed. From the topic:
	// the messages it accepted, and the republishes its duplicate detection
	// dropped before the fan-out.
	Sent                             int
	TopicEnqueued, DuplicatesDropped int64
	// Republished counts the events the topic accepted more than once (a
	// republish after the duplicate-detection window): the subscribers'
	// inbox markers make them duplicates.
	Republished int
	// Takeovers counts leases acquired from another owner: after its
	// expiry (a crash, a pause) or its release (a graceful stop).
	Takeovers, ExpiredTakeovers int
	// Faults injected into the relay.
	Crashes, Stops, Pauses, LostAcks int
	// Faults that strike before the topic sees a batch: sends that failed
	// (FaultRates.RelaySendFailure) and SIGKILLs as a batch was to be sent
	// (FaultRates.RelayCrashBeforeSend).
	SendFailures, CrashesBeforeSend int
}

// topicOutlet is the relay's side of the topic: every send of every relay
// instance goes through it, one at a time, so it knows the sequence number
// the topic gave each message it accepted (nothing else sends to the
// topic), and records the ground truth every subscription shares.
type topicOutlet struct {
	topic   *sbqueue.Topic
	hist    *history
	changed chan struct{}

	mu        sync.Mutex
	sent      []Sent
	nextSeq   int64
	published map[string]int // event id -> copies the topic accepted
}

// send sends ms to the topic as one batch and records each message.
func (o *topicOutlet) send(ctx context.Context, owner string, ms []sbqueue.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	dropped, _, err := o.topic.SendBatchReport(ctx, ms)
	if err != nil {
		return err
	}
	drop := make(map[int]bool, len(dropped))
	for _, i := range dropped {
		drop[i] = true
	}
	for i, m := range ms {
		var head struct {
			OrderID     string `json:"orderId"`
			RequestHash string `json:"requestHash"`
		}
		_ = json.Unmarshal(m.Body, &head) // an undecodable event has neither: the checker reports it
		s := Sent{MessageID: m.MessageID, OrderID: head.OrderID, Kind: Original, RequestHash: head.RequestHash}
		if o.published[m.MessageID] > 0 {
			s.Kind = Retry
		}
		if !drop[i] {
			o.nextSeq++
			s.Enqueued, s.Seq = true, o.nextSeq
			o.published[m.MessageID]++
			o.hist.add(s.OrderIDOrMessageID(), "", "relay %s published %s to the topic as #%d (%s)", owner, m.MessageID, s.Seq, s.Kind)
		} else {
			o.hist.add(s.OrderIDOrMessageID(), "", "relay %s published %s: dropped by the topic's duplicate detection", owner, m.MessageID)
		}
		o.sent = append(o.sent, s)
	}
	select {
	case o.changed <- struct{}{}:
	default:
	}
	return nil
}

// snapshot returns the ground truth so far and the copies per event.
func (o *topicOutlet) snapshot() ([]Sent, map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Sent(nil), o.sent...), maps.Clone(o.published)
}

// relayRun runs the relay instances and their faults.
type relayRun struct {
	cfg    Config
	mem    *memstore.Store
	feed   *memstore.ChangeFeed
	out    *topicOutlet
	plan   *plan
	hist   *history
	logger *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
	paused atomic.Bool // an instance is paused (RelayPause)

	mu         sync.Mutex
	rep        RelayReport
	errs       []error
	faultsUsed map[fault]int
}

// Faults of the relay, decided per opportunity from the seed.
const (
	faultRelayCrash fault = iota + 32
	faultRelayStop
	faultRelayPause
	faultRelayLostAck
	faultRelaySendFailure
	faultRelayCrashBeforeSend
)

func newRelayRun(cfg Config, mem *memstore.Store, topic *sbqueue.Topic, p *plan, hist *history, changed chan struct{}, logger *slog.Logger) *relayRun {
	return &relayRun{cfg: cfg, mem: mem, feed: mem.ChangeFeed(memstore.ChangeFeedOptions{Ranges: feedRanges, Seed: cfg.Seed}),
		out:  &topicOutlet{topic: topic, hist: hist, changed: changed, published: make(map[string]int)},
		plan: p, hist: hist, logger: logger, faultsUsed: make(map[fault]int)}
}

// strikes reports whether fault f strikes opportunity n of instance owner,
// within the run's budget for f.
func (rr *relayRun) strikes(f fault, owner string, n uint64) bool {
	var rate float64
	switch f {
	case faultRelayCrash:
		rate = rr.cfg.Faults.RelayCrash
	case faultRelayStop:
		rate = rr.cfg.Faults.RelayStop
	case faultRelayPause:
		rate = rr.cfg.Faults.RelayPause
	case faultRelayLostAck:
		rate = rr.cfg.Faults.RelayLostAck
	case faultRelaySendFailure:
		rate = rr.cfg.Faults.RelaySendFailure
	case faultRelayCrashBeforeSend:
		rate = rr.cfg.Faults.RelayCrashBeforeSend
	}
	if rr.plan.roll(f, owner, n, 0) >= rate {
		return false
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.faultsUsed[f] >= relayFaultBudget {
		return false
	}
	rr.faultsUsed[f]++
	switch f {
	case faultRelayCrash:
		rr.rep.Crashes++
	case faultRelayStop:
		rr.rep.Stops++
	case faultRelayPause:
		rr.rep.Pauses++
	case faultRelayLostAck:
		rr.rep.LostAcks++
	case faultRelaySendFailure:
		rr.rep.SendFailures++
	case faultRelayCrashBeforeSend:
		rr.rep.CrashesBeforeSend++
	}
	return true
}

// start starts the relay slots; each runs one instance at a time and
// replaces one that crashed or stopped by a new one, as a process
// supervisor does, until stop.
func (rr *relayRun) start(ctx context.Context) {
	ctx, rr.cancel = context.WithCancel(ctx)
	for slot := range relaySlots {
		rr.wg.Go(func() { rr.runSlot(ctx, slot) })
	}
}

// stop cancels every instance, as SIGTERM does, waits until each has
// finished its page and released its leases (a paused instance first
// wakes), and returns the errors the instances returned.
func (rr *relayRun) stop() error {
	rr.cancel()
	rr.wg.Wait()
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return errors.Join(rr.errs...)
}

func (rr *relayRun) runSlot(ctx context.Context, slot int) {
	for gen := 0; ctx.Err() == nil; gen++ {
		inst := &relayInstance{rr: rr, owner: fmt.Sprintf("relay-%d.%d", slot, gen)}
		var sender relay.Sender = &relaySender{inst: inst}
		if rr.cfg.RelaySender != nil {
			sender = rr.cfg.RelaySender(sender)
		}
		r, err := relay.New(&relayFeed{inst: inst}, &relayLeases{inst: inst}, sender, relay.Options{
			Name: relayName, Owner: inst.owner,
			LeaseDuration: rr.cfg.RelayLeaseDuration, PollInterval: rr.cfg.RelayPollInterval, CallTimeout: rr.cfg.RelayCallTimeout,
			Now: time.Now, Logger: rr.logger.With("component", "relay"),
			Events: orderEvents, LeasePartitionKeyPath: order.OutboxLeasePartitionKeyPath,
		})
		if err != nil {
			rr.mu.Lock()
			rr.errs = append(rr.errs, err)
			rr.mu.Unlock()
			return
		}
		ictx, cancel := context.WithCancel(ctx)
		inst.cancel = cancel
		rr.mu.Lock()
		rr.rep.Instances++
		rr.mu.Unlock()
		err = r.Run(ictx)
		cancel()
		st := r.Stats()
		rr.mu.Lock()
		if inst.ended.Load() {
			rr.rep.Ended++
		}
		rr.rep.Published += st.Published
		rr.rep.Batches += st.Batches
		rr.rep.Checkpoints += st.Checkpoints
		rr.rep.Acquired += st.Acquired
		rr.rep.Lost += st.Lost
		rr.rep.Skipped += st.Skipped
		rr.rep.Unpublishable += st.Unpublishable
		if err != nil && !inst.killed.Load() {
			rr.errs = append(rr.errs, fmt.Errorf("relay %s: %w", inst.owner, err))
		}
		rr.mu.Unlock()
	}
}

// caughtUp reports whether the relay has checkpointed past every event
// stored so far: after the continuation saved in each range's lease, the
// change feed holds no event. That is the relay's own view of its work,
// whether or not the events reached the topic (the checker decides that).
// A range whose lease an instance holds without checkpointing (it crashed
// or paused) is not caught up until another takes it over.
func (rr *relayRun) caughtUp(ctx context.Context) bool {
	ranges, err := rr.feed.FeedRanges(ctx)
	if err != nil {
		return false
	}
	for _, fr := range ranges {
		id := relay.LeaseID(relayName, fr)
		continuation := ""
		if body, _, err := rr.mem.ReadDocument(ctx, id, id); err == nil {
			var l relay.Lease
			if json.Unmarshal(body, &l) != nil {
				return false
			}
			continuation = l.Continuation
		}
		for {
			docs, next, err := rr.feed.ReadChanges(ctx, fr, continuation, memstore.DefaultChangeFeedPageSize)
			if err != nil {
				return false
			}
			if len(docs) == 0 {
				break
			}
			if hasEvent(docs) {
				return false
			}
			continuation = next
		}
	}
	return true
}

// report returns the relay's figures.
func (rr *relayRun) report() RelayReport {
	sent, published := rr.out.snapshot()
	c := rr.out.topic.Counters()
	rr.mu.Lock()
	rep := rr.rep
	rr.mu.Unlock()
	rep.Enabled = true
	rep.Sent = len(sent)
	rep.TopicEnqueued, rep.DuplicatesDropped = c.Sent, c.DuplicatesDropped
	for _, n := range published {
		if n > 1 {
			rep.Republished += n - 1
		}
	}
	return rep
}

// relayInstance is one relay process: a relay.Relay whose feed, lease
// store and sender go through it, so that a SIGKILL can end every call at
// once.
type relayInstance struct {
	rr     *relayRun
	owner  string
	cancel context.CancelFunc
	killed atomic.Bool
	ended  atomic.Bool // a crash or a stop struck it
	reads  atomic.Uint64
	sends  atomic.Uint64
	starts atomic.Uint64 // batches begun (NewBatch calls)
}

// kill ends the process: no further call of it reaches anything, and it
// releases nothing; its leases stay until they expire.
func (in *relayInstance) kill() {
	in.killed.Store(true)
	in.cancel()
}

// relayFeed is the instance's change feed: memstore's, with the pause.
type relayFeed struct{ inst *relayInstance }

var _ relay.ChangeFeed = (*relayFeed)(nil)

func (f *relayFeed) FeedRanges(ctx context.Context) ([]string, error) {
	if f.inst.killed.Load() {
		return nil, errRelayKilled
	}
	return f.inst.rr.feed.FeedRanges(ctx)
}

// ReadChanges reads memstore's feed. RelayPause: after a read that
// returned events, the process stops for a lease duration plus the
// duplicate-detection window (a stop-the-world pause, a frozen VM), then
// goes on with the page it read: another instance has taken the range over
// meanwhile, so this one republishes after the window and its checkpoint
// is refused with 412.
func (f *relayFeed) ReadChanges(ctx context.Context, fr, continuation string, maxItems int) ([][]byte, string, error) {
	in := f.inst
	if in.killed.Load() {
		return nil, "", errRelayKilled
	}
	docs, next, err := in.rr.feed.ReadChanges(ctx, fr, continuation, maxItems)
	if err != nil || len(docs) == 0 {
		return docs, next, err
	}
	// One instance pauses at a time, so that another can take over.
	if hasEvent(docs) && in.rr.paused.CompareAndSwap(false, true) {
		if in.rr.strikes(faultRelayPause, in.owner, in.reads.Add(1)) {
			d := in.rr.cfg.RelayLeaseDuration + in.rr.cfg.DuplicateDetectionWindow + in.rr.cfg.RelayCallTimeout
			in.rr.hist.add("", "", "fault: relay %s pauses for %v after reading %d changes of range %s", in.owner, d, len(docs), fr)
			time.Sleep(d) // frozen: no context can end it
		}
		in.rr.paused.Store(false)
	}
	return docs, next, nil
}

// hasEvent reports whether docs hold an event: a pause after a page
// without one would republish nothing.
func hasEvent(docs [][]byte) bool {
	for _, d := range docs {
		var f struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(d, &f) == nil && f.Type == order.TypeEvent {
			return true
		}
	}
	return false
}

// relayLeases is the instance's lease store: the run's store, which also
// counts takeovers.
type relayLeases struct{ inst *relayInstance }

var _ idempotent.DocumentStore = (*relayLeases)(nil)

func (l *relayLeases) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	if l.inst.killed.Load() {
		return nil, "", errRelayKilled
	}
	return l.inst.rr.mem.ReadDocument(ctx, pk, id)
}

func (l *relayLeases) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	if l.inst.killed.Load() {
		return nil, errRelayKilled
	}
	return l.inst.rr.mem.CreateBatch(ctx, pk, docs)
}

func (l *relayLeases) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	in := l.inst
	if in.killed.Load() {
		return "", errRelayKilled
	}
	var before relay.Lease
	if body, _, err := in.rr.mem.ReadDocument(ctx, pk, d.ID); err == nil {
		_ = json.Unmarshal(body, &before)
	}
	etag, err := in.rr.mem.ReplaceDocument(ctx, pk, d, ifMatch)
	var after relay.Lease
	// A lease this instance did not hold, taken from an owner (expired) or
	// after a release (no owner, a continuation saved): a takeover. A fresh
	// lease has neither.
	if err == nil && json.Unmarshal(d.Body, &after) == nil && after.Type == relay.TypeLease && after.Owner == in.owner &&
		before.Owner != in.owner && (before.Owner != "" || before.Continuation != "") {
		in.rr.mu.Lock()
		in.rr.rep.Takeovers++
		expired := before.Owner != ""
		if expired {
			in.rr.rep.ExpiredTakeovers++
		}
		in.rr.mu.Unlock()
		in.rr.hist.add("", "", "relay %s took over range %s from %q (expired: %v)", in.owner, after.FeedRange, before.Owner, expired)
	}
	return etag, err
}

// relaySender is the instance's sender to the topic, with the crash, the
// graceful stop and the lost acknowledgement.
type relaySender struct{ inst *relayInstance }

var _ relay.Sender = (*relaySender)(nil)

// NewBatch begins a batch. RelayCrashBeforeSend: the instance is
// SIGKILLed here, after it read a page and before the topic sees the
// batch: whatever it has not checkpointed, another instance publishes once
// the lease expires.
func (s *relaySender) NewBatch(ctx context.Context) (relay.Batch, error) {
	in := s.inst
	if in.killed.Load() {
		return nil, errRelayKilled
	}
	if in.rr.strikes(faultRelayCrashBeforeSend, in.owner, in.starts.Add(1)) {
		in.rr.hist.add("", "", "fault: relay %s is SIGKILLed after reading a page, before sending a batch of it", in.owner)
		in.ended.Store(true)
		in.kill()
		return nil, errRelayKilled
	}
	return &simBatch{}, nil
}

// SendBatch sends b to the topic. RelayStop: the instance gets SIGTERM as
// it sends (its context is cancelled mid-page: it finishes the page,
// checkpoints and releases its leases). RelayCrash: it is SIGKILLed right
// after the topic accepted the batch, before its checkpoint: the page is
// republished by whoever takes the range over once the lease expires.
// RelayLostAck: the batch is sent and its answer lost, so the relay sends
// the page again at its next poll, inside the duplicate-detection window.
// RelaySendFailure: the send fails before the topic sees the batch;
// nothing of it is published.
func (s *relaySender) SendBatch(ctx context.Context, b relay.Batch) error {
	in := s.inst
	if in.killed.Load() {
		return errRelayKilled
	}
	sb, ok := b.(*simBatch)
	if !ok {
		return fmt.Errorf("simulation: SendBatch of a %T", b)
	}
	n := in.sends.Add(1)
	if in.rr.strikes(faultRelaySendFailure, in.owner, n) {
		in.rr.hist.add("", "", "fault: relay %s's send of a batch of %d fails before the topic sees it", in.owner, len(sb.ms))
		return errSendFailed
	}
	if in.rr.strikes(faultRelayStop, in.owner, n) {
		in.rr.hist.add("", "", "fault: relay %s gets SIGTERM while sending a batch of %d", in.owner, len(sb.ms))
		in.ended.Store(true)
		in.cancel()
	}
	if err := in.rr.out.send(ctx, in.owner, sb.ms); err != nil {
		return err
	}
	if in.rr.strikes(faultRelayCrash, in.owner, n) {
		in.rr.hist.add("", "", "fault: relay %s is SIGKILLed after sending a batch of %d, before its checkpoint", in.owner, len(sb.ms))
		in.ended.Store(true)
		in.kill()
		return errRelayKilled
	}
	if in.rr.strikes(faultRelayLostAck, in.owner, n) {
		in.rr.hist.add("", "", "fault: relay %s loses the answer to a batch of %d", in.owner, len(sb.ms))
		return errLostAck
	}
	return nil
}

// simBatch is a message batch for the topic model: as an
// *azservicebus.MessageBatch, it refuses a message that would take it past
// the batch size with azservicebus.ErrMessageTooLarge.
type simBatch struct {
	ms    []sbqueue.Message
	bytes int
}

var _ relay.Batch = (*simBatch)(nil)

func (b *simBatch) AddMessage(m *azservicebus.Message, _ *azservicebus.AddMessageOptions) error {
	sm := sbqueue.Message{Body: m.Body, ApplicationProperties: maps.Clone(m.ApplicationProperties)}
	size := len(m.Body) + 64 // the AMQP envelope, roughly
	for _, p := range []struct {
		dst *string
		src *string
	}{{&sm.MessageID, m.MessageID}, {&sm.Subject, m.Subject}, {&sm.ContentType, m.ContentType}, {&sm.CorrelationID, m.CorrelationID}} {
		if p.src != nil {
			*p.dst = *p.src
			size += len(*p.src)
		}
	}
	for k, v := range m.ApplicationProperties {
		size += len(k) + len(fmt.Sprint(v))
	}
	if b.bytes+size > maxBatchBytes {
		return azservicebus.ErrMessageTooLarge
	}
	b.ms = append(b.ms, sm)
	b.bytes += size
	return nil
}

func (b *simBatch) NumMessages() int32 { return int32(len(b.ms)) }
