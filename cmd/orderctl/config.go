package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

// config is orderctl's configuration: the Service Bus and Cosmos DB settings
// come from the environment variables the azd outputs and orderworker use,
// each overridable by a flag; the command and its selection from the
// command line.
type config struct {
	cli.ServiceBus
	Topic               string // with Subscription: work on the subscription's dead-letter queue, not the queue's
	Subscription        string
	LockDuration        time.Duration
	MessageTTL          time.Duration
	DuplicateWindow     time.Duration
	ResubmissionHorizon time.Duration
	InboxConsumer       string
	InboxTTL            time.Duration

	CosmosEndpoint           string
	CosmosKey                string // secret; emulators only
	CosmosDatabase           string
	CosmosContainer          string
	CosmosInsecureSkipVerify bool

	Verb        string   // list, show, resubmit, purge
	IDs         []string // MessageIds the verb applies to
	Reason      string   // select by DeadLetterReason
	All         bool     // select every message
	OlderThan   time.Duration
	Yes         bool // act; without it, a dry run
	ForceWindow bool // resubmit inside the duplicate-detection window
	Force       bool // resubmit past the resubmission horizon
	Timeout     time.Duration
}

// The defaults are what infra/bicep/main.bicep creates (TestDefaultsAgreeWithBicep).
const (
	defaultLockDuration    = time.Minute
	defaultMessageTTL      = 14 * 24 * time.Hour
	defaultDuplicateWindow = 10 * time.Minute
	defaultHorizon         = 7 * 24 * time.Hour
	defaultInboxTTL        = 36 * 24 * time.Hour
)

var verbs = []string{"list", "show", "resubmit", "purge"}

// parseConfig reads the environment through getenv, then args:
// "dlq VERB [flags] [MESSAGE-ID...]", flags and ids in any order. A command
// line mistake is returned alone (a *cli.UsageError, or flag.ErrHelp for
// -h); otherwise every unparsable variable and every missing or
// inconsistent setting is reported at once.
func parseConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (config, error) {
	var c config
	env := cli.NewEnv(fs, getenv)
	c.ServiceBus.Define(env, "queue whose dead-letter queue (<queue>/$DeadLetterQueue) to work on, and to resubmit to")
	env.String(&c.Topic, "topic", "SERVICEBUS_TOPIC", "", "topic whose subscription -subscription's dead-letter queue (<topic>/Subscriptions/<sub>/$DeadLetterQueue) to work on instead of the queue's (list, show, purge; resubmit is refused)")
	env.String(&c.Subscription, "subscription", "SERVICEBUS_SUBSCRIPTION", "", "subscription of -topic whose dead-letter queue to work on")
	env.Duration(&c.LockDuration, "lock-duration", "SERVICEBUS_LOCK_DURATION", defaultLockDuration, "the queue's lock duration (for the resubmission horizon)")
	env.Duration(&c.MessageTTL, "message-ttl", "SERVICEBUS_MESSAGE_TTL", defaultMessageTTL, "the queue's default message time-to-live, 0 or unlimited for none (for the resubmission horizon)")
	env.Duration(&c.DuplicateWindow, "duplicate-detection-window", "SERVICEBUS_DUPLICATE_DETECTION_WINDOW", defaultDuplicateWindow, "the queue's duplicate-detection window: a resubmission within it of the message's enqueue time is dropped by the broker")
	env.Duration(&c.ResubmissionHorizon, "resubmission-horizon", "WORKER_RESUBMISSION_HORIZON", defaultHorizon, "how long after dead-lettering a message may be resubmitted: the worker's retention check assumes no later resubmission")
	env.String(&c.InboxConsumer, "inbox-consumer", "WORKER_INBOX_CONSUMER", "", "the worker runs the inbox-marker variant as this consumer: resubmissions are also checked against its markers' time-to-live")
	env.Duration(&c.InboxTTL, "inbox-ttl", "WORKER_INBOX_TTL", defaultInboxTTL, "time-to-live of the worker's inbox markers (with -inbox-consumer)")
	env.String(&c.CosmosEndpoint, "cosmos-endpoint", "COSMOS_ENDPOINT", "", "Cosmos DB account endpoint; 'dlq show' compares an OrderIdReused message with the stored order when set")
	env.Secret(&c.CosmosKey, "cosmos-key", "COSMOS_KEY", "", "Cosmos DB account key, for emulators only (Azure uses Entra ID)")
	env.String(&c.CosmosDatabase, "cosmos-database", "COSMOS_DATABASE", "orders", "Cosmos DB database")
	env.String(&c.CosmosContainer, "cosmos-container", "COSMOS_CONTAINER", "orders", "Cosmos DB container")
	env.Bool(&c.CosmosInsecureSkipVerify, "cosmos-insecure-skip-verify", "COSMOS_INSECURE_SKIP_VERIFY", false, "accept the emulator's self-signed certificate; never for Azure")
	env.String(&c.Reason, "reason", "", "", "select the messages with this DeadLetterReason (resubmit, purge)")
	env.Bool(&c.All, "all", "", false, "select every message (resubmit, purge)")
	env.Duration(&c.OlderThan, "older-than", "", 0, "select the messages enqueued longer ago than this (purge)")
	env.Bool(&c.Yes, "yes", "", false, "act; without -yes resubmit and purge only show what they would do")
	env.Bool(&c.ForceWindow, "force-window", "", false, "resubmit even inside the duplicate-detection window, where the broker silently drops the resubmission (and the dead-letter copy is then completed: the message is lost)")
	env.Bool(&c.Force, "force", "", false, "resubmit even past the resubmission horizon, where the worker's deduplication markers may be forgotten")
	env.Duration(&c.Timeout, "timeout", "", 5*time.Minute, "bound of the whole command")
	fs.Usage = func() { usage(fs) }

	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		if len(args) == 0 {
			return c, &cli.UsageError{Err: errors.New("no command: want dlq list|show|resubmit|purge, plan or audit")}
		}
		return c, cli.ParseFlags(fs, args)
	}
	if args[0] != "dlq" {
		return c, &cli.UsageError{Err: fmt.Errorf("unknown command %q: want dlq list|show|resubmit|purge, plan or audit", args[0])}
	}
	if len(args) < 2 || !slices.Contains(verbs, args[1]) {
		if len(args) >= 2 && (args[1] == "-h" || args[1] == "-help" || args[1] == "--help") {
			return c, cli.ParseFlags(fs, args[1:])
		}
		return c, &cli.UsageError{Err: fmt.Errorf("dlq wants one of %s", strings.Join(verbs, ", "))}
	}
	c.Verb = args[1]
	flags, ids := splitArgs(fs, args[2:])
	c.IDs = ids
	err := env.Parse(flags)
	var usageErr *cli.UsageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &usageErr) {
		return c, err
	}
	if c.MessageTTL == cli.Unlimited {
		c.MessageTTL = 0
	}
	return c, errors.Join(err, c.Validate())
}

// splitArgs separates flags (with their values) from positional arguments,
// so that ids and flags may come in any order; everything after "--" is
// positional.
func splitArgs(fs *flag.FlagSet, args []string) (flags, positional []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return flags, append(positional, args[i+1:]...)
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // flag.Parse reports it
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, positional
}

func usage(fs *flag.FlagSet) {
	fmt.Fprint(fs.Output(), `Usage: orderctl dlq list|show|resubmit|purge [flags] [MESSAGE-ID...]
       orderctl plan [flags]      the capacity plan of a rate (orderctl plan -h)
       orderctl audit [flags]     checks the stored state's exactly-once invariants (orderctl audit -h)

Works on the dead-letter queue of the orders queue (<queue>/$DeadLetterQueue),
or with SERVICEBUS_TOPIC and SERVICEBUS_SUBSCRIPTION (-topic, -subscription) on
that of one subscription (<topic>/Subscriptions/<sub>/$DeadLetterQueue), with
the settings orderworker uses (the variables azd writes):

  dlq list                       counts by dead-letter reason and age, oldest and newest (peeks: changes nothing)
  dlq show ID                    every copy of message ID: body, reason, description, delivery count, times,
                                 properties; for OrderIdReused the field-by-field diff with the stored order,
                                 for an OrderAccepted event the stored order's status (with COSMOS_ENDPOINT)
  dlq resubmit ID...|-reason R|-all [-yes] [-force-window] [-force]
                                 sends each selected message to the queue again with the same MessageId, body,
                                 subject and properties, then completes its dead-letter copy; a delayed-retry
                                 copy (ID~rN) is sent as its original message: the original's MessageId, without
                                 the worker's retry properties, so the worker gives it delayed retries again
  dlq purge ID...|-reason R|-all|-older-than D [-yes]
                                 completes (deletes) the selected dead-letter copies

resubmit and purge are dry runs unless -yes is given. resubmit refuses a
message enqueued less than the queue's duplicate-detection window ago (the
broker would silently drop the resubmission) unless -force-window, and one
past the resubmission horizon (the worker's deduplication markers may be
forgotten) unless -force.

On a subscription, resubmit is refused: Service Bus cannot send to one
subscription, only to the topic, which copies the message to every
subscription. The others would get the event again and process it a second
time wherever their inbox markers have expired (or their consumer keeps
none), and orderctl cannot see their consumers or marker TTLs; inside the
topic's duplicate-detection window the broker drops it for all of them,
including this one. Fix the cause, have this subscription's consumer act on
the event by hand (dlq show prints it), then dlq purge it.

In Azure:     SERVICEBUS_NAMESPACE, COSMOS_ENDPOINT (Entra ID; AZURE_CLIENT_ID selects a managed identity)
On emulators: SERVICEBUS_CONNECTION_STRING, COSMOS_ENDPOINT, COSMOS_KEY
`+cli.LocalStackUsage+cli.VersionUsage("orderctl")+`
Durations: Go (90s, 1h30m), days (35d, 1d12h) or ISO 8601 (PT1M, P14D).

Flags:
`)
	fs.PrintDefaults()
}

// Validate reports every missing or inconsistent setting at once.
func (c *config) Validate() error {
	errs := []error{c.ServiceBus.Validate()}
	switch {
	case c.Subscription != "" && c.Topic == "":
		errs = append(errs, errors.New("SERVICEBUS_SUBSCRIPTION (-subscription) without SERVICEBUS_TOPIC (-topic): set both to work on a subscription's dead-letter queue, or neither for SERVICEBUS_QUEUE's"))
	}
	if c.Subscription != "" {
		if err := cli.CheckEntityName(c.Topic, cli.MaxTopicName, true); err != nil {
			errs = append(errs, fmt.Errorf("SERVICEBUS_TOPIC (-topic): %w", err))
		}
	}
	if c.Subscription != "" {
		if err := cli.CheckEntityName(c.Subscription, cli.MaxSubscriptionName, false); err != nil {
			errs = append(errs, fmt.Errorf("SERVICEBUS_SUBSCRIPTION (-subscription): %w", err))
		}
	}
	if c.Verb == "resubmit" && c.Subscription != "" {
		errs = append(errs, fmt.Errorf("dlq resubmit does not work on a subscription's dead-letter queue: Service Bus cannot send to one subscription, "+
			"and a resubmission to topic %q would reach every subscription of it, whose consumers would process the event again wherever their inbox markers "+
			"have expired (or they keep none); inside the topic's duplicate-detection window the broker would drop it for all of them. "+
			"Instead fix the cause, have subscription %q's consumer act on the event by hand (dlq show prints it), then dlq purge it", c.Topic, c.Subscription))
	}
	if c.CosmosEndpoint != "" {
		if err := cli.CheckEndpoint(c.CosmosEndpoint); err != nil {
			errs = append(errs, fmt.Errorf("COSMOS_ENDPOINT (-cosmos-endpoint): %w", err))
		}
	}
	if c.CosmosInsecureSkipVerify && c.CosmosKey == "" {
		errs = append(errs, errors.New("COSMOS_INSECURE_SKIP_VERIFY is for emulators only, which need COSMOS_KEY"))
	}
	if c.LockDuration < time.Second || c.LockDuration > 5*time.Minute {
		errs = append(errs, fmt.Errorf("SERVICEBUS_LOCK_DURATION (-lock-duration) %v is outside Service Bus's 1s to 5m", c.LockDuration))
	}
	if c.DuplicateWindow < 0 {
		errs = append(errs, fmt.Errorf("SERVICEBUS_DUPLICATE_DETECTION_WINDOW (-duplicate-detection-window) %v must not be negative", c.DuplicateWindow))
	}
	if c.ResubmissionHorizon < 0 {
		errs = append(errs, fmt.Errorf("WORKER_RESUBMISSION_HORIZON (-resubmission-horizon) %v must not be negative", c.ResubmissionHorizon))
	}
	if c.InboxConsumer != "" && c.InboxTTL <= 0 {
		errs = append(errs, fmt.Errorf("WORKER_INBOX_TTL (-inbox-ttl) %v must be positive", c.InboxTTL))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout %v must be positive", c.Timeout))
	}
	selectors := 0
	for _, b := range []bool{len(c.IDs) > 0, c.Reason != "" || c.OlderThan > 0, c.All} {
		if b {
			selectors++
		}
	}
	switch c.Verb {
	case "list":
		if selectors > 0 {
			errs = append(errs, errors.New("dlq list takes no selection: it counts every message"))
		}
	case "show":
		if len(c.IDs) != 1 || selectors != 1 {
			errs = append(errs, errors.New("dlq show takes exactly one MESSAGE-ID"))
		}
	case "resubmit", "purge":
		if selectors != 1 {
			errs = append(errs, fmt.Errorf("dlq %s selects by MESSAGE-ID..., by -reason%s or -all: give exactly one of them", c.Verb,
				map[bool]string{true: " and/or -older-than", false: ""}[c.Verb == "purge"]))
		}
		if c.Verb == "resubmit" && c.OlderThan > 0 {
			errs = append(errs, errors.New("-older-than is for dlq purge only"))
		}
	}
	if c.Verb != "resubmit" && (c.ForceWindow || c.Force) {
		errs = append(errs, errors.New("-force-window and -force are for dlq resubmit only"))
	}
	if c.OlderThan < 0 {
		errs = append(errs, fmt.Errorf("-older-than %v must be positive", c.OlderThan))
	}
	return errors.Join(errs...)
}
