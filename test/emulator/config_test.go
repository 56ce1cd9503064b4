package emulator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/infra"
	"github.com/idempotent-consumer/sbcosmos/test/emulator"
)

const queueName = "orders"

func readConfig(t *testing.T) *emulator.Config {
	t.Helper()
	c, err := emulator.ReadConfig("Config.json")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigJSONIsInsideEmulatorLimits(t *testing.T) {
	c := readConfig(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Queue(queueName); !ok {
		t.Fatalf("Config.json has no %q queue", queueName)
	}
	tp, ok := c.Topic(topicName)
	if !ok {
		t.Fatalf("Config.json has no %q topic", topicName)
	}
	for _, s := range subscriptionNames {
		if _, ok := tp.Subscription(s); !ok {
			t.Errorf("topic %q has no subscription %q", topicName, s)
		}
	}
}

const topicName = "order-events"

var subscriptionNames = []string{"loyalty", "shipping"}

// TestValidateCatches proves each limit Validate enforces can fail: every
// case breaks one limit of the real Config.json.
func TestValidateCatches(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*emulator.Config)
	}{
		{"namespace name", func(c *emulator.Config) { c.UserConfig.Namespaces[0].Name = "orders-ns" }},
		{"two namespaces", func(c *emulator.Config) {
			c.UserConfig.Namespaces = append(c.UserConfig.Namespaces, c.UserConfig.Namespaces[0])
		}},
		{"no logging", func(c *emulator.Config) { c.UserConfig.Logging = nil }},
		{"logging type", func(c *emulator.Config) { c.UserConfig.Logging.Type = "Syslog" }},
		{"topics missing", func(c *emulator.Config) { c.UserConfig.Namespaces[0].Topics = nil }},
		{"too many entities", func(c *emulator.Config) {
			ns := &c.UserConfig.Namespaces[0]
			for i := 0; len(ns.Queues) <= emulator.MaxEntitiesPerNamespace; i++ {
				ns.Queues = append(ns.Queues, emulator.Queue{Name: "q" + strconv.Itoa(i)})
			}
		}},
		{"bad queue name", func(c *emulator.Config) { queue(c).Name = "-orders" }},
		{"queue twice", func(c *emulator.Config) {
			ns := &c.UserConfig.Namespaces[0]
			ns.Queues = append(ns.Queues, ns.Queues[0])
		}},
		{"lock duration too long", func(c *emulator.Config) { queue(c).Properties.LockDuration = "PT6M" }},
		{"lock duration too short", func(c *emulator.Config) { queue(c).Properties.LockDuration = "PT4S" }},
		{"lock duration not ISO 8601", func(c *emulator.Config) { queue(c).Properties.LockDuration = "1m" }},
		{"duplicate window too long", func(c *emulator.Config) { queue(c).Properties.DuplicateDetectionHistoryTimeWindow = "PT10M" }},
		{"duplicate window too short", func(c *emulator.Config) { queue(c).Properties.DuplicateDetectionHistoryTimeWindow = "PT1S" }},
		{"TTL too long", func(c *emulator.Config) { queue(c).Properties.DefaultMessageTimeToLive = "P14D" }},
		{"TTL too short", func(c *emulator.Config) { queue(c).Properties.DefaultMessageTimeToLive = "PT1M" }},
		{"max delivery count too high", func(c *emulator.Config) { queue(c).Properties.MaxDeliveryCount = ptr(11) }},
		{"max delivery count zero", func(c *emulator.Config) { queue(c).Properties.MaxDeliveryCount = ptr(0) }},
		{"forward target", func(c *emulator.Config) { queue(c).Properties.ForwardTo = "bad name" }},
		{"bad topic name", func(c *emulator.Config) { topic(c).Name = "order events" }},
		{"topic named like a queue", func(c *emulator.Config) { topic(c).Name = queueName }},
		{"topic window too long", func(c *emulator.Config) { topic(c).Properties.DuplicateDetectionHistoryTimeWindow = "PT10M" }},
		{"topic TTL too long", func(c *emulator.Config) { topic(c).Properties.DefaultMessageTimeToLive = "P1D" }},
		{"topic without subscriptions", func(c *emulator.Config) { topic(c).Subscriptions = nil }},
		{"too many subscriptions", func(c *emulator.Config) {
			tp := topic(c)
			for i := 0; len(tp.Subscriptions) <= emulator.MaxSubscriptionsPerTopic; i++ {
				tp.Subscriptions = append(tp.Subscriptions, emulator.Subscription{Name: "s" + strconv.Itoa(i), Properties: tp.Subscriptions[0].Properties})
			}
		}},
		{"subscription twice", func(c *emulator.Config) {
			tp := topic(c)
			tp.Subscriptions = append(tp.Subscriptions, tp.Subscriptions[0])
		}},
		// PT30S is a valid queue lock, but a subscription's is at least PT1M.
		{"subscription lock below a subscription's floor", func(c *emulator.Config) { subscription(c).Properties.LockDuration = "PT30S" }},
		{"subscription lock too long", func(c *emulator.Config) { subscription(c).Properties.LockDuration = "PT6M" }},
		{"subscription TTL too short", func(c *emulator.Config) { subscription(c).Properties.DefaultMessageTimeToLive = "PT1M" }},
		{"subscription max delivery count too high", func(c *emulator.Config) { subscription(c).Properties.MaxDeliveryCount = ptr(11) }},
		{"subscription forward target", func(c *emulator.Config) { subscription(c).Properties.ForwardDeadLetteredMessagesTo = "-dlq" }},
		{"bad subscription name", func(c *emulator.Config) { subscription(c).Name = "loyalty?" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := readConfig(t)
			tt.mutate(c)
			err := c.Validate()
			if !errors.Is(err, emulator.ErrOutOfRange) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrOutOfRange", err)
			}
			t.Logf("caught: %v", err)
		})
	}
}

func TestReadConfigRejectsUnknownFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Config.json")
	b, err := os.ReadFile("Config.json")
	if err != nil {
		t.Fatal(err)
	}
	misspelt := strings.Replace(string(b), `"LockDuration"`, `"LockDurationn"`, 1)
	if misspelt == string(b) {
		t.Fatal("Config.json has no LockDuration to misspell")
	}
	if err := os.WriteFile(path, []byte(misspelt), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := emulator.ReadConfig(path); err == nil {
		t.Fatal("ReadConfig accepted a misspelt property")
	}
}

// production is the queue infra/bicep deploys, read from the templates'
// defaults.
type production struct {
	name                       string
	requiresDuplicateDetection bool
	deadLetterOnExpiration     bool
	lock, window, ttl          time.Duration
	maxDeliveryCount           int
}

func readProduction(t *testing.T) production {
	t.Helper()
	files, err := infra.ReadDir(filepath.Join("..", "..", "infra", "bicep"))
	if err != nil {
		t.Fatal(err)
	}
	var p production
	found := map[string]bool{}
	for _, f := range files {
		decls, err := infra.Decls(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range decls {
			switch {
			case f.Path == "main.bicep" && d.Kind == infra.Param:
				v := d.Value
				if s, ok := infra.Unquote(v); ok {
					v = s
				}
				switch d.Name {
				case "queueName":
					p.name = v
				case "lockDuration":
					p.lock = mustDuration(t, v)
				case "duplicateDetectionWindow":
					p.window = mustDuration(t, v)
				case "messageTimeToLive":
					p.ttl = mustDuration(t, v)
				case "maxDeliveryCount":
					if p.maxDeliveryCount, err = strconv.Atoi(v); err != nil {
						t.Fatalf("maxDeliveryCount default %q: %v", v, err)
					}
				default:
					continue
				}
				found[d.Name] = true
			case d.Kind == infra.Resource && d.Type == "Microsoft.ServiceBus/namespaces/queues" && !d.Existing:
				v, _ := infra.Lookup(d.Body, "properties.requiresDuplicateDetection")
				p.requiresDuplicateDetection = v == "true"
				v, _ = infra.Lookup(d.Body, "properties.deadLetteringOnMessageExpiration")
				p.deadLetterOnExpiration = v == "true"
				found["queue"] = true
			}
		}
	}
	for _, want := range []string{"queueName", "lockDuration", "duplicateDetectionWindow", "messageTimeToLive", "maxDeliveryCount", "queue"} {
		if !found[want] {
			t.Fatalf("infra/bicep: %s not found", want)
		}
	}
	return p
}

// agree reports how the emulator's queue differs from production where it
// should not: the emulator is production clamped to the emulator's limits.
func agree(q emulator.Queue, p production) error {
	var errs []error
	if q.Name != p.name {
		errs = append(errs, fmt.Errorf("queue name %q, production %q", q.Name, p.name))
	}
	props := q.Properties
	if !props.RequiresDuplicateDetection || !p.requiresDuplicateDetection {
		errs = append(errs, fmt.Errorf("duplicate detection: emulator %v, production %v; want both on", props.RequiresDuplicateDetection, p.requiresDuplicateDetection))
	}
	if !props.DeadLetteringOnMessageExpiration || !p.deadLetterOnExpiration {
		errs = append(errs, fmt.Errorf("dead-lettering on expiration: emulator %v, production %v; want both on", props.DeadLetteringOnMessageExpiration, p.deadLetterOnExpiration))
	}
	lock, window, ttl, err := props.Durations()
	if err != nil {
		return err
	}
	clamp := func(d, lo, hi time.Duration) time.Duration { return min(max(d, lo), hi) }
	if want := clamp(p.lock, emulator.MinLockDuration, emulator.MaxLockDuration); lock != want {
		errs = append(errs, fmt.Errorf("lock duration %v, want %v (production %v)", lock, want, p.lock))
	}
	if want := clamp(p.window, emulator.MinDuplicateDetectionWindow, emulator.MaxDuplicateDetectionWindow); window != want {
		errs = append(errs, fmt.Errorf("duplicate detection window %v, want %v (production %v within the emulator's limits)", window, want, p.window))
	}
	// The window must also be one Azure accepts (20 s to 7 days), so that the
	// emulator never tests a setting production cannot have.
	if window < 20*time.Second || window > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("duplicate detection window %v is outside Azure's [20s, 168h]", window))
	}
	if want := clamp(p.ttl, emulator.MinMessageTimeToLive, emulator.MaxMessageTimeToLive); ttl != want {
		errs = append(errs, fmt.Errorf("message TTL %v, want %v (production %v)", ttl, want, p.ttl))
	}
	if want := min(max(p.maxDeliveryCount, emulator.MinMaxDeliveryCount), emulator.MaxMaxDeliveryCount); props.MaxDeliveryCountOrDefault() != want {
		errs = append(errs, fmt.Errorf("max delivery count %d, want %d (production %d)", props.MaxDeliveryCountOrDefault(), want, p.maxDeliveryCount))
	}
	// The broker's redelivery horizon must fit in the message's life, as the
	// infra rules require of production.
	if time.Duration(props.MaxDeliveryCountOrDefault())*lock > ttl {
		errs = append(errs, fmt.Errorf("max delivery count %d x lock %v exceeds TTL %v", props.MaxDeliveryCountOrDefault(), lock, ttl))
	}
	return errors.Join(errs...)
}

func TestConfigAgreesWithBicep(t *testing.T) {
	q, ok := readConfig(t).Queue(queueName)
	if !ok {
		t.Fatalf("Config.json has no %q queue", queueName)
	}
	if err := agree(q, readProduction(t)); err != nil {
		t.Fatal(err)
	}
}

// TestAgreeCatches proves the agreement check can fail: each case changes one
// setting of the emulator's queue or of production.
func TestAgreeCatches(t *testing.T) {
	tests := []struct {
		name  string
		queue func(*emulator.Queue)
		bicep func(*production)
	}{
		{name: "emulator duplicate detection off", queue: func(q *emulator.Queue) { q.Properties.RequiresDuplicateDetection = false }},
		{name: "production duplicate detection off", bicep: func(p *production) { p.requiresDuplicateDetection = false }},
		{name: "emulator does not dead-letter expired", queue: func(q *emulator.Queue) { q.Properties.DeadLetteringOnMessageExpiration = false }},
		{name: "lock durations differ", queue: func(q *emulator.Queue) { q.Properties.LockDuration = "PT30S" }},
		{name: "production lock changed", bicep: func(p *production) { p.lock = 2 * time.Minute }},
		{name: "max delivery counts differ", queue: func(q *emulator.Queue) { q.Properties.MaxDeliveryCount = ptr(5) }},
		{name: "max delivery count left to default 3", queue: func(q *emulator.Queue) { q.Properties.MaxDeliveryCount = nil }},
		{name: "window shorter than production allows", queue: func(q *emulator.Queue) { q.Properties.DuplicateDetectionHistoryTimeWindow = "PT20S" }},
		{name: "window below Azure's minimum", queue: func(q *emulator.Queue) { q.Properties.DuplicateDetectionHistoryTimeWindow = "PT10S" }, bicep: func(p *production) { p.window = 10 * time.Second }},
		{name: "TTL shorter than the emulator allows for production's", queue: func(q *emulator.Queue) { q.Properties.DefaultMessageTimeToLive = "PT30M" }},
		{name: "queue names differ", queue: func(q *emulator.Queue) { q.Name = "orders-test" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, ok := readConfig(t).Queue(queueName)
			if !ok {
				t.Fatalf("Config.json has no %q queue", queueName)
			}
			p := readProduction(t)
			if tt.queue != nil {
				tt.queue(&q)
			}
			if tt.bicep != nil {
				tt.bicep(&p)
			}
			err := agree(q, p)
			if err == nil {
				t.Fatal("agree passed after the change")
			}
			t.Logf("caught: %v", err)
		})
	}
}

// productionTopic is the topic infra/bicep deploys: its and its
// subscriptions' names from main.bicep's defaults, its settings from the
// templates. The infra rules require the topic and its subscriptions to use
// the queue's duration and delivery parameters.
type productionTopic struct {
	name                       string
	subscriptions              []string
	requiresDuplicateDetection bool
	deadLetterOnExpiration     map[string]bool // by subscription parameter
	queue                      production
}

func readProductionTopic(t *testing.T) productionTopic {
	t.Helper()
	files, err := infra.ReadDir(filepath.Join("..", "..", "infra", "bicep"))
	if err != nil {
		t.Fatal(err)
	}
	p := productionTopic{queue: readProduction(t), deadLetterOnExpiration: map[string]bool{}}
	for _, f := range files {
		decls, err := infra.Decls(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range decls {
			switch {
			case f.Path == "main.bicep" && d.Kind == infra.Param && (d.Name == "topicName" || strings.HasSuffix(d.Name, "SubscriptionName")):
				v, ok := infra.Unquote(d.Value)
				if !ok {
					t.Fatalf("main.bicep: param %s has no literal default", d.Name)
				}
				if d.Name == "topicName" {
					p.name = v
				} else {
					p.subscriptions = append(p.subscriptions, v)
				}
			case d.Kind == infra.Resource && d.Type == "Microsoft.ServiceBus/namespaces/topics" && !d.Existing:
				v, _ := infra.Lookup(d.Body, "properties.requiresDuplicateDetection")
				p.requiresDuplicateDetection = v == "true"
			case d.Kind == infra.Resource && d.Type == "Microsoft.ServiceBus/namespaces/topics/subscriptions" && !d.Existing:
				n, _ := infra.Lookup(d.Body, "name")
				v, _ := infra.Lookup(d.Body, "properties.deadLetteringOnMessageExpiration")
				p.deadLetterOnExpiration[n] = v == "true"
			}
		}
	}
	if p.name == "" || len(p.subscriptions) == 0 || len(p.deadLetterOnExpiration) != len(p.subscriptions) {
		t.Fatalf("infra/bicep: topic %q, subscriptions %v, subscription resources %v", p.name, p.subscriptions, p.deadLetterOnExpiration)
	}
	return p
}

// agreeTopic reports how the emulator's topic differs from production where
// it should not: production clamped to the emulator's limits, with the
// emulator's own orders queue's duplicate-detection window, as in Azure.
func agreeTopic(tp emulator.Topic, q emulator.Queue, p productionTopic) error {
	var errs []error
	if tp.Name != p.name {
		errs = append(errs, fmt.Errorf("topic name %q, production %q", tp.Name, p.name))
	}
	if !tp.Properties.RequiresDuplicateDetection || !p.requiresDuplicateDetection {
		errs = append(errs, fmt.Errorf("topic duplicate detection: emulator %v, production %v; want both on", tp.Properties.RequiresDuplicateDetection, p.requiresDuplicateDetection))
	}
	window, ttl, err := tp.Properties.Durations()
	if err != nil {
		return err
	}
	_, qWindow, _, err := q.Properties.Durations()
	if err != nil {
		return err
	}
	clamp := func(d, lo, hi time.Duration) time.Duration { return min(max(d, lo), hi) }
	if window != qWindow {
		errs = append(errs, fmt.Errorf("topic duplicate detection window %v, the queue's %v; production uses one window for both", window, qWindow))
	}
	if want := clamp(p.queue.ttl, emulator.MinMessageTimeToLive, emulator.MaxMessageTimeToLive); ttl != want {
		errs = append(errs, fmt.Errorf("topic message TTL %v, want %v", ttl, want))
	}
	if len(tp.Subscriptions) != len(p.subscriptions) {
		errs = append(errs, fmt.Errorf("%d subscriptions, production %d (%v)", len(tp.Subscriptions), len(p.subscriptions), p.subscriptions))
	}
	for _, name := range p.subscriptions {
		s, ok := tp.Subscription(name)
		if !ok {
			errs = append(errs, fmt.Errorf("no subscription %q", name))
			continue
		}
		lock, sttl, err := s.Properties.Durations()
		if err != nil {
			return err
		}
		if want := clamp(p.queue.lock, emulator.MinSubscriptionLockDuration, emulator.MaxLockDuration); lock != want {
			errs = append(errs, fmt.Errorf("subscription %q lock duration %v, want %v (production %v)", name, lock, want, p.queue.lock))
		}
		if want := clamp(p.queue.ttl, emulator.MinMessageTimeToLive, emulator.MaxMessageTimeToLive); sttl != want {
			errs = append(errs, fmt.Errorf("subscription %q message TTL %v, want %v", name, sttl, want))
		}
		if want := min(max(p.queue.maxDeliveryCount, emulator.MinMaxDeliveryCount), emulator.MaxMaxDeliveryCount); s.Properties.MaxDeliveryCountOrDefault() != want {
			errs = append(errs, fmt.Errorf("subscription %q max delivery count %d, want %d", name, s.Properties.MaxDeliveryCountOrDefault(), want))
		}
		if !s.Properties.DeadLetteringOnMessageExpiration {
			errs = append(errs, fmt.Errorf("subscription %q does not dead-letter expired messages", name))
		}
		if len(s.Rules) != 0 {
			errs = append(errs, fmt.Errorf("subscription %q has filter rules; production's receive every event", name))
		}
	}
	for sub, dl := range p.deadLetterOnExpiration {
		if !dl {
			errs = append(errs, fmt.Errorf("production subscription %s does not dead-letter expired messages", sub))
		}
	}
	return errors.Join(errs...)
}

func TestTopicAgreesWithBicep(t *testing.T) {
	c := readConfig(t)
	tp, ok := c.Topic(topicName)
	if !ok {
		t.Fatalf("Config.json has no %q topic", topicName)
	}
	q, _ := c.Queue(queueName)
	if err := agreeTopic(tp, q, readProductionTopic(t)); err != nil {
		t.Fatal(err)
	}
}

// TestAgreeTopicCatches proves the topic agreement check can fail.
func TestAgreeTopicCatches(t *testing.T) {
	tests := []struct {
		name  string
		topic func(*emulator.Topic)
		bicep func(*productionTopic)
	}{
		{name: "emulator topic without duplicate detection", topic: func(tp *emulator.Topic) { tp.Properties.RequiresDuplicateDetection = false }},
		{name: "production topic without duplicate detection", bicep: func(p *productionTopic) { p.requiresDuplicateDetection = false }},
		{name: "topic window differs from the queue's", topic: func(tp *emulator.Topic) { tp.Properties.DuplicateDetectionHistoryTimeWindow = "PT1M" }},
		{name: "subscription lock differs", topic: func(tp *emulator.Topic) { tp.Subscriptions[0].Properties.LockDuration = "PT2M" }},
		{name: "subscription max delivery count left to default 3", topic: func(tp *emulator.Topic) { tp.Subscriptions[1].Properties.MaxDeliveryCount = nil }},
		{name: "subscription does not dead-letter expired", topic: func(tp *emulator.Topic) { tp.Subscriptions[1].Properties.DeadLetteringOnMessageExpiration = false }},
		{name: "subscription missing", topic: func(tp *emulator.Topic) { tp.Subscriptions = tp.Subscriptions[:1] }},
		{name: "production has another subscription", bicep: func(p *productionTopic) { p.subscriptions = append(p.subscriptions, "billing") }},
		{name: "topic names differ", topic: func(tp *emulator.Topic) { tp.Name = "orders-events" }},
		{name: "filtered subscription", topic: func(tp *emulator.Topic) {
			tp.Subscriptions[0].Rules = []json.RawMessage{json.RawMessage(`{"Name":"r","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"1=0"}}}`)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := readConfig(t)
			tp, _ := c.Topic(topicName)
			q, _ := c.Queue(queueName)
			p := readProductionTopic(t)
			if tt.topic != nil {
				tt.topic(&tp)
			}
			if tt.bicep != nil {
				tt.bicep(&p)
			}
			err := agreeTopic(tp, q, p)
			if err == nil {
				t.Fatal("agreeTopic passed after the change")
			}
			t.Logf("caught: %v", err)
		})
	}
}

// TestComposeWiring checks the few lines of docker-compose.yaml that tie it to
// Config.json and .env.example; a YAML library is not a dependency of this
// module, so it matches lines.
func TestComposeWiring(t *testing.T) {
	compose := readText(t, "docker-compose.yaml")
	env := readText(t, ".env.example")
	checks := []struct {
		what string
		re   string
		text string
	}{
		{"Config.json mounted where the emulator reads it", `(?m)^\s+- \./Config\.json:/ServiceBus_Emulator/ConfigFiles/Config\.json(:ro)?$`, compose},
		{"Service Bus emulator image", `(?m)^\s+image: mcr\.microsoft\.com/azure-messaging/servicebus-emulator:`, compose},
		{"SQL Edge (or SQL Server) image", `(?m)^\s+image: mcr\.microsoft\.com/(azure-sql-edge|mssql/server):`, compose},
		{"Cosmos DB vNext image", `(?m)^\s+image: mcr\.microsoft\.com/cosmosdb/linux/azure-cosmos-emulator:vnext`, compose},
		{"AMQP port on loopback", `(?m)^\s+- "127\.0\.0\.1:5672:5672"$`, compose},
		{"Cosmos gateway on loopback", `(?m)^\s+- "127\.0\.0\.1:8081:8081"$`, compose},
		{"SQL password from .env", `MSSQL_SA_PASSWORD: \$\{MSSQL_SA_PASSWORD:\?`, compose},
		{"licence acceptance from .env", `ACCEPT_EULA: \$\{ACCEPT_EULA:\?`, compose},
		{".env.example sets the password", `(?m)^MSSQL_SA_PASSWORD=\S`, env},
		{".env.example sets ACCEPT_EULA", `(?m)^ACCEPT_EULA=`, env},
	}
	for _, c := range checks {
		if !regexp.MustCompile(c.re).MatchString(c.text) {
			t.Errorf("%s: no line matches %s", c.what, c.re)
		}
	}
	// Every ACCEPT_EULA and MSSQL_SA_PASSWORD the services set comes from
	// .env, as in the official compose file: none is written into this file.
	for _, m := range regexp.MustCompile(`(?m)^\s+(ACCEPT_EULA|MSSQL_SA_PASSWORD):\s*(.*)$`).FindAllStringSubmatch(compose, -1) {
		if !strings.HasPrefix(m[2], "${"+m[1]+":?") {
			t.Errorf("%s: %s is not taken from .env with ${%s:?...}", m[1], m[2], m[1])
		}
	}
	// Every published port is bound to loopback only.
	for _, m := range regexp.MustCompile(`(?m)^\s+- "([^"]+:\d+)"$`).FindAllStringSubmatch(compose, -1) {
		if !strings.HasPrefix(m[1], "127.0.0.1:") {
			t.Errorf("port %s is published on every interface, want 127.0.0.1 only", m[1])
		}
	}
}

func TestConfigJSONIsCanonical(t *testing.T) {
	b := []byte(readText(t, "Config.json"))
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	want, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(b)) != string(want) {
		t.Error("Config.json is not indented with two spaces and sorted keys; reformat it")
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := infra.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func queue(c *emulator.Config) *emulator.Queue { return &c.UserConfig.Namespaces[0].Queues[0] }

func topic(c *emulator.Config) *emulator.Topic { return &c.UserConfig.Namespaces[0].Topics[0] }

func subscription(c *emulator.Config) *emulator.Subscription { return &topic(c).Subscriptions[0] }

func ptr[T any](v T) *T { return &v }

func ExampleConfig_Validate() {
	c, err := emulator.ReadConfig("Config.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	q, _ := c.Queue("orders")
	lock, window, ttl, _ := q.Properties.Durations()
	fmt.Println(c.Validate(), q.Properties.RequiresDuplicateDetection, lock, window, ttl, q.Properties.MaxDeliveryCountOrDefault())
	// Output: <nil> true 1m0s 5m0s 1h0m0s 10
}

func regexpAll(re, text string) []string {
	var out []string
	for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}
