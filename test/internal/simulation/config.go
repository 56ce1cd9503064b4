package simulation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// Config configures a run. The zero value of each field selects its
// default, except Faults and Seed, whose zero values mean no faults and
// seed 0, and the Disable fields, whose zero values run every part.
//
// Every duration is on the clock the run uses: time.Now and Go's timers.
// Inside a testing/synctest bubble that is the bubble's virtual clock, so
// the defaults (30 s locks, a 10 minute duplicate-detection window, a key
// retention of an hour, resubmissions hours later) cost no wall time; on
// the wall clock use a compressed scale (see CompressedTimeScale).
type Config struct {
	Orders      int        // orders to send. Default 1000.
	Workers     int        // competing workers on each queue. Default 3.
	Concurrency int        // handlers per worker. Default 8.
	Seed        uint64     // plans the orders and every fault
	Faults      FaultRates // see FaultRates; DefaultFaultRates exercises every fault

	// StatusChanges is the fraction of valid orders that get one to three
	// status changes (versions 2 to 4). Default 0.3.
	StatusChanges float64

	// The parts of the pattern beyond writing orders, all on by default:
	// the payment capture (an in-process payments service, charged once
	// per order through its idempotency key), the status changes, and two
	// inbox consumers ("loyalty" and "audit") on subscriptions of their own
	// of the topic the outbox relay publishes to (DisableInbox turns the
	// relay off too).
	DisablePayments      bool
	DisableStatusChanges bool
	DisableInbox         bool

	// Audit runs orderctl audit's checks (package order/audit) on the final
	// store and reports them in Report.Audit.
	Audit bool

	// OrderDelay, if positive, is how long the producer waits between the
	// status changes it sends before an order (FaultRates.OutOfOrder) and
	// the order itself. Longer than the abandons of MaxDeliveryCount
	// deliveries take (about MaxDeliveryCount × LockDuration/4), it leaves
	// those changes only the worker's scheduled retries (see
	// worker.Options.Scheduler); the checks then hold that none was
	// dead-lettered for want of its order. Default 0.
	OrderDelay time.Duration

	// MaxFaultsPerMessage bounds the faults injected into one order's
	// messages (Outage aside), so that every message reaches a clean
	// delivery before MaxDeliveryCount. A fault costs a message at most two
	// deliveries, and a status change may be delivered once before its
	// order exists, so it must be at most (MaxDeliveryCount-2)/2, the
	// default. With dependency outages (FaultRates.StoreOutage and the
	// others), which cost a message up to a delivery per worker and one
	// more (see outageSlack), it must be at most
	// (MaxDeliveryCount-3-Workers)/2, the default then (at least 1).
	MaxFaultsPerMessage int

	// The queues' properties. Defaults: 30s, 10, 10m. The workers are
	// configured with the same lock duration, as cmd/orderworker does.
	LockDuration             time.Duration
	MaxDeliveryCount         int
	DuplicateDetectionWindow time.Duration

	// ShutdownGrace is the workers' shutdown grace period. Default 30s, the
	// worker's default.
	ShutdownGrace time.Duration

	// KeyRetention is how long the payments service remembers an
	// idempotency key after its charge. Default 1h.
	KeyRetention time.Duration
	// BreakerMinBackoff and BreakerMaxBackoff are the circuit breakers'
	// waits between probes while open (breaker.Options). Defaults: the
	// breaker's, as cmd/orderworker uses them (1s and 1m, against its
	// 1 minute locks); CompressedTimeScale scales them with the lock.
	BreakerMinBackoff, BreakerMaxBackoff time.Duration
	// BreakerTrialBackoff and BreakerMaxTrialBackoff are the circuit
	// breakers' waits before they let a message through after their spread
	// rule opened them (breaker.Options.TrialBackoff and MaxTrialBackoff).
	// Defaults: 10 and 40 lock durations, the ratio cmd/orderworker has
	// (the breaker's 10 and 40 minutes against its 1 minute locks).
	BreakerTrialBackoff, BreakerMaxTrialBackoff time.Duration
	// RetryMaxDelay bounds the total delay of a message's scheduled
	// retries (worker.RetryOptions.MaxDelay). Default: the worker's, as
	// cmd/orderworker uses it (1 hour, 60 of its 1 minute locks);
	// CompressedTimeScale scales it with the lock.
	RetryMaxDelay time.Duration

	// OutageDuration is how long a dependency outage lasts (see
	// FaultRates.StoreOutage). Default 10 lock durations: longer than the
	// MaxDeliveryCount deliveries of a message take with the worker's
	// retry backoff (at most a quarter lock each), so that a worker that
	// keeps receiving through it dead-letters what it receives, and shorter
	// than StallTimeout.
	OutageDuration time.Duration

	// ResubmitEarly and ResubmitLate are when the operator resubmits
	// dead-lettered messages (see FaultRates.ResubmitEarly): that long
	// after the queues drained. ResubmitEarly must exceed the
	// duplicate-detection window (a resubmission inside it is dropped);
	// ResubmitLate must exceed KeyRetention, so that every key charged
	// before it is forgotten. Defaults: 2 × DuplicateDetectionWindow, and
	// KeyRetention + DuplicateDetectionWindow.
	ResubmitEarly time.Duration
	ResubmitLate  time.Duration

	// The outbox relay's timers, as cmd/orderrelay's RELAY_LEASE_DURATION,
	// RELAY_POLL_INTERVAL and RELAY_CALL_TIMEOUT. Defaults: the relay's,
	// relay.DefaultLeaseDuration, DefaultPollInterval and
	// DefaultCallTimeout.
	RelayLeaseDuration time.Duration
	RelayPollInterval  time.Duration
	RelayCallTimeout   time.Duration

	// MarkerTTL is the time-to-live of the inbox markers.
	// Default: the minimum retention for the queues' settings,
	// order.RedeliveryHorizon.MinRetention. A shorter TTL is accepted, to
	// show what it breaks. (The inbox consumers' queues get no
	// resubmissions.)
	MarkerTTL time.Duration

	// Consumer builds the order consumer under test, once per worker.
	// Default: DefaultConsumer, the project's consumer. Tests plug in
	// broken consumers to show that the checker catches them.
	Consumer func(Env) worker.Handler

	// InboxConsumer builds the inbox consumer of the subscription named
	// subscription, once per worker. Default: DefaultInboxConsumer.
	InboxConsumer func(subscription string, e Env) worker.Handler

	// RelaySender, if not nil, wraps the sender of every relay instance.
	// Tests plug in broken relays to show that the checker catches them.
	RelaySender func(relay.Sender) relay.Sender

	// Gate, if not nil, wraps the circuit breaker of every worker (its
	// worker.Options.Gate). Tests plug in broken breakers to show that the
	// checker catches them.
	Gate func(worker.Gate) worker.Gate

	// Scheduler, if not nil, wraps the Scheduler of every order writer (the
	// queue model's sender, with FaultRates.ScheduleFailure). Tests plug in
	// broken schedulers to show that the checker catches them.
	Scheduler func(worker.Scheduler) worker.Scheduler

	// Logger receives the workers' logs. Default: discarded.
	Logger *slog.Logger

	// Telemetry, if set, is every worker's telemetry, with Queue set to
	// the worker's queue ("orders", or an inbox consumer's name), and
	// Names, when empty, cmd/orderworker's (telemetry.WorkerNames).
	// Default: none, as `go run ./test/simulate` runs, which exports
	// nothing.
	Telemetry *otelworker.Options

	// ProgressInterval is how often Run reports progress. Default 100ms.
	ProgressInterval time.Duration

	// StoreLatency and PaymentLatency are how long every store call and
	// every request to the payments service takes, so that handlers take
	// time and deliveries overlap as they do against real services.
	// Defaults 5ms and 20ms; negative means none.
	StoreLatency   time.Duration
	PaymentLatency time.Duration

	// StallTimeout ends a run in which nothing is settled for this long
	// while messages remain, which can only be a bug. Default the longer
	// of 20 lock durations (a lock lapsing) and BreakerMaxTrialBackoff
	// plus 10 lock durations: the longest legitimate quiet spell is a
	// circuit breaker that its spread rule opened waiting for its next
	// trial while every worker's breaker is open.
	StallTimeout time.Duration
	// DelayProbeInterval is how often the run measures its own scheduling
	// delay (see TimingReport). Default a fiftieth of the lock duration;
	// negative turns the probe off.
	DelayProbeInterval time.Duration
	// Stall, if not nil, is called at each StallPoint with the order
	// involved ("" at the probe): whatever it blocks for, the run is
	// delayed at that point, as by a machine too busy to run the process.
	// Tests use it to force a scheduling delay without load; nil in real
	// runs.
	Stall func(p StallPoint, orderID string)

	// TimeLimit bounds the whole run. Default: the planned waits (the
	// duplicate-detection window and both resubmission delays) plus 100
	// lock durations per delivery a message may have, plus the total
	// delay of its scheduled retries (RetryMaxDelay; the worker's 1 hour
	// when zero) for the message and each of its two resubmissions: a
	// circuit breaker's trials move a failing message to scheduled copies,
	// each of which starts its deliveries again.
	TimeLimit time.Duration
}

// CompressedTimeScale returns c with the time scale that `go run
// ./test/simulate` uses on the wall clock: 1 s locks (the shortest Service Bus
// allows), a 1 s duplicate-detection window, a 3 s key retention, and
// resubmissions 1.5 s and 3.5 s after the queues drained; the worker's shutdown
// grace is 2 s; store calls take 1 ms and payment requests 3 ms; the relay's
// leases last 3 s, it polls every 100 ms and its calls time out after 1 s; the
// circuit breakers wait 20 ms to 1 s between probes and a message's scheduled
// retries end within 60 s (the breaker's and the worker's defaults are 1 s to 1
// minute and 1 hour against production's 1 minute locks). Fields
// already set are kept. It is ScaledTimeScale(1).
func (c Config) CompressedTimeScale() Config { return c.ScaledTimeScale(1) }

// ScaledTimeScale returns c with the compressed time scale multiplied by
// factor (at least 1): a run on a busy machine at factor 5 has 5 s locks and
// a 15 s key retention, and takes about 5 times as long. Fields already set
// are kept.
func (c Config) ScaledTimeScale(factor float64) Config {
	factor = max(factor, 1)
	def := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = time.Duration(float64(v) * factor)
		}
	}
	def(&c.LockDuration, time.Second)
	def(&c.DuplicateDetectionWindow, time.Second)
	def(&c.KeyRetention, 3*time.Second)
	def(&c.ResubmitEarly, 1500*time.Millisecond)
	if c.ResubmitLate == 0 {
		c.ResubmitLate = c.KeyRetention + time.Duration(float64(500*time.Millisecond)*factor)
	}
	def(&c.ShutdownGrace, 2*time.Second)
	def(&c.StoreLatency, time.Millisecond)
	def(&c.PaymentLatency, 3*time.Millisecond)
	def(&c.RelayLeaseDuration, 3*time.Second)
	def(&c.RelayPollInterval, 100*time.Millisecond)
	def(&c.RelayCallTimeout, time.Second)
	def(&c.BreakerMinBackoff, 20*time.Millisecond)
	def(&c.BreakerMaxBackoff, time.Second)
	def(&c.RetryMaxDelay, time.Minute)
	return c
}

// Env is what a consumer under test is built from.
type Env struct {
	// Store is the store, with the plan's store faults. It is shared by
	// every consumer of the run, as one Cosmos DB container is.
	Store Store
	// Orders is the same store as the order Processor's Store: its batches
	// count as order writes and its reads as order reads, with the faults
	// of those. Nil: Store.
	Orders idempotent.Store
	// Now is the clock: time.Now, which the queues' locks follow too.
	Now func() time.Time
	// Payments is the gateway to the payments service, with the plan's
	// payment faults; nil when payments are disabled.
	Payments order.PaymentGateway
	// Lease is how long a payment claim protects a capture in progress:
	// the workers' message timeout, as cmd/orderworker passes it.
	Lease time.Duration
	// KeyRetention is how long the payments service remembers an
	// idempotency key after its charge.
	KeyRetention time.Duration
	// Owner names the worker, for payment records.
	Owner string
	// MarkerTTL is the inbox markers' time-to-live.
	MarkerTTL time.Duration
}

// DefaultConsumer returns the project's order consumer: an order.Processor
// that applies status changes and, unless e.Payments is nil, captures each
// accepted order's payment.
func DefaultConsumer(e Env) worker.Handler {
	opts := []order.Option{order.WithDocuments(e.Store)}
	if e.Payments != nil {
		opts = append(opts, order.WithPaymentOptions(order.PaymentOptions{
			Gateway: e.Payments, Lease: e.Lease, Owner: e.Owner, KeyRetention: e.KeyRetention,
		}))
	}
	orders := e.Orders
	if orders == nil {
		orders = e.Store
	}
	return order.NewProcessor(orders, e.Now, opts...)
}

// DefaultInboxConsumer returns the project's inbox consumer for a
// subscription: an order.InboxConsumer named after it.
func DefaultInboxConsumer(subscription string, e Env) worker.Handler {
	return &order.InboxConsumer{Name: subscription, Store: e.Store, MarkerTTL: e.MarkerTTL, Now: e.Now}
}

// inboxConsumers are the names of the inbox consumers' subscriptions.
var inboxConsumers = [...]string{"loyalty", "audit"}

// horizon returns the redelivery horizon of the inbox consumers' queues,
// which get no resubmissions.
func (c Config) horizon() order.RedeliveryHorizon {
	return order.RedeliveryHorizon{LockDuration: c.LockDuration, MaxDeliveryCount: c.MaxDeliveryCount, DuplicateDetectionWindow: c.DuplicateDetectionWindow}
}

func (c Config) withDefaults() Config {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Orders, 1000)
	def(&c.Workers, 3)
	def(&c.Concurrency, 8)
	def(&c.MaxDeliveryCount, sbqueue.DefaultMaxDeliveryCount)
	def(&c.MaxFaultsPerMessage, max((c.MaxDeliveryCount-2-c.Faults.outageSlack(c.Workers))/2, 1))
	defDur(&c.LockDuration, 30*time.Second)
	defDur(&c.DuplicateDetectionWindow, sbqueue.DefaultDuplicateDetectionWindow)
	defDur(&c.ShutdownGrace, 30*time.Second)
	defDur(&c.KeyRetention, time.Hour)
	defDur(&c.ResubmitEarly, 2*c.DuplicateDetectionWindow)
	defDur(&c.ResubmitLate, c.KeyRetention+c.DuplicateDetectionWindow)
	defDur(&c.ProgressInterval, 100*time.Millisecond)
	defDur(&c.StoreLatency, 5*time.Millisecond)
	defDur(&c.PaymentLatency, 20*time.Millisecond)
	defDur(&c.RelayLeaseDuration, relay.DefaultLeaseDuration)
	defDur(&c.RelayPollInterval, relay.DefaultPollInterval)
	defDur(&c.RelayCallTimeout, relay.DefaultCallTimeout)
	defDur(&c.BreakerTrialBackoff, 10*c.LockDuration)
	defDur(&c.BreakerMaxTrialBackoff, max(40*c.LockDuration, c.BreakerTrialBackoff))
	// A breaker opened by its spread rule waits up to MaxTrialBackoff
	// between trials, settling nothing meanwhile.
	defDur(&c.StallTimeout, max(20*c.LockDuration, c.BreakerMaxTrialBackoff+10*c.LockDuration))
	defDur(&c.OutageDuration, 10*c.LockDuration)
	defDur(&c.DelayProbeInterval, c.LockDuration/50)
	retries := c.RetryMaxDelay
	if retries == 0 {
		retries = time.Hour // worker.RetryOptions' default
	}
	defDur(&c.TimeLimit, c.DuplicateDetectionWindow+c.ResubmitEarly+c.ResubmitLate+
		time.Duration(100*c.MaxDeliveryCount)*c.LockDuration+3*retries)
	if c.StatusChanges == 0 {
		c.StatusChanges = 0.3
	}
	if c.MarkerTTL == 0 {
		c.MarkerTTL, _ = c.horizon().MinRetention()
	}
	if c.Consumer == nil {
		c.Consumer = DefaultConsumer
	}
	if c.InboxConsumer == nil {
		c.InboxConsumer = DefaultInboxConsumer
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Orders < 0:
		return fmt.Errorf("simulation: %d orders", c.Orders)
	case c.Workers < 1 || c.Workers > 64:
		return fmt.Errorf("simulation: %d workers is not between 1 and 64", c.Workers)
	case c.Concurrency < 1 || c.Concurrency > 5000:
		return fmt.Errorf("simulation: concurrency %d is not between 1 and 5000", c.Concurrency)
	case 2*c.MaxFaultsPerMessage+2+c.Faults.outageSlack(c.Workers) > c.MaxDeliveryCount:
		return fmt.Errorf("simulation: MaxFaultsPerMessage %d must be at most (MaxDeliveryCount %d - %d) / 2, or faults alone could dead-letter a message", c.MaxFaultsPerMessage, c.MaxDeliveryCount, 2+c.Faults.outageSlack(c.Workers))
	case c.LockDuration < time.Second || c.DuplicateDetectionWindow <= 0 || c.MarkerTTL < time.Second:
		return errors.New("simulation: the lock duration must be at least a second (the worker's minimum), the duplicate-detection window positive, and the marker TTL at least a second")
	case c.KeyRetention <= 0 || c.ShutdownGrace <= 0:
		return errors.New("simulation: the key retention and the shutdown grace must be positive")
	case c.ResubmitEarly <= c.DuplicateDetectionWindow:
		return fmt.Errorf("simulation: ResubmitEarly %v must exceed the duplicate-detection window %v, or the resubmissions are dropped as duplicates", c.ResubmitEarly, c.DuplicateDetectionWindow)
	case c.ResubmitLate <= c.KeyRetention:
		return fmt.Errorf("simulation: ResubmitLate %v must exceed the key retention %v", c.ResubmitLate, c.KeyRetention)
	case c.OutageDuration < 0 || c.OutageDuration >= c.StallTimeout:
		return fmt.Errorf("simulation: OutageDuration %v must be shorter than StallTimeout %v: nothing settles while the store is down", c.OutageDuration, c.StallTimeout)
	case c.OrderDelay < 0:
		return fmt.Errorf("simulation: OrderDelay %v is negative", c.OrderDelay)
	case !(c.StatusChanges >= 0 && c.StatusChanges <= 1):
		return fmt.Errorf("simulation: StatusChanges %v is not between 0 and 1", c.StatusChanges)
	}
	return c.Faults.Validate()
}

// workerOptions returns the options of every worker of the run: those
// cmd/orderworker's run passes (mirrored here, since a main package cannot
// be imported), with the queue's lock duration, the worker's default
// message timeout (80% of it), settle timeout and retry backoff, and the
// one-second return of prefetched messages at shutdown, its log keys, its
// circuit breaker and, with Config.Telemetry, its telemetry on queue,
// whose Receiver wraps r. Only the periodic summary is off. It returns the
// receiver to give the worker.
func (c Config) workerOptions(probe func(context.Context) error, queue string, r worker.Receiver, logger *slog.Logger) (worker.Options, worker.Receiver, error) {
	// As cmd/orderworker configures it; only the waits are scaled.
	bo := breaker.Options{Threshold: breakerThreshold, Probe: probe,
		Spread: breaker.SpreadFor(c.Concurrency), TrialLimit: breaker.TrialLimitFor(c.Concurrency),
		MinBackoff: c.BreakerMinBackoff, MaxBackoff: c.BreakerMaxBackoff,
		TrialBackoff: c.BreakerTrialBackoff, MaxTrialBackoff: c.BreakerMaxTrialBackoff}
	o := worker.Options{
		Concurrency:     c.Concurrency,
		LockDuration:    c.LockDuration,
		ShutdownGrace:   c.ShutdownGrace,
		SummaryInterval: -1,
		// As for *azservicebus.Receiver, which the queue model's receiver
		// stands for (its link credit included).
		ReceiveDrain: time.Second,
		// The scheduled retries' bounds are cmd/orderworker's, the
		// defaults; the Scheduler is set per worker (see scheduleRecorder).
		Retry:       worker.RetryOptions{MaxDelay: c.RetryMaxDelay},
		KeyAttr:     telemetry.WorkerKeyAttr,
		ResumedAttr: telemetry.WorkerResumedAttr,
	}
	if c.Telemetry != nil {
		to := *c.Telemetry
		to.Queue = queue
		if to.Names == (otelworker.Names{}) {
			to.Names = telemetry.WorkerNames()
		}
		t, err := otelworker.New(to)
		if err != nil {
			return worker.Options{}, nil, err
		}
		r, o.Hook = t.Receiver(r), t
		bo.OnChange = func(s breaker.State) { t.BreakerChanged(s.String(), s != breaker.Closed) }
	}
	b, err := breaker.New(bo, logger)
	if err != nil {
		return worker.Options{}, nil, err
	}
	o.Gate = b
	if c.Gate != nil {
		o.Gate = c.Gate(b)
	}
	return o, r, nil
}

// breakerThreshold is cmd/orderworker's: five consecutive deliveries failed
// by a dependency open the circuit breaker.
const breakerThreshold = 5
