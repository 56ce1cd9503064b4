package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfig(t *testing.T) {
	azure := map[string]string{
		"SERVICEBUS_NAMESPACE": "sb-x.servicebus.windows.net", "SERVICEBUS_QUEUE": "orders",
		"COSMOS_ENDPOINT": "https://x.documents.azure.com:443/", "COSMOS_DATABASE": "db", "COSMOS_CONTAINER": "c",
		"SERVICEBUS_LOCK_DURATION": "PT30S",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range azure {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr []string
		check   func(t *testing.T, c config)
	}{
		{name: "azd outputs are enough", env: azure, check: func(t *testing.T, c config) {
			if c.LockDuration != 30*time.Second || c.Queue != "orders" || c.CosmosDatabase != "db" {
				t.Errorf("config = %+v", c)
			}
		}},
		{name: "flags override the environment", env: azure, args: []string{"-queue", "other", "-lock-duration", "45s", "-concurrency", "3"},
			check: func(t *testing.T, c config) {
				if c.Queue != "other" || c.LockDuration != 45*time.Second || c.Concurrency != 3 {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "nothing set names every missing variable", env: map[string]string{},
			wantErr: []string{"SERVICEBUS_NAMESPACE", "SERVICEBUS_CONNECTION_STRING", "COSMOS_ENDPOINT"}},
		{name: "unparsable variable", env: with("WORKER_CONCURRENCY", "many"), wantErr: []string{`WORKER_CONCURRENCY="many"`}},
		{name: "unparsable duration", env: with("SERVICEBUS_LOCK_DURATION", "a minute"), wantErr: []string{"SERVICEBUS_LOCK_DURATION"}},
		{name: "message timeout not below lock", env: with("WORKER_MESSAGE_TIMEOUT", "PT30S"), wantErr: []string{"WORKER_MESSAGE_TIMEOUT"}},
		{name: "lock duration beyond Service Bus", env: with("SERVICEBUS_LOCK_DURATION", "PT6M"), wantErr: []string{"outside Service Bus"}},
		{name: "emulator-only switches need a key", env: with("COSMOS_CREATE_CONTAINER", "true", "COSMOS_INSECURE_SKIP_VERIFY", "true"),
			wantErr: []string{"COSMOS_CREATE_CONTAINER", "COSMOS_INSECURE_SKIP_VERIFY"}},
		{name: "creating a database needs the container's creation", env: with("COSMOS_CREATE_DATABASE", "true"),
			wantErr: []string{"COSMOS_CREATE_DATABASE (-cosmos-create-database)", "set COSMOS_CREATE_CONTAINER=true too"}},
		{name: "two Service Bus identities", env: with("SERVICEBUS_CONNECTION_STRING", "Endpoint=sb://x"), wantErr: []string{"only one"}},
		{name: "stray argument", env: azure, args: []string{"extra"}, wantErr: []string{"unexpected arguments"}},
		{name: "inbox consumer name illegal in Cosmos ids", env: with("WORKER_INBOX_CONSUMER", "loy/alty", "WORKER_INBOX_TTL", "P36D"),
			wantErr: []string{"WORKER_INBOX_CONSUMER"}},
		{name: "payments key retention must be positive", env: with("PAYMENTS_URL", "http://127.0.0.1:8090", "PAYMENTS_KEY_RETENTION", "0s"),
			wantErr: []string{"PAYMENTS_KEY_RETENTION"}},
		{name: "payments key retention is read", env: with("PAYMENTS_URL", "http://127.0.0.1:8090", "PAYMENTS_KEY_RETENTION", "1d"),
			check: func(t *testing.T, c config) {
				if c.PaymentsKeyRetention != 24*time.Hour {
					t.Errorf("PaymentsKeyRetention = %v, want 24h", c.PaymentsKeyRetention)
				}
				if err := c.paymentOptions(nil, "w").Validate(); err == nil || !strings.Contains(err.Error(), "no downstream") {
					t.Errorf("paymentOptions without a gateway validated: %v", err)
				}
			}},
		{name: "an unparsable variable does not hide the missing ones", env: map[string]string{"WORKER_CONCURRENCY": "many"},
			wantErr: []string{`WORKER_CONCURRENCY="many"`, "SERVICEBUS_NAMESPACE", "COSMOS_ENDPOINT"}},
		{name: "every problem at once, each named", env: map[string]string{
			"SERVICEBUS_CONNECTION_STRING": "Endpoint=http://127.0.0.1:5672;SharedAccessKeyName=k",
			"COSMOS_ENDPOINT":              "127.0.0.1:8081", "PAYMENTS_URL": "localhost:8090",
			"SERVICEBUS_LOCK_DURATION": "a minute", "WORKER_SHUTDOWN_GRACE": "P213504D",
		}, wantErr: []string{
			"SERVICEBUS_CONNECTION_STRING (-servicebus-connection-string): " + `Endpoint "http://127.0.0.1:5672" is not sb://`,
			"SharedAccessKey", "COSMOS_ENDPOINT (-cosmos-endpoint)", "PAYMENTS_URL (-payments-url)",
			"SERVICEBUS_LOCK_DURATION", "WORKER_SHUTDOWN_GRACE: \"P213504D\"",
		}},
		{name: "health address that is not host:port", env: with("WORKER_HEALTH_ADDR", "8080"),
			wantErr: []string{`WORKER_HEALTH_ADDR (-health-addr) "8080" is not host:port`}},
		{name: "namespace that is not a host", env: with("SERVICEBUS_NAMESPACE", "https://sb-x.servicebus.windows.net/orders"),
			wantErr: []string{"SERVICEBUS_NAMESPACE (-namespace)"}},
		{name: "days notation of the docs", env: with("WORKER_INBOX_TTL", "35d", "WORKER_SHUTDOWN_GRACE", "1d12h"), check: func(t *testing.T, c config) {
			if c.InboxTTL != 35*24*time.Hour || c.ShutdownGrace != 36*time.Hour {
				t.Errorf("config = %+v", c)
			}
		}},
		{name: "TTL as Service Bus reports unlimited", env: with("SERVICEBUS_MESSAGE_TTL", "P10675199DT2H48M5.4775807S"), check: func(t *testing.T, c config) {
			if c.MessageTTL != 0 {
				t.Errorf("MessageTTL = %v, want 0 (unlimited)", c.MessageTTL)
			}
		}},
		{name: "telemetry off by default", env: azure, check: func(t *testing.T, c config) {
			if c.Telemetry.Enabled() || c.Telemetry.ServiceName != "orderworker" {
				t.Errorf("Telemetry = %+v, want nothing exported, service orderworker", c.Telemetry)
			}
		}},
		{name: "telemetry settings are read", env: with("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", "OTEL_SERVICE_NAME", "orders-eu", "WORKER_METRICS_PROMETHEUS", "true", "WORKER_HEALTH_ADDR", ":8080"),
			check: func(t *testing.T, c config) {
				want := telemetry.Config{ServiceName: "orders-eu", OTLPEndpoint: "http://collector:4318", Prometheus: true}
				if c.Telemetry != want || c.Telemetry.Protocol() != telemetry.ProtocolHTTPProtobuf {
					t.Errorf("Telemetry = %+v (protocol %s), want %+v over http/protobuf", c.Telemetry, c.Telemetry.Protocol(), want)
				}
			}},
		{name: "the Container Apps agent's variables", env: with("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel.service.k8se-apps:4317/", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
			check: func(t *testing.T, c config) {
				if c.Telemetry.Protocol() != telemetry.ProtocolGRPC {
					t.Errorf("Telemetry = %+v, want gRPC", c.Telemetry)
				}
			}},
		{name: "an OTLP protocol the exporters do not speak", env: with("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
			wantErr: []string{`OTEL_EXPORTER_OTLP_PROTOCOL (-otlp-protocol) "http/json"`}},
		{name: "Prometheus without the health listener that would serve it", env: with("WORKER_METRICS_PROMETHEUS", "true"),
			wantErr: []string{"WORKER_METRICS_PROMETHEUS (-metrics-prometheus)", "WORKER_HEALTH_ADDR (-health-addr)"}},
		{name: "Prometheus flag without the health listener", env: azure, args: []string{"-metrics-prometheus"},
			wantErr: []string{"WORKER_METRICS_PROMETHEUS (-metrics-prometheus)", "WORKER_HEALTH_ADDR (-health-addr)"}},
		{name: "fact cache by default", env: azure, check: func(t *testing.T, c config) {
			if c.FactCache != order.DefaultFactCacheSize {
				t.Errorf("FactCache = %d, want order.DefaultFactCacheSize %d", c.FactCache, order.DefaultFactCacheSize)
			}
		}},
		{name: "fact cache off", env: with("WORKER_FACT_CACHE", "0"), check: func(t *testing.T, c config) {
			if c.FactCache != 0 {
				t.Errorf("FactCache = %d, want 0", c.FactCache)
			}
		}},
		{name: "fact cache by flag", env: azure, args: []string{"-fact-cache", "500"}, check: func(t *testing.T, c config) {
			if c.FactCache != 500 {
				t.Errorf("FactCache = %d, want 500", c.FactCache)
			}
		}},
		{name: "negative fact cache", env: with("WORKER_FACT_CACHE", "-1"), wantErr: []string{"WORKER_FACT_CACHE (-fact-cache) -1"}},
		{name: "fact cache beyond its bound", env: with("WORKER_FACT_CACHE", "2000000000"), wantErr: []string{"WORKER_FACT_CACHE (-fact-cache) 2000000000"}},
		{name: "fact cache at its bound", env: with("WORKER_FACT_CACHE", "1000000"), check: func(t *testing.T, c config) {
			if c.FactCache != 1_000_000 {
				t.Errorf("FactCache = %d, want 1000000", c.FactCache)
			}
		}},
		{name: "fact cache one above its bound (a full one would take about 94 MB)", env: with("WORKER_FACT_CACHE", "1000001"),
			wantErr: []string{"WORKER_FACT_CACHE (-fact-cache) 1000001 is not between 0 (no cache) and 1000000 orders"}},
		{name: "telemetry problems with the others", env: with("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", "WORKER_METRICS_PROMETHEUS", "yes please", "WORKER_CONCURRENCY", "0"),
			wantErr: []string{"OTEL_EXPORTER_OTLP_ENDPOINT (-otlp-endpoint)", "WORKER_METRICS_PROMETHEUS", "WORKER_CONCURRENCY"}},
		{name: "emulator connection string", env: with("SERVICEBUS_NAMESPACE", "", "SERVICEBUS_CONNECTION_STRING",
			"Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"),
			check: func(t *testing.T, c config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseConfig(fs, tt.args, envOf(tt.env))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, c)
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %v", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestDefaultsAgreeWithBicep reads the defaults of infra/bicep/main.bicep,
// what `azd up` creates, and compares them with the worker's own defaults,
// which apply whenever a variable is not set.
func TestDefaultsAgreeWithBicep(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "infra", "bicep", "main.bicep"))
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^param (\w+) (?:string|int) = '?([^'\n]*?)'?\s*$`).FindAllStringSubmatch(string(src), -1) {
		params[m[1]] = m[2]
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := parseConfig(fs, nil, envOf(map[string]string{"SERVICEBUS_NAMESPACE": "sb", "COSMOS_ENDPOINT": "https://x/"}))
	if err != nil {
		t.Fatal(err)
	}
	dur := func(s string) time.Duration {
		d, err := cli.ParseISO8601(s)
		if err != nil {
			t.Fatalf("main.bicep: %v", err)
		}
		return d
	}
	for _, p := range []struct {
		param, got string
		want       func(string) string
	}{
		{"queueName", c.Queue, nil},
		{"cosmosDatabaseName", c.CosmosDatabase, nil},
		{"cosmosContainerName", c.CosmosContainer, nil},
		{"maxDeliveryCount", strconv.Itoa(c.MaxDeliveryCount), nil},
		{"lockDuration", c.LockDuration.String(), func(s string) string { return dur(s).String() }},
		{"duplicateDetectionWindow", c.DuplicateWindow.String(), func(s string) string { return dur(s).String() }},
		{"messageTimeToLive", c.MessageTTL.String(), func(s string) string { return dur(s).String() }},
	} {
		v, ok := params[p.param]
		if !ok {
			t.Errorf("main.bicep has no default for param %s", p.param)
			continue
		}
		if p.want != nil {
			v = p.want(v)
		}
		if p.got != v {
			t.Errorf("param %s: Bicep creates %q, the worker defaults to %q", p.param, v, p.got)
		}
	}
}

func TestRunFlagMistakeIsOneLine(t *testing.T) {
	var stderr strings.Builder
	err := run(context.Background(), []string{"-no-such-flag"}, envOf(nil), io.Discard, &stderr)
	var ue *cli.UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want a *cli.UsageError", err)
	}
	if stderr.Len() > 0 {
		t.Errorf("the usage was printed for a mistake:\n%s", stderr.String())
	}
	var out strings.Builder
	if got := cli.Exit("orderworker", err, &out); got != 2 || strings.Count(out.String(), "\n") != 2 || !strings.HasPrefix(out.String(), "orderworker: flag provided but not defined: -no-such-flag") {
		t.Errorf("exit %d, printed %q", got, out.String())
	}
}

func TestShutdownStagesAreLogged(t *testing.T) {
	var logs syncBuffer
	sigs := make(chan os.Signal, 2)
	ctx, stop := cli.Stages(context.Background(), sigs)
	defer stop()
	proc, err := startup.Start(ctx, cli.Logging{Format: "json", Level: "warn"}, &logs, startOptions(&config{ShutdownGrace: 30 * time.Second}, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	release := make(chan struct{})
	defer close(release)
	errc := make(chan error, 1)
	go func() {
		errc <- cli.RunUntilForced(ctx, func(ctx context.Context) error { <-ctx.Done(); <-release; return nil })
	}()
	sigs <- os.Interrupt
	<-ctx.Done()
	sigs <- syscall.SIGTERM
	if err := <-errc; !errors.Is(err, cli.ErrForced) {
		t.Fatalf("err = %v, want ErrForced", err)
	}
	<-cli.Force(ctx).Done()
	// AfterFunc runs the log calls in goroutines of their own: wait for both lines.
	for !strings.Contains(logs.String(), "stopping at once") || !strings.Contains(logs.String(), "shutting down: draining") {
		runtime.Gosched()
	}
	for _, want := range []string{`"level":"WARN","msg":"shutting down: draining`, `"cause":"interrupt signal received"`, `"shutdown_grace":"30s"`,
		`"level":"ERROR","msg":"stopping at once`, `"cause":"second signal (terminated) received"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

// syncBuffer is a strings.Builder safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestConfigLogMasksSecrets(t *testing.T) {
	c := config{ServiceBus: cli.ServiceBus{ConnectionString: "Endpoint=sb://h;SharedAccessKey=TOPSECRET", Queue: "orders"}, CosmosKey: "ALSOSECRET"}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("start", "config", c)
	if strings.Contains(b.String(), "SECRET") || !strings.Contains(b.String(), `"queue":"orders"`) {
		t.Errorf("logged %s", b.String())
	}
}

func TestRunHelpDocumentsVariables(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-h"}, envOf(nil), io.Discard, &out); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"SERVICEBUS_NAMESPACE", "SERVICEBUS_CONNECTION_STRING", "SERVICEBUS_QUEUE", "COSMOS_ENDPOINT", "COSMOS_DATABASE", "COSMOS_CONTAINER", "SERVICEBUS_LOCK_DURATION"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h does not mention %s", v)
		}
	}
	if err := run(context.Background(), nil, envOf(nil), io.Discard, io.Discard); err == nil {
		t.Error("run with no configuration succeeded")
	}
}

// A payments service that forgets keys before the redelivery horizon is
// safe (old claims are looked up), but the worker says so at start, with
// the age beyond which it looks payments up.
func TestPaymentKeyRetentionNotice(t *testing.T) {
	base := map[string]string{
		"SERVICEBUS_NAMESPACE": "sb", "COSMOS_ENDPOINT": "https://x/", "PAYMENTS_URL": "http://127.0.0.1:8090",
		"SERVICEBUS_LOCK_DURATION": "PT1M", "SERVICEBUS_MAX_DELIVERY_COUNT": "10", "SERVICEBUS_MESSAGE_TTL": "P14D",
		"SERVICEBUS_DUPLICATE_DETECTION_WINDOW": "PT10M", "WORKER_RESUBMISSION_HORIZON": "P7D",
	}
	for retention, wantNotice := range map[string]bool{"P30D": true, "P1D": true, "P90D": false} {
		env := map[string]string{"PAYMENTS_KEY_RETENTION": retention}
		for k, v := range base {
			env[k] = v
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c, err := parseConfig(fs, nil, envOf(env))
		if err != nil {
			t.Fatalf("PAYMENTS_KEY_RETENTION=%s: %v", retention, err)
		}
		notices := c.notices()
		if wantNotice != (len(notices) == 1) {
			t.Errorf("PAYMENTS_KEY_RETENTION=%s: notices = %q, want one: %v", retention, notices, wantNotice)
		}
		if !wantNotice {
			continue
		}
		if n := notices[0]; !strings.Contains(n.detail, "payment idempotency keys") || !strings.Contains(n.detail, "looking the payment up") || !strings.Contains(n.detail, "W + 2T + 2D + H") {
			t.Errorf("PAYMENTS_KEY_RETENTION=%s: the notice's details do not explain the lookup: %s", retention, n.detail)
		}
		// Every start at the local stack's defaults logs the short line:
		// it says what happens and how to see why, in one short line.
		if n := notices[0]; len(n.short) > 200 || !strings.Contains(n.short, "PAYMENTS_KEY_RETENTION") || !strings.Contains(n.short, "looking the payment up") || !strings.Contains(n.short, "LOG_LEVEL=debug") {
			t.Errorf("PAYMENTS_KEY_RETENTION=%s: the notice's info line (%d characters) is not a short explanation: %s", retention, len(n.short), n.short)
		}
	}
}

func TestInboxRetentionRefusal(t *testing.T) {
	base := map[string]string{
		"SERVICEBUS_NAMESPACE": "sb", "COSMOS_ENDPOINT": "https://x/",
		"SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty", // the inbox consumer "loyalty"
		"SERVICEBUS_LOCK_DURATION": "PT1M", "SERVICEBUS_MAX_DELIVERY_COUNT": "10", "SERVICEBUS_MESSAGE_TTL": "P14D",
		"SERVICEBUS_DUPLICATE_DETECTION_WINDOW": "PT10M", "WORKER_RESUBMISSION_HORIZON": "P7D",
	}
	for ttl, wantErr := range map[string]bool{"P36D": false, "P35D": true, "P1D": true} {
		env := map[string]string{"WORKER_INBOX_TTL": ttl}
		for k, v := range base {
			env[k] = v
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		_, err := parseConfig(fs, nil, envOf(env))
		if wantErr != (err != nil) {
			t.Errorf("WORKER_INBOX_TTL=%s: err = %v, want error %v", ttl, err, wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "minimum 840h12m0s") || !strings.Contains(err.Error(), "resubmission horizon 168h0m0s")) {
			t.Errorf("the refusal does not show the computation: %v", err)
		}
	}
}

func TestSubscriptionMode(t *testing.T) {
	base := map[string]string{"SERVICEBUS_NAMESPACE": "sb-x.servicebus.windows.net", "COSMOS_ENDPOINT": "https://x.documents.azure.com:443/"}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr []string
		check   func(t *testing.T, c config)
	}{
		{name: "the subscription names the inbox consumer", env: map[string]string{"SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty"},
			check: func(t *testing.T, c config) {
				if c.Topic != "order-events" || c.Subscription != "loyalty" || c.InboxConsumer != "loyalty" {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "an explicit consumer name wins", env: map[string]string{"SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty", "WORKER_INBOX_CONSUMER": "points"},
			check: func(t *testing.T, c config) {
				if c.InboxConsumer != "points" {
					t.Errorf("InboxConsumer = %q", c.InboxConsumer)
				}
			}},
		{name: "the inbox consumer on a queue of its own", env: map[string]string{"SERVICEBUS_QUEUE": "loyalty", "WORKER_INBOX_CONSUMER": "loyalty"},
			check: func(t *testing.T, c config) {
				if c.Queue != "loyalty" || c.Topic != "" {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "no inbox consumer on the order writer's queue", env: map[string]string{"WORKER_INBOX_CONSUMER": "loyalty"},
			wantErr: []string{"WORKER_INBOX_CONSUMER", `"orders", the order writer's queue`, "competing consumers", "SERVICEBUS_SUBSCRIPTION"}},
		// azd puts the relay's SERVICEBUS_TOPIC into every environment.
		{name: "a topic alone leaves the worker on the queue", env: map[string]string{"SERVICEBUS_TOPIC": "order-events"},
			check: func(t *testing.T, c config) {
				if c.Queue != "orders" || c.Subscription != "" || c.InboxConsumer != "" {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "a subscription needs a topic", env: map[string]string{"SERVICEBUS_SUBSCRIPTION": "loyalty"},
			wantErr: []string{"SERVICEBUS_SUBSCRIPTION (-subscription) needs SERVICEBUS_TOPIC (-topic)"}},
		{name: "a subscription name that is no consumer name", env: map[string]string{"SERVICEBUS_TOPIC": "t", "SERVICEBUS_SUBSCRIPTION": "loy:alty"},
			wantErr: []string{"SERVICEBUS_SUBSCRIPTION", "WORKER_INBOX_CONSUMER"}},
		{name: "a subscription name over Service Bus's 50", env: map[string]string{"SERVICEBUS_TOPIC": "t", "SERVICEBUS_SUBSCRIPTION": strings.Repeat("s", 51)},
			wantErr: []string{"SERVICEBUS_SUBSCRIPTION", "50"}},
		{name: "the subscription's consumer captures no payments", env: map[string]string{"SERVICEBUS_TOPIC": "t", "SERVICEBUS_SUBSCRIPTION": "loyalty", "PAYMENTS_URL": "http://127.0.0.1:1"},
			wantErr: []string{"SERVICEBUS_SUBSCRIPTION=loyalty", "captures no payments", "PAYMENTS_URL=http://127.0.0.1:1 is set", "local stack", "-payments-url ''", "PAYMENTS_URL= before the command"}},
		{name: "the inbox consumer on a queue captures no payments", env: map[string]string{"SERVICEBUS_QUEUE": "loyalty", "WORKER_INBOX_CONSUMER": "points", "PAYMENTS_URL": "http://127.0.0.1:1"},
			wantErr: []string{"WORKER_INBOX_CONSUMER=points", "PAYMENTS_URL=http://127.0.0.1:1 is set", "-payments-url ''"}},
		// What the error tells the user to do works: an empty PAYMENTS_URL
		// or -payments-url '' is no payments service.
		{name: "an empty PAYMENTS_URL is none", env: map[string]string{"SERVICEBUS_TOPIC": "t", "SERVICEBUS_SUBSCRIPTION": "loyalty", "PAYMENTS_URL": ""},
			check: func(t *testing.T, c config) {
				if c.PaymentsURL != "" {
					t.Errorf("PaymentsURL = %q", c.PaymentsURL)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseConfig(fs, nil, envOf(env))
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, c)
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}

// The refusal of PAYMENTS_URL in subscription mode tells the user to start
// the worker with -payments-url ”: that works on top of the local env.
func TestSubscriptionModeOnTheLocalEnv(t *testing.T) {
	env := envOf(map[string]string{
		"SERVICEBUS_CONNECTION_STRING": "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;",
		"SERVICEBUS_QUEUE":             "orders", "COSMOS_ENDPOINT": "http://127.0.0.1:8081/", "COSMOS_KEY": "k", "COSMOS_CREATE_CONTAINER": "true",
		"PAYMENTS_URL": "http://127.0.0.1:8090", "SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty",
	})
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseConfig(fs, nil, env); err == nil || !strings.Contains(err.Error(), "-payments-url ''") {
		t.Fatalf("err = %v, want the refusal that says to start with -payments-url ''", err)
	}
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := parseConfig(fs, []string{"-payments-url", ""}, env)
	if err != nil || c.PaymentsURL != "" || c.InboxConsumer != "loyalty" {
		t.Errorf("with -payments-url '': %+v, %v", c, err)
	}
}
