// Command sbbroker runs the Service Bus test broker standalone, so that the
// real orderproducer and orderworker (or any azservicebus program) can run
// locally without Docker or Azure.
//
// It creates the queues named by -queue and the topics (with their
// subscriptions) named by -topic, listens on -addr (loopback only, unless
// -allow-remote is given), prints the emulator connection string on stdout
// and logs to stderr. SIGINT or SIGTERM stops it; entity contents live in
// memory and are lost.
//
// Usage:
//
//	sbbroker [-addr 127.0.0.1:5672] [-queue orders[,other]]... [-topic order-events:loyalty,shipping]...
//	         [-lock-duration 1m] [-max-delivery-count 10] [-duplicate-detection-window 10m] [-ttl 336h]
//	         [-allow-unrealistic-timings]
//
// Environment variables SBBROKER_ADDR, SBBROKER_QUEUES and SBBROKER_TOPICS
// supply defaults for -addr, -queue and -topic (SBBROKER_TOPICS separates
// topics with ";", as in "order-events:loyalty,shipping;audit:all").
//
// Every queue and every subscription gets -lock-duration,
// -max-delivery-count and -dead-letter-on-expiration; every queue and every
// topic gets -duplicate-detection-window and -ttl (a topic detects
// duplicates before it copies a message to its subscriptions, as Service
// Bus does). -ttl defaults to 14 days, the time-to-live infra/bicep deploys,
// so that a received message reports a real ExpiresAt (EnqueuedTime +
// TimeToLive), as on Service Bus, whose entities always have one.
//
// -lock-duration and -duplicate-detection-window take only what Service Bus
// accepts (a lock of 5 s to 5 min, a window of 20 s to 7 days, or 0 for
// none); -allow-unrealistic-timings admits shorter ones (still positive)
// for a stack run at a compressed scale, such as scripts/local.sh, whose
// 5 s window the Service Bus emulator also accepts.
//
// Duplicate detection drops a resend silently, as Service Bus does, but the
// broker logs each drop (queue or topic, message_id, window) and counts the
// drops in the summary it logs at exit. -h prints the usage and exits 0,
// -version the module version, VCS revision and Go version; a mistake on
// the command line prints one line and exits 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

func main() {
	startup.Main("sbbroker", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}

// queueList is a repeatable, comma-separated -queue flag.
type queueList []string

func (q *queueList) String() string { return strings.Join(*q, ",") }

func (q *queueList) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*q = append(*q, name)
		}
	}
	return nil
}

// topicSpec is one topic and its subscriptions.
type topicSpec struct {
	name string
	subs []string
}

// topicList is a repeatable -topic flag: "name:sub1,sub2", or "name" for a
// topic without subscriptions.
type topicList []topicSpec

func (l *topicList) String() string {
	parts := make([]string, len(*l))
	for i, t := range *l {
		parts[i] = t.name + ":" + strings.Join(t.subs, ",")
	}
	return strings.Join(parts, ";")
}

func (l *topicList) Set(v string) error {
	name, subs, _ := strings.Cut(v, ":")
	t := topicSpec{name: strings.TrimSpace(name)}
	if t.name == "" {
		return fmt.Errorf("topic %q has no name: give name:subscription,…", v)
	}
	for _, sub := range strings.Split(subs, ",") {
		if sub = strings.TrimSpace(sub); sub != "" {
			t.subs = append(t.subs, sub)
		}
	}
	*l = append(*l, t)
	return nil
}

// defaultTTL is the default message time-to-live of the entities: 14 days,
// what infra/bicep gives the queues and topic (messageTimeToLive) and what
// orderworker assumes (SERVICEBUS_MESSAGE_TTL). A Service Bus entity always
// has one, so a received message always reports its expiry.
const defaultTTL = 14 * 24 * time.Hour

// run parses args, starts the broker, writes its connection string to
// stdout and serves until ctx is done.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if asked, err := startup.Version("sbbroker", args, stdout); asked {
		return err
	}
	fs := flag.NewFlagSet("sbbroker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr(getenv, "SBBROKER_ADDR", "127.0.0.1:5672"), "TCP `address` to listen on")
	allowRemote := fs.Bool("allow-remote", false, "allow listening on a non-loopback address (the broker has no TLS)")
	var queues queueList
	fs.Var(&queues, "queue", "queue `name`s to create, comma-separated or repeated (default orders, or $SBBROKER_QUEUES)")
	var topics topicList
	fs.Var(&topics, "topic", "a topic to create with its subscriptions, as `topic:sub1,sub2`; repeat for more topics (default $SBBROKER_TOPICS, topics separated by ;)")
	lock := fs.Duration("lock-duration", sbqueue.DefaultLockDuration, "message lock `duration`, 5s to 5m as on Service Bus")
	maxDeliveries := fs.Int("max-delivery-count", sbqueue.DefaultMaxDeliveryCount, "deliveries before a message is dead-lettered, 1 to 2000 as on Service Bus")
	dupWindow := fs.Duration("duplicate-detection-window", sbqueue.DefaultDuplicateDetectionWindow, "duplicate-detection `window`, 20s to 168h (7 days) as on Service Bus (a resend inside it is dropped and logged); 0 disables duplicate detection")
	unrealistic := fs.Bool("allow-unrealistic-timings", false, "allow a -lock-duration below 5s and a -duplicate-detection-window below 20s, for runs at a compressed scale (the Service Bus emulator accepts windows from 5s)")
	ttl := fs.Duration("ttl", defaultTTL, "default message time-to-live of every queue and topic, as a received message's ExpiresAt (EnqueuedTime + TimeToLive) reports it; 0 means messages never expire (the SDK then reports ExpiresAt = EnqueuedTime and TimeToLive 0)")
	dlqOnExpiry := fs.Bool("dead-letter-on-expiration", false, "dead-letter expired messages instead of dropping them")
	keyName := fs.String("key-name", sbbroker.DefaultKeyName, "shared access key `name` clients must sign with")
	key := fs.String("key", sbbroker.DefaultKey, "shared access `key` clients must sign with")
	verbose := fs.Bool("v", false, "log connection-level debug events")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sbbroker [flags]

Runs the Service Bus test broker: the queues and topics the flags name, in
memory, on a loopback address; prints the emulator connection string on
stdout (SERVICEBUS_CONNECTION_STRING for the commands) and logs to stderr.

`+cli.LocalStackUsage+cli.VersionUsage("sbbroker")+`
Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if len(queues) == 0 {
		queues.Set(envOr(getenv, "SBBROKER_QUEUES", "orders"))
	}
	if len(topics) == 0 {
		for _, spec := range strings.Split(getenv("SBBROKER_TOPICS"), ";") {
			if strings.TrimSpace(spec) == "" {
				continue
			}
			if err := topics.Set(spec); err != nil {
				return fmt.Errorf("SBBROKER_TOPICS: %w", err)
			}
		}
	}
	switch {
	case len(queues) == 0:
		return errors.New("no queues: give -queue")
	case *lock <= 0:
		return fmt.Errorf("-lock-duration %v must be positive", *lock)
	case *lock > sbqueue.MaxLockDuration || *lock < sbqueue.MinLockDuration && !*unrealistic:
		return fmt.Errorf("-lock-duration %v: Service Bus accepts 5s to 5m (-allow-unrealistic-timings allows shorter)", *lock)
	case *maxDeliveries <= 0:
		return fmt.Errorf("-max-delivery-count %d must be positive", *maxDeliveries)
	case *maxDeliveries > sbqueue.MaxMaxDeliveryCount:
		return fmt.Errorf("-max-delivery-count %d: Service Bus accepts 1 to %d", *maxDeliveries, sbqueue.MaxMaxDeliveryCount)
	case *dupWindow < 0 || *ttl < 0:
		return errors.New("-duplicate-detection-window and -ttl must not be negative")
	case *dupWindow > sbqueue.MaxDuplicateDetectionWindow || *dupWindow > 0 && *dupWindow < sbqueue.MinDuplicateDetectionWindow && !*unrealistic:
		return fmt.Errorf("-duplicate-detection-window %v: Service Bus accepts 20s to 168h (7 days), or 0 for no duplicate detection (-allow-unrealistic-timings allows shorter)", *dupWindow)
	}
	if !*allowRemote {
		if err := cli.CheckLoopback("-addr", *addr); err != nil {
			return err
		}
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ns := sbqueue.NewNamespaceWith(sbqueue.RealClock(), sbqueue.NamespaceOptions{AllowUnrealisticTimings: *unrealistic})
	o := sbqueue.QueueOptions{
		LockDuration:                     *lock,
		MaxDeliveryCount:                 *maxDeliveries,
		RequiresDuplicateDetection:       *dupWindow > 0,
		DuplicateDetectionWindow:         *dupWindow,
		DefaultMessageTimeToLive:         *ttl,
		DeadLetteringOnMessageExpiration: *dlqOnExpiry,
	}
	for _, name := range queues {
		if _, err := ns.CreateQueue(name, o); err != nil {
			return err
		}
	}
	to := sbqueue.TopicOptions{
		RequiresDuplicateDetection: *dupWindow > 0,
		DuplicateDetectionWindow:   *dupWindow,
		DefaultMessageTimeToLive:   *ttl,
	}
	so := sbqueue.SubscriptionOptions{
		LockDuration:                     *lock,
		MaxDeliveryCount:                 *maxDeliveries,
		DeadLetteringOnMessageExpiration: *dlqOnExpiry,
	}
	for _, spec := range topics {
		t, err := ns.CreateTopic(spec.name, to)
		if err != nil {
			return err
		}
		for _, sub := range spec.subs {
			if _, err := t.CreateSubscription(sub, so); err != nil {
				return err
			}
		}
	}
	b := sbbroker.New(ns, sbbroker.Options{KeyName: *keyName, Key: *key, Logger: log})
	if err := b.Start(*addr); err != nil {
		return err
	}
	defer b.Close()
	log.Info("broker listening", "addr", b.Addr().String(), "queues", queues.String(),
		"topics", topics.String(), "lock_duration", *lock, "max_delivery_count", *maxDeliveries,
		"duplicate_detection_window", *dupWindow, "ttl", *ttl)
	if _, err := fmt.Fprintln(stdout, b.ConnectionString()); err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("stopping", "cause", context.Cause(ctx))
	logSummary(log, ns, b, queues, topics)
	return nil
}

// logSummary logs, per queue and per subscription, what it holds and what
// happened to what was sent to it, and per topic what it accepted, including
// what the broker dropped and why.
func logSummary(log *slog.Logger, ns *sbqueue.Namespace, b *sbbroker.Broker, queues []string, topics topicList) {
	dropped := b.Dropped()
	for _, name := range queues {
		q, _ := ns.Queue(name)
		s := q.Snapshot()
		log.Info("queue at exit", "queue", name, "active", len(s.Active), "locked", len(s.Locked),
			"dead_letters", len(s.DeadLetters), "enqueued", s.Counters.Sent, "completed", s.Counters.Completed,
			"dropped_duplicates", dropped[name].Duplicates, "rejected_sends", dropped[name].Rejected,
			"expired", s.Counters.Expired)
	}
	for _, spec := range topics {
		t, _ := ns.Topic(spec.name)
		c := t.Counters()
		log.Info("topic at exit", "topic", spec.name, "enqueued", c.Sent,
			"dropped_duplicates", dropped[spec.name].Duplicates, "rejected_sends", dropped[spec.name].Rejected,
			"no_subscription", c.Discarded)
		for _, q := range t.Subscriptions() {
			s := q.Snapshot()
			log.Info("subscription at exit", "subscription", q.Name(), "active", len(s.Active), "locked", len(s.Locked),
				"dead_letters", len(s.DeadLetters), "enqueued", s.Counters.Sent, "completed", s.Counters.Completed,
				"expired", s.Counters.Expired)
		}
	}
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}
