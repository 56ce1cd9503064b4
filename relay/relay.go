package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// ChangeFeed is the change feed of a container, read one feed range at a
// time. *memstore.ChangeFeed (the model) and *cosmosstore.ChangeFeed (Cosmos
// DB), returned by the stores' ChangeFeed methods, implement it.
// Implementations must be safe for concurrent use.
type ChangeFeed interface {
	// FeedRanges returns the container's feed ranges, which together cover
	// every partition key value once. Each is a string of the characters
	// [A-Za-z0-9._-] that ReadChanges accepts.
	FeedRanges(ctx context.Context) ([]string, error)
	// ReadChanges returns up to maxItems documents of feedRange changed
	// after continuation ("" is the beginning of the feed), each in its
	// latest version, and the continuation that follows them. No documents
	// means nothing changed since continuation; next is then still a
	// continuation to pass on (never "" once one was given). Documents of
	// one partition key value come in the order of their changes; nothing
	// is promised across partition key values.
	ReadChanges(ctx context.Context, feedRange, continuation string, maxItems int) (docs [][]byte, next string, err error)
}

// Batch is the part of *azservicebus.MessageBatch the relay uses.
type Batch interface {
	AddMessage(m *azservicebus.Message, o *azservicebus.AddMessageOptions) error
	NumMessages() int32
}

var _ Batch = (*azservicebus.MessageBatch)(nil)

// Sender makes and sends message batches to the topic. ServiceBusSender
// adapts *azservicebus.Sender; tests use a fake, since a MessageBatch can
// only be made by a connected sender. AddMessage of a Batch returns
// azservicebus.ErrMessageTooLarge when the message does not fit.
type Sender interface {
	NewBatch(ctx context.Context) (Batch, error)
	SendBatch(ctx context.Context, b Batch) error
}

// ServiceBusSender is the Sender of a real *azservicebus.Sender, made for the
// topic with Client.NewSender(topic, nil). It is safe for concurrent use as
// far as the SDK's sender is.
type ServiceBusSender struct{ s *azservicebus.Sender }

var _ Sender = (*ServiceBusSender)(nil)

// NewServiceBusSender returns the Sender of s.
func NewServiceBusSender(s *azservicebus.Sender) *ServiceBusSender { return &ServiceBusSender{s: s} }

// NewBatch returns a new batch as large as the topic accepts.
func (a *ServiceBusSender) NewBatch(ctx context.Context) (Batch, error) {
	b, err := a.s.NewMessageBatch(ctx, nil)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// SendBatch sends b, which must come from NewBatch.
func (a *ServiceBusSender) SendBatch(ctx context.Context, b Batch) error {
	mb, ok := b.(*azservicebus.MessageBatch)
	if !ok {
		return fmt.Errorf("relay: SendBatch of a %T, not a batch from NewBatch", b)
	}
	return a.s.SendMessageBatch(ctx, mb, nil)
}

// Defaults of Options.
const (
	DefaultLeaseDuration    = 30 * time.Second
	DefaultPollInterval     = time.Second
	DefaultPageSize         = 100
	DefaultMaxBatchMessages = 100
	DefaultCallTimeout      = 5 * time.Second
	// DefaultCheckpointInterval is the default of
	// Options.CheckpointInterval: at most one checkpoint a second per
	// feed range, 0.03 per event at 33 events/s.
	DefaultCheckpointInterval = time.Second
	// DefaultLeasePartitionKeyPath is the partition key path of a
	// leases container of the relay's own: the lease's id.
	DefaultLeasePartitionKeyPath = "/id"
)

// Options configures a Relay. The zero value of every field but Name means
// its default.
type Options struct {
	// Name names the relay: its lease documents are LeaseID(Name, range),
	// so every instance of one relay shares it. See ValidateName.
	Name string
	// Owner names this instance in the leases it holds; empty means the
	// host name and a random suffix. Two instances must not share one.
	Owner string
	// LeaseDuration is how long a lease stays this instance's without a
	// renewal; it is renewed every LeaseDuration/3. At least 3*CallTimeout.
	LeaseDuration time.Duration
	// PollInterval is the pause between two polls while the feed is idle,
	// and the longest: Run polls again at once after a poll that published
	// events or read a full page, and backs off from PollInterval/32 to
	// PollInterval while polls find nothing (see Run).
	PollInterval time.Duration
	// PageSize is the most documents one read of the change feed returns.
	PageSize int
	// MaxBatchMessages is the most messages one batch carries; a batch is
	// also sent when the next message does not fit it.
	MaxBatchMessages int
	// CallTimeout bounds every call to the feed, the lease store and the
	// sender.
	CallTimeout time.Duration
	// CheckpointInterval is the least time between two checkpoints of one
	// feed range (by Now). A page's continuation is checkpointed only
	// after its events were published, at the first poll at least
	// CheckpointInterval after the range's last checkpoint: at once for
	// the first events after a quiet spell, then at most once per
	// interval while events keep coming, however many pages they take.
	// What was published and not yet checkpointed is saved by the next
	// checkpoint, renewal or release; after a crash it is republished
	// (at most about CheckpointInterval+PollInterval of events), which
	// the topic's duplicate detection and the consumers' inbox markers
	// absorb. Longer means fewer lease writes and more republished after
	// a crash.
	CheckpointInterval time.Duration
	// Now is the clock of lease expiry; nil means time.Now.
	Now func() time.Time
	// Logger receives the relay's log; nil means slog.Default().
	Logger *slog.Logger
	// Hooks are called as the relay works, for metrics and health; the
	// zero value calls nothing.
	Hooks Hooks
	// Events says which documents of the feed are events and how one
	// becomes a message; the zero value reads the generic event shape
	// (see EventFormat).
	Events EventFormat
	// LeasePartitionKeyPath is the partition key path of the container
	// that holds the lease documents, a top-level field such as "/pk":
	// every lease document carries its id, which is also its partition
	// key value, in that field. "" means "/id", the path of a leases
	// container of the relay's own (as Cosmos DB's change feed processor
	// uses), where the id is the partition key and no field is added.
	LeasePartitionKeyPath string
}

// Stats counts what a Relay did. Published counts every message sent,
// republished ones included.
type Stats struct {
	Published     int64 // messages sent to the topic
	Batches       int64 // batches sent
	Skipped       int64 // documents that are not events
	Unpublishable int64 // events that no send could carry (logged at error)
	Checkpoints   int64 // checkpoints written
	Acquired      int64 // leases acquired
	Lost          int64 // leases found taken by another instance (412 or another owner)
	Reclaimed     int64 // leases acquired after another instance's expired (of Acquired)
}

// Relay publishes the outbox events of a change feed to a topic. Make one
// with New; drive it with Run, or with Step calls in tests.
type Relay struct {
	feed   ChangeFeed
	leases idempotent.DocumentStore
	sender Sender
	o      Options
	log    *slog.Logger
	// fixedPoll makes Run wait PollInterval after every poll but a full
	// page, as earlier versions did; only tests set it, to compare.
	fixedPoll bool

	leaseKey string // the lease documents' partition key field; "id" adds none

	ranges  []string          // from the manifest; nil until loaded
	owned   map[string]*lease // feed range -> lease this instance holds
	unfence bool              // the store returned an empty ETag: leases are not fenced

	published, batches, skipped, unpublishable, checkpoints, acquired, lost, reclaimed atomic.Int64
}

// New returns a relay reading feed, keeping its leases in leases and
// publishing to sender, or an error naming what is wrong with o.
func New(feed ChangeFeed, leases idempotent.DocumentStore, sender Sender, o Options) (*Relay, error) {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	if o.MaxBatchMessages == 0 {
		o.MaxBatchMessages = DefaultMaxBatchMessages
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Owner == "" {
		o.Owner = defaultOwner()
	}
	o.Events = o.Events.withDefaults()
	if o.LeasePartitionKeyPath == "" {
		o.LeasePartitionKeyPath = DefaultLeasePartitionKeyPath
	}
	var errs []error
	if feed == nil || leases == nil || sender == nil {
		errs = append(errs, errors.New("relay: New needs a change feed, a lease store and a sender"))
	}
	if err := ValidateName(o.Name); err != nil {
		errs = append(errs, err)
	}
	if o.PollInterval < 0 || o.PageSize < 1 || o.MaxBatchMessages < 1 || o.CallTimeout < 0 || o.CheckpointInterval < 0 {
		errs = append(errs, fmt.Errorf("relay: poll interval %v, page size %d, batch size %d, call timeout %v and checkpoint interval %v must be positive",
			o.PollInterval, o.PageSize, o.MaxBatchMessages, o.CallTimeout, o.CheckpointInterval))
	}
	if o.LeaseDuration < 3*o.CallTimeout {
		errs = append(errs, fmt.Errorf("relay: lease duration %v is below 3 call timeouts (%v): a renewal could not finish before the lease expires",
			o.LeaseDuration, 3*o.CallTimeout))
	}
	leaseKey, err := leaseKeyField(o.LeasePartitionKeyPath)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Relay{feed: feed, leases: leases, sender: sender, o: o, log: o.Logger.With("relay", o.Name, "owner", o.Owner),
		leaseKey: leaseKey, owned: make(map[string]*lease)}, nil
}

// defaultOwner is the host name and a random suffix.
func defaultOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	if host == "" {
		host = "relay"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// ValidateName reports whether name can name a relay: 1 to 64 characters of
// [A-Za-z0-9._-], so that every lease id is a legal Cosmos DB id and ':'
// separates its parts unambiguously.
func ValidateName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("relay: name %q is not 1 to 64 characters", name)
	}
	for i := 0; i < len(name); i++ {
		if !idChar(name[i]) {
			return fmt.Errorf("relay: name %q: character %q at offset %d is not one of A-Z a-z 0-9 . _ -", name, name[i], i)
		}
	}
	return nil
}

func idChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Owned returns the feed ranges whose leases this instance holds.
func (r *Relay) Owned() []string {
	out := make([]string, 0, len(r.owned))
	for _, fr := range r.ranges {
		if r.owned[fr] != nil {
			out = append(out, fr)
		}
	}
	return out
}

// Stats returns what the relay did so far. It is safe to call from any
// goroutine.
func (r *Relay) Stats() Stats {
	return Stats{Published: r.published.Load(), Batches: r.batches.Load(), Skipped: r.skipped.Load(),
		Unpublishable: r.unpublishable.Load(), Checkpoints: r.checkpoints.Load(), Acquired: r.acquired.Load(), Lost: r.lost.Load(), Reclaimed: r.reclaimed.Load()}
}

// Run publishes until ctx ends, then finishes the page in flight (its
// batches, each call bounded by CallTimeout), releases every lease it holds
// with the continuation it published up to (its last checkpoint), and
// returns nil, or the error of a release. A range whose read, send or lease
// write fails is logged and retried at the next poll.
//
// Run polls at once when it starts, and again at once while a poll returns
// a full page. After a poll that published events it waits PollInterval/32,
// and so after each of the next three polls that find nothing; from the
// fourth in a row it waits twice as long as the last time, up to
// PollInterval, which it keeps while the feed stays idle (with the default:
// 31.25 ms four times, then 62.5 ms, 125 ms, …, 1 s). So the events of its
// first second are found within the first waits, an idle relay reads each
// range once per PollInterval, and a relay under a steady trickle reads
// about once per PollInterval/32, each read publishing what the last wait
// let accumulate.
// Its own lease writes (which publish no events) never shorten the wait. A
// poll that failed waits as one that found nothing, even if it sent some
// batches before it failed, so that a page is not republished in a loop.
//
// Checkpoints follow Options.CheckpointInterval, never before the events
// they cover were published.
func (r *Relay) Run(ctx context.Context) error {
	work := context.WithoutCancel(ctx)
	r.log.Info("relay starting", "lease_duration", r.o.LeaseDuration.String(), "poll_interval", r.o.PollInterval.String())
	t := time.NewTimer(0)
	defer t.Stop()
	var wait time.Duration // the first poll at once, the backoff from its start
	quiet := 0             // polls in a row that found nothing (or failed)
	for {
		select {
		case <-ctx.Done():
			err := r.Release(work)
			r.log.Info("relay stopped", "cause", context.Cause(ctx).Error(), "published", r.published.Load())
			return err
		case <-t.C:
		}
		before := r.published.Load()
		busy, err := r.step(work, ctx.Done())
		// A poll that failed is no sign of work, even if it sent some
		// batches: retrying it at once could republish them in a loop.
		published := err == nil && r.published.Load() > before
		if busy || published {
			quiet = 0
		} else {
			quiet++
		}
		wait = r.nextWait(wait, quiet, busy, published)
		t.Reset(wait)
	}
}

// pollBackoffSteps is how many doublings take Run's wait after a poll that
// found work back to PollInterval: the first wait is PollInterval>>5.
const pollBackoffSteps = 5

// pollHold is how many polls in a row may find nothing before Run's wait
// grows past the first: a trickle whose next event is a little late is
// still found within the first wait.
const pollHold = 4

// nextWait returns Run's wait before the next poll, given the last wait, how
// many polls in a row found nothing (quiet, this one included) and whether
// the poll just made returned a full page (busy) or published events
// without an error: none after a full page; PollInterval>>5 after events
// and while fewer than pollHold polls in a row found nothing; then the last
// wait doubled, at most PollInterval. With fixedPoll set it is the rule of
// earlier versions: none after a full page, else PollInterval.
func (r *Relay) nextWait(last time.Duration, quiet int, busy, published bool) time.Duration {
	first := max(r.o.PollInterval>>pollBackoffSteps, time.Nanosecond)
	switch {
	case busy:
		return 0
	case r.fixedPoll:
		return r.o.PollInterval
	case published, quiet < pollHold, last == 0:
		return first
	case last >= r.o.PollInterval/2:
		return r.o.PollInterval
	}
	return 2 * last
}

// Step is one poll of every feed range: it acquires the leases it can,
// renews those due, and for each range it holds reads one page of changes,
// publishes its events and, once Options.CheckpointInterval has passed
// since the range's last checkpoint, checkpoints what it published. It returns the errors it met,
// which it also logged; a failed range is retried by the next Step. Step
// must not be called concurrently with itself or Run.
func (r *Relay) Step(ctx context.Context) error {
	_, err := r.step(ctx, ctx.Done())
	return err
}

// step is Step, stopping between ranges once stop is closed. busy reports
// that a range returned a full page, so more may be waiting.
func (r *Relay) step(ctx context.Context, stop <-chan struct{}) (busy bool, err error) {
	waiting := 0
	defer func() {
		if r.o.Hooks.Stepped != nil {
			r.o.Hooks.Stepped(StepReport{Ranges: len(r.ranges), Owned: r.Owned(), Waiting: waiting, Err: err})
		}
	}()
	if r.ranges == nil {
		if err := r.loadManifest(ctx); err != nil {
			r.log.Warn("cannot read or write the relay's manifest of feed ranges", "error", err)
			return false, err
		}
	}
	var errs []error
	for _, fr := range r.ranges {
		select {
		case <-stop:
			return false, errors.Join(errs...)
		default:
		}
		full, err := r.stepRange(ctx, fr)
		if err != nil {
			r.log.Warn("feed range step failed; retried at the next poll", "feed_range", fr, "error", err)
			errs = append(errs, fmt.Errorf("feed range %s: %w", fr, err))
		} else if r.owned[fr] == nil {
			waiting++ // another instance holds it
		}
		busy = busy || full
	}
	return busy, errors.Join(errs...)
}

// stepRange acquires or renews the lease of fr, then reads and publishes
// one page, and checkpoints what was published once a checkpoint is due.
// full reports a full page.
func (r *Relay) stepRange(ctx context.Context, fr string) (full bool, err error) {
	l := r.owned[fr]
	if l == nil {
		if l, err = r.acquire(ctx, fr); l == nil || err != nil {
			return false, err
		}
		r.owned[fr] = l
	}
	if r.o.Now().After(l.renewAt) {
		if err := r.renew(ctx, fr, l); err != nil {
			return false, err
		}
	}
	docs, next, err := r.readChanges(ctx, fr, l.published)
	if err != nil {
		return false, fmt.Errorf("read the change feed: %w", err)
	}
	if r.o.Hooks.Read != nil {
		if len(docs) < r.o.PageSize {
			r.o.Hooks.Read(fr, 0)
		} else if d, ok := lag(docs, r.o.Events.TimeField, r.o.Now()); ok {
			r.o.Hooks.Read(fr, d)
		}
	}
	if len(docs) == 0 {
		if next != "" {
			l.published = next // nothing to publish; saved with the next write
		}
		return false, r.checkpointIfDue(ctx, fr, l)
	}
	events, err := r.publish(ctx, fr, docs)
	if err != nil {
		// Not published in full, so not checkpointed: the next Step
		// reads the page again and republishes what this one sent.
		return false, err
	}
	if next == "" {
		return false, fmt.Errorf("the change feed returned %d documents and no continuation", len(docs))
	}
	// Only now, with every event of the page accepted by the topic, may
	// the continuation past it be saved.
	l.published = next
	if events > 0 {
		l.unsaved = true
	}
	if err := r.checkpointIfDue(ctx, fr, l); err != nil {
		return false, err
	}
	return len(docs) >= r.o.PageSize, nil
}

// checkpointIfDue checkpoints l's published continuation if events were
// published since its last checkpoint and CheckpointInterval has passed
// since then.
func (r *Relay) checkpointIfDue(ctx context.Context, fr string, l *lease) error {
	if !l.unsaved || r.o.Now().Before(l.savedAt.Add(r.o.CheckpointInterval)) {
		return nil
	}
	return r.checkpoint(ctx, fr, l)
}

func (r *Relay) readChanges(ctx context.Context, fr, continuation string) ([][]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	defer cancel()
	return r.feed.ReadChanges(ctx, fr, continuation, r.o.PageSize)
}

// publish sends the events among docs in batches, in the order of docs, and
// returns how many it sent. On error, some may have been sent.
func (r *Relay) publish(ctx context.Context, fr string, docs [][]byte) (int, error) {
	var b Batch
	sent := 0
	flush := func() error {
		if b == nil || b.NumMessages() == 0 {
			return nil
		}
		n := int(b.NumMessages())
		cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
		defer cancel()
		if err := r.sender.SendBatch(cctx, b); err != nil {
			return fmt.Errorf("send a batch of %d events: %w", n, err)
		}
		b = nil
		sent += n
		r.published.Add(int64(n))
		r.batches.Add(1)
		if r.o.Hooks.Published != nil {
			r.o.Hooks.Published(fr, n)
		}
		return nil
	}
	newBatch := func() error {
		cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
		defer cancel()
		nb, err := r.sender.NewBatch(cctx)
		if err != nil {
			return fmt.Errorf("new message batch: %w", err)
		}
		b = nb
		return nil
	}
	for _, doc := range docs {
		m, head, ok := r.message(fr, doc)
		if !ok {
			continue
		}
		if b == nil {
			if err := newBatch(); err != nil {
				return sent, err
			}
		}
		err := b.AddMessage(m, nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) && b.NumMessages() > 0 {
			if err := flush(); err != nil {
				return sent, err
			}
			if err := newBatch(); err != nil {
				return sent, err
			}
			err = b.AddMessage(m, nil)
		}
		if errors.Is(err, azservicebus.ErrMessageTooLarge) {
			r.unpublishable.Add(1)
			r.log.Error("event larger than the topic accepts: not published", "feed_range", fr, "partition_key", head.Key,
				"message_id", head.ID, "bytes", len(m.Body))
			continue
		}
		if err != nil {
			return sent, fmt.Errorf("add event %s to a batch: %w", head.ID, err)
		}
		if int(b.NumMessages()) >= r.o.MaxBatchMessages {
			if err := flush(); err != nil {
				return sent, err
			}
		}
	}
	return sent, flush()
}
