package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// NamespaceName is the only namespace name the Service Bus emulator accepts.
const NamespaceName = "sbemulatorns"

// The Service Bus emulator's documented limits (its Config-schema.json) for
// the properties of a queue, a topic and a subscription.
const (
	MinLockDuration             = 5 * time.Second
	MaxLockDuration             = 5 * time.Minute
	MinDuplicateDetectionWindow = 5 * time.Second
	MaxDuplicateDetectionWindow = 5 * time.Minute
	MinMessageTimeToLive        = 5 * time.Minute
	MaxMessageTimeToLive        = time.Hour
	MinMaxDeliveryCount         = 1
	MaxMaxDeliveryCount         = 10
	MaxEntitiesPerNamespace     = 50
	// A subscription's lock duration has a higher floor than a queue's
	// (Config-schema.json: "the minimum value is PT1M").
	MinSubscriptionLockDuration = time.Minute
	MinSubscriptionsPerTopic    = 1
	MaxSubscriptionsPerTopic    = 50
)

// The emulator's defaults for properties Config.json leaves out.
const (
	defaultLockDuration             = "PT1M"
	defaultDuplicateDetectionWindow = "PT20S"
	defaultMessageTimeToLive        = "PT1H"
	defaultMaxDeliveryCount         = 3
)

// Config is the Service Bus emulator's Config.json.
type Config struct {
	UserConfig UserConfig `json:"UserConfig"`
}

// UserConfig is the body of Config.json.
type UserConfig struct {
	Namespaces []Namespace `json:"Namespaces"`
	Logging    *Logging    `json:"Logging"`
}

// Namespace is the emulator's single namespace.
type Namespace struct {
	Name   string  `json:"Name"`
	Queues []Queue `json:"Queues"`
	Topics []Topic `json:"Topics"`
}

// Topic is one topic of the namespace and its subscriptions.
type Topic struct {
	Name          string          `json:"Name"`
	Properties    TopicProperties `json:"Properties"`
	Subscriptions []Subscription  `json:"Subscriptions"`
}

// TopicProperties are a topic's settings; durations as in QueueProperties.
// Duplicate detection applies at the topic, before fan-out.
type TopicProperties struct {
	DefaultMessageTimeToLive            string `json:"DefaultMessageTimeToLive"`
	DuplicateDetectionHistoryTimeWindow string `json:"DuplicateDetectionHistoryTimeWindow"`
	RequiresDuplicateDetection          bool   `json:"RequiresDuplicateDetection"`
}

// Subscription is one subscription of a topic. Rules (filters) are kept
// undecoded: without any, a subscription receives every message.
type Subscription struct {
	Name       string                 `json:"Name"`
	Properties SubscriptionProperties `json:"Properties"`
	Rules      []json.RawMessage      `json:"Rules,omitempty"`
}

// SubscriptionProperties are a subscription's settings; durations and
// defaults as in QueueProperties, except the lock duration's floor
// (MinSubscriptionLockDuration).
type SubscriptionProperties struct {
	DeadLetteringOnMessageExpiration bool   `json:"DeadLetteringOnMessageExpiration"`
	DefaultMessageTimeToLive         string `json:"DefaultMessageTimeToLive"`
	ForwardDeadLetteredMessagesTo    string `json:"ForwardDeadLetteredMessagesTo"`
	ForwardTo                        string `json:"ForwardTo"`
	LockDuration                     string `json:"LockDuration"`
	MaxDeliveryCount                 *int   `json:"MaxDeliveryCount"`
	RequiresSession                  bool   `json:"RequiresSession"`
}

// Logging selects where the emulator logs.
type Logging struct {
	Type string `json:"Type"`
}

// Queue is one queue of the namespace.
type Queue struct {
	Name       string          `json:"Name"`
	Properties QueueProperties `json:"Properties"`
}

// QueueProperties are a queue's settings. Durations are ISO 8601 strings as
// in the file. An empty duration or a nil MaxDeliveryCount takes the
// emulator's default.
type QueueProperties struct {
	DeadLetteringOnMessageExpiration    bool   `json:"DeadLetteringOnMessageExpiration"`
	DefaultMessageTimeToLive            string `json:"DefaultMessageTimeToLive"`
	DuplicateDetectionHistoryTimeWindow string `json:"DuplicateDetectionHistoryTimeWindow"`
	ForwardDeadLetteredMessagesTo       string `json:"ForwardDeadLetteredMessagesTo"`
	ForwardTo                           string `json:"ForwardTo"`
	LockDuration                        string `json:"LockDuration"`
	MaxDeliveryCount                    *int   `json:"MaxDeliveryCount"`
	RequiresDuplicateDetection          bool   `json:"RequiresDuplicateDetection"`
	RequiresSession                     bool   `json:"RequiresSession"`
}

// ReadConfig reads and decodes a Config.json. Unknown fields are an error, so
// a misspelt property cannot silently fall back to the emulator's default.
func ReadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("emulator: decoding %s: %w", path, err)
	}
	return &c, nil
}

// Queue returns the queue named name.
func (c *Config) Queue(name string) (Queue, bool) {
	for _, ns := range c.UserConfig.Namespaces {
		for _, q := range ns.Queues {
			if q.Name == name {
				return q, true
			}
		}
	}
	return Queue{}, false
}

// Topic returns the topic named name.
func (c *Config) Topic(name string) (Topic, bool) {
	for _, ns := range c.UserConfig.Namespaces {
		for _, t := range ns.Topics {
			if t.Name == name {
				return t, true
			}
		}
	}
	return Topic{}, false
}

// Subscription returns the subscription of t named name.
func (t Topic) Subscription(name string) (Subscription, bool) {
	for _, s := range t.Subscriptions {
		if s.Name == name {
			return s, true
		}
	}
	return Subscription{}, false
}

// ErrOutOfRange reports a setting outside the emulator's documented limits.
var ErrOutOfRange = errors.New("outside the emulator's limits")

var entityNameRE = regexp.MustCompile(`^[A-Za-z0-9]$|^[A-Za-z0-9][\w\-./]*[A-Za-z0-9]$`)

// Validate reports every way c leaves the emulator's documented limits; each
// reported error wraps ErrOutOfRange.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrOutOfRange))
	}
	uc := c.UserConfig
	if uc.Logging == nil {
		bad("Logging is required")
	} else {
		switch uc.Logging.Type {
		case "File", "Console", "File,Console", "Console,File":
		default:
			bad("Logging.Type %q is not File, Console or both", uc.Logging.Type)
		}
	}
	if len(uc.Namespaces) != 1 {
		bad("%d namespaces, want exactly 1", len(uc.Namespaces))
	}
	for _, ns := range uc.Namespaces {
		if ns.Name != NamespaceName {
			bad("namespace %q, want %q", ns.Name, NamespaceName)
		}
		if ns.Queues == nil || ns.Topics == nil {
			bad("namespace %q must list Queues and Topics (empty lists allowed)", ns.Name)
		}
		if n := len(ns.Queues) + len(ns.Topics); n > MaxEntitiesPerNamespace {
			bad("%d queues and topics, at most %d", n, MaxEntitiesPerNamespace)
		}
		seen := map[string]bool{}
		for _, q := range ns.Queues {
			if !entityNameRE.MatchString(q.Name) {
				bad("queue name %q is not a valid entity name", q.Name)
			}
			if seen[q.Name] {
				bad("queue %q defined twice", q.Name)
			}
			seen[q.Name] = true
			errs = append(errs, q.Properties.validate(q.Name)...)
		}
		// Queues and topics share the namespace's names.
		for _, t := range ns.Topics {
			if !entityNameRE.MatchString(t.Name) {
				bad("topic name %q is not a valid entity name", t.Name)
			}
			if seen[t.Name] {
				bad("entity %q defined twice", t.Name)
			}
			seen[t.Name] = true
			errs = append(errs, t.validate()...)
		}
	}
	return errors.Join(errs...)
}

func (t Topic) validate() []error {
	where := fmt.Sprintf("topic %q", t.Name)
	errs := checkDurations(where, []durationLimit{
		{"DuplicateDetectionHistoryTimeWindow", t.Properties.DuplicateDetectionHistoryTimeWindow, defaultDuplicateDetectionWindow, MinDuplicateDetectionWindow, MaxDuplicateDetectionWindow},
		{"DefaultMessageTimeToLive", t.Properties.DefaultMessageTimeToLive, defaultMessageTimeToLive, MinMessageTimeToLive, MaxMessageTimeToLive},
	})
	if n := len(t.Subscriptions); n < MinSubscriptionsPerTopic || n > MaxSubscriptionsPerTopic {
		errs = append(errs, fmt.Errorf("%s: %d subscriptions, want %d to %d: %w", where, n, MinSubscriptionsPerTopic, MaxSubscriptionsPerTopic, ErrOutOfRange))
	}
	seen := map[string]bool{}
	for _, s := range t.Subscriptions {
		sw := fmt.Sprintf("%s subscription %q", where, s.Name)
		if !entityNameRE.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("%s: not a valid entity name: %w", sw, ErrOutOfRange))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("%s: defined twice: %w", sw, ErrOutOfRange))
		}
		seen[s.Name] = true
		p := s.Properties
		errs = append(errs, checkDurations(sw, []durationLimit{
			{"LockDuration", p.LockDuration, defaultLockDuration, MinSubscriptionLockDuration, MaxLockDuration},
			{"DefaultMessageTimeToLive", p.DefaultMessageTimeToLive, defaultMessageTimeToLive, MinMessageTimeToLive, MaxMessageTimeToLive},
		})...)
		if n := p.MaxDeliveryCountOrDefault(); n < MinMaxDeliveryCount || n > MaxMaxDeliveryCount {
			errs = append(errs, fmt.Errorf("%s: MaxDeliveryCount %d not in [%d, %d]: %w", sw, n, MinMaxDeliveryCount, MaxMaxDeliveryCount, ErrOutOfRange))
		}
		errs = append(errs, checkForwards(sw, p.ForwardTo, p.ForwardDeadLetteredMessagesTo)...)
	}
	return errs
}

// MaxDeliveryCountOrDefault returns MaxDeliveryCount, or the emulator's
// default of 3 when the file leaves it out.
func (p SubscriptionProperties) MaxDeliveryCountOrDefault() int {
	if p.MaxDeliveryCount == nil {
		return defaultMaxDeliveryCount
	}
	return *p.MaxDeliveryCount
}

// Durations returns the subscription's lock duration and default message
// time to live, applying the emulator's defaults.
func (p SubscriptionProperties) Durations() (lock, ttl time.Duration, err error) {
	q := QueueProperties{LockDuration: p.LockDuration, DefaultMessageTimeToLive: p.DefaultMessageTimeToLive}
	lock, _, ttl, err = q.Durations()
	return lock, ttl, err
}

// Durations returns the topic's duplicate detection window and default
// message time to live, applying the emulator's defaults.
func (p TopicProperties) Durations() (dupWindow, ttl time.Duration, err error) {
	q := QueueProperties{DuplicateDetectionHistoryTimeWindow: p.DuplicateDetectionHistoryTimeWindow, DefaultMessageTimeToLive: p.DefaultMessageTimeToLive}
	_, dupWindow, ttl, err = q.Durations()
	return dupWindow, ttl, err
}

// durationLimit is one ISO 8601 duration setting and its limits.
type durationLimit struct {
	name, value, def string
	min, max         time.Duration
}

func checkDurations(where string, ds []durationLimit) []error {
	var errs []error
	for _, d := range ds {
		v := d.value
		if v == "" {
			v = d.def
		}
		got, err := infra.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w: %w", where, d.name, ErrOutOfRange, err))
			continue
		}
		if got < d.min || got > d.max {
			errs = append(errs, fmt.Errorf("%s: %s %s not in [%v, %v]: %w", where, d.name, v, d.min, d.max, ErrOutOfRange))
		}
	}
	return errs
}

func checkForwards(where, forwardTo, forwardDeadLettered string) []error {
	var errs []error
	for _, f := range []struct{ name, target string }{{"ForwardTo", forwardTo}, {"ForwardDeadLetteredMessagesTo", forwardDeadLettered}} {
		if f.target != "" && !entityNameRE.MatchString(f.target) {
			errs = append(errs, fmt.Errorf("%s: %s %q is not a valid entity name: %w", where, f.name, f.target, ErrOutOfRange))
		}
	}
	return errs
}

func (p QueueProperties) validate(queue string) []error {
	where := fmt.Sprintf("queue %q", queue)
	errs := checkDurations(where, []durationLimit{
		{"LockDuration", p.LockDuration, defaultLockDuration, MinLockDuration, MaxLockDuration},
		{"DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow, defaultDuplicateDetectionWindow, MinDuplicateDetectionWindow, MaxDuplicateDetectionWindow},
		{"DefaultMessageTimeToLive", p.DefaultMessageTimeToLive, defaultMessageTimeToLive, MinMessageTimeToLive, MaxMessageTimeToLive},
	})
	if n := p.MaxDeliveryCountOrDefault(); n < MinMaxDeliveryCount || n > MaxMaxDeliveryCount {
		errs = append(errs, fmt.Errorf("%s: MaxDeliveryCount %d not in [%d, %d]: %w", where, n, MinMaxDeliveryCount, MaxMaxDeliveryCount, ErrOutOfRange))
	}
	return append(errs, checkForwards(where, p.ForwardTo, p.ForwardDeadLetteredMessagesTo)...)
}

// MaxDeliveryCountOrDefault returns MaxDeliveryCount, or the emulator's
// default of 3 when the file leaves it out.
func (p QueueProperties) MaxDeliveryCountOrDefault() int {
	if p.MaxDeliveryCount == nil {
		return defaultMaxDeliveryCount
	}
	return *p.MaxDeliveryCount
}

// Durations returns the queue's lock duration, duplicate detection window and
// default message time to live, applying the emulator's defaults.
func (p QueueProperties) Durations() (lock, dupWindow, ttl time.Duration, err error) {
	parse := func(v, def string) time.Duration {
		if v == "" {
			v = def
		}
		d, e := infra.ParseDuration(v)
		if e != nil && err == nil {
			err = fmt.Errorf("emulator: %w", e)
		}
		return d
	}
	lock = parse(p.LockDuration, defaultLockDuration)
	dupWindow = parse(p.DuplicateDetectionHistoryTimeWindow, defaultDuplicateDetectionWindow)
	ttl = parse(p.DefaultMessageTimeToLive, defaultMessageTimeToLive)
	return lock, dupWindow, ttl, err
}
