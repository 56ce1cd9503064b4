package sbbroker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbbroker/internal/wire"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// The Service Bus emulator's well-known credentials, which the broker
// accepts by default.
const (
	DefaultKeyName = "RootManageSharedAccessKey"
	DefaultKey     = "SAS_KEY_VALUE"
)

// DefaultIdleTimeout is the idle time-out the broker announces when
// Options.IdleTimeout is zero.
const DefaultIdleTimeout = 60 * time.Second

// ErrBrokerClosed is returned by Serve after Close.
var ErrBrokerClosed = errors.New("sbbroker: broker closed")

// ErrUnknownEntity is returned by the fault controls for a queue or
// subscription that does not exist.
var ErrUnknownEntity = errors.New("sbbroker: unknown entity")

// Options configures a Broker. The zero value is usable.
type Options struct {
	// KeyName and Key are the shared access key the broker verifies put-token
	// signatures against. Empty values select DefaultKeyName and DefaultKey.
	KeyName, Key string
	// Logger receives connection-level events. Nil discards them.
	Logger *slog.Logger
	// IdleTimeout is announced in Open: a client sends a heartbeat at least
	// every IdleTimeout/2 and the broker drops a connection that stays silent
	// for IdleTimeout. Zero selects DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxMessageSize is the largest message a client may send, announced on
	// sender links (the SDK also uses it as its batch capacity). Zero selects
	// 256 KiB, the Service Bus standard tier limit.
	MaxMessageSize uint32
}

// Broker serves the AMQP endpoint of one sbqueue.Namespace.
type Broker struct {
	ns   *sbqueue.Namespace
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	faults    map[string]*dispositionFault
	drops     map[string]*Dropped
	wg        sync.WaitGroup
}

// Dropped counts what the broker took from senders of one queue or topic
// without enqueueing it, by reason.
type Dropped struct {
	// Duplicates were accepted (the sender saw success) and dropped by
	// duplicate detection: their MessageId was sent less than the queue's
	// or topic's window ago. A topic drops them before fan-out, so no
	// subscription got them. Service Bus drops them just as silently; the
	// broker also logs each one.
	Duplicates int64
	// Rejected sends failed, and the sender got the error: a MessageId over
	// MaxMessageIDLength, a body that does not decode, a message sent with a
	// scheduled enqueue time (schedule it with ScheduleMessages instead).
	Rejected int64
}

// Dropped returns, per queue or topic name (as created, whatever case the
// senders used), what the broker did not enqueue and why; entities with
// nothing dropped are absent. Safe for concurrent use.
func (b *Broker) Dropped() map[string]Dropped {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]Dropped, len(b.drops))
	for q, d := range b.drops {
		out[q] = *d
	}
	return out
}

// dropped records and logs one duplicate dropped by duplicate detection on
// the entity called name; kind, "queue" or "topic", is the log key.
func (b *Broker) dropped(kind, name, messageID string, window time.Duration) {
	b.mu.Lock()
	b.dropsFor(name).Duplicates++
	b.mu.Unlock()
	b.log.Info("duplicate dropped by duplicate detection: the sender was told it was accepted",
		kind, name, "message_id", messageID, "window", window.String())
}

// reject records and logs a refused send and returns its outcome.
func (b *Broker) reject(kind, name string, cond wire.Symbol, desc string) wire.Rejected {
	b.mu.Lock()
	b.dropsFor(name).Rejected++
	b.mu.Unlock()
	b.log.Warn("send rejected", kind, name, "condition", string(cond), "reason", desc)
	return wire.Rejected{Error: &wire.Error{Condition: cond, Description: desc}}
}

// dropsFor returns entity's counts, creating them. Requires b.mu.
func (b *Broker) dropsFor(entity string) *Dropped {
	d, ok := b.drops[entity]
	if !ok {
		d = &Dropped{}
		b.drops[entity] = d
	}
	return d
}

// dispositionFault is the injected misbehaviour for one entity's
// settlements.
type dispositionFault struct {
	delay time.Duration
	lose  int
}

// New returns a Broker for the queues and topics of ns. It does not listen until Serve
// is called.
func New(ns *sbqueue.Namespace, o Options) *Broker {
	if o.KeyName == "" {
		o.KeyName = DefaultKeyName
	}
	if o.Key == "" {
		o.Key = DefaultKey
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 256 * 1024
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Broker{
		ns:        ns,
		opts:      o,
		log:       log,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		faults:    make(map[string]*dispositionFault),
		drops:     make(map[string]*Dropped),
	}
}

// Serve accepts connections on l and serves each in its own goroutines
// until l fails or Close is called. It always returns a non-nil error:
// ErrBrokerClosed after Close.
func (b *Broker) Serve(l net.Listener) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		l.Close()
		return ErrBrokerClosed
	}
	b.listeners[l] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.listeners, l)
		b.mu.Unlock()
	}()
	for {
		nc, err := l.Accept()
		if err != nil {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if closed {
				return ErrBrokerClosed
			}
			return fmt.Errorf("sbbroker: accept: %w", err)
		}
		c := newConn(b, nc)
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			nc.Close()
			return ErrBrokerClosed
		}
		b.conns[c] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.wg.Done()
			c.serve()
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
		}()
	}
}

// ListenAndServe listens on the TCP address addr and calls Serve.
func (b *Broker) ListenAndServe(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sbbroker: %w", err)
	}
	return b.Serve(l)
}

// Start listens on the TCP address addr (such as "127.0.0.1:0") and serves
// it in a background goroutine until Close. When Start returns, Addr and
// ConnectionString report the listener's address.
func (b *Broker) Start(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sbbroker: %w", err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		l.Close()
		return ErrBrokerClosed
	}
	b.listeners[l] = struct{}{} // registered now, so Addr sees it at once
	b.mu.Unlock()
	go func() {
		if err := b.Serve(l); !errors.Is(err, ErrBrokerClosed) {
			b.log.Error("serving stopped", "addr", l.Addr().String(), "err", err)
		}
	}()
	return nil
}

// Addr returns the address of a listener Serve is using, or nil if there is
// none.
func (b *Broker) Addr() net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range b.listeners {
		return l.Addr()
	}
	return nil
}

// ConnectionString returns the emulator connection string for Addr, or ""
// when the broker is not listening.
func (b *Broker) ConnectionString() string {
	a := b.Addr()
	if a == nil {
		return ""
	}
	return ConnectionString(a.String(), b.opts.KeyName, b.opts.Key)
}

// ConnectionString formats the emulator connection string for a broker
// listening on addr (host:port) with the given key.
func ConnectionString(addr, keyName, key string) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true;", addr, keyName, key)
}

// Close stops every listener, drops every connection and waits for their
// goroutines to end. Locked messages keep their locks in the namespace.
func (b *Broker) Close() error {
	b.mu.Lock()
	b.closed = true
	for l := range b.listeners {
		l.Close()
	}
	for c := range b.conns {
		c.nc.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return nil
}

// DropConnections closes every client connection abruptly, as a network
// failure would, and returns how many it closed. Locks survive; the SDK
// reconnects on its next operation.
func (b *Broker) DropConnections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		c.nc.Close()
	}
	return len(b.conns)
}

// DetachReceivers detaches every receive link on entity (a queue name,
// "<queue>/$DeadLetterQueue", a subscription "<topic>/Subscriptions/<name>"
// or its dead-letter queue, case-insensitively) with
// amqp:link:detach-forced, as Service Bus does when it moves a link, and
// returns how many it detached. Locks
// survive, so the SDK settles messages received on those links through
// $management.
func (b *Broker) DetachReceivers(entity string) int {
	q, ok := b.ns.Queue(entity)
	if !ok {
		return 0
	}
	n := 0
	for _, c := range b.connections() {
		n += c.detachReceivers(q)
	}
	return n
}

// ExpireLocks makes every current lock on entity (any path DetachReceivers
// accepts) expire now, without waiting for the lock duration.
func (b *Broker) ExpireLocks(entity string) error {
	q, ok := b.ns.Queue(entity)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownEntity, entity)
	}
	q.ExpireLocks()
	return nil
}

// DelayDispositions makes the broker hold every settlement received on
// entity's receive links for d before applying and acknowledging it. Zero
// removes the delay.
func (b *Broker) DelayDispositions(entity string, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault(entity).delay = d
}

// LoseDispositions makes the broker discard the next n settlements received
// on entity's receive links, as if lost on the network: the settlement is
// not applied and never acknowledged, so the client's settle call blocks
// until its context ends and the lock later expires.
func (b *Broker) LoseDispositions(entity string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault(entity).lose = n
}

// fault returns the fault record of entity; names are case-insensitive,
// as in the namespace.
func (b *Broker) fault(entity string) *dispositionFault {
	key := strings.ToLower(entity)
	f := b.faults[key]
	if f == nil {
		f = new(dispositionFault)
		b.faults[key] = f
	}
	return f
}

// takeFault reports the delay to apply to one settlement on entity and
// whether to lose it, consuming one loss.
func (b *Broker) takeFault(entity string) (delay time.Duration, lose bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.faults[strings.ToLower(entity)]
	if f == nil {
		return 0, false
	}
	if f.lose > 0 {
		f.lose--
		return 0, true
	}
	return f.delay, false
}

func (b *Broker) connections() []*conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	cs := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		cs = append(cs, c)
	}
	return cs
}
