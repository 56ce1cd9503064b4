//go:build emulator

package emulator_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/emulator"
)

// The integration tests run the real binaries against the official emulators
// started with `docker compose up -d` in this directory. They use the queue
// orders-itest from Config.json, whose duplicate-detection window is 5 s, so
// that resends after it reach the worker within the test's time.

const itestQueue = "orders-itest"

// Defaults are the emulators' documented endpoints and public development keys.
const (
	defaultConnectionString = "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
	defaultCosmosEndpoint   = "http://localhost:8081/"
	defaultCosmosKey        = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
)

type emulators struct {
	connStr, cosmosEndpoint, cosmosKey, database, container string
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// readyTimeout bounds the wait for emulators that accept connections but
// are still starting: the Service Bus emulator waits for SQL Edge, which
// takes tens of seconds on a cold start.
const readyTimeout = 3 * time.Minute

// reachable returns the emulators' settings. It skips the test, saying how
// to start them, when nothing listens on either port; it then waits until
// each emulator answers a real request, because Docker's port proxy accepts
// TCP connections on a published port before the emulator in the container
// is up, and fails the test if one is not ready within readyTimeout.
//
// Readiness: the Service Bus emulator's GET /health on its management port
// (5300 on the AMQP host; SERVICEBUS_EMULATOR_HEALTH_URL overrides it, and
// "off" skips it for a stand-in broker that has no such endpoint), and a
// database read answered by the Cosmos DB gateway (see emulator.CosmosProbe).
func reachable(t *testing.T) emulators {
	t.Helper()
	e := emulators{
		connStr:        envOr("SERVICEBUS_CONNECTION_STRING", defaultConnectionString),
		cosmosEndpoint: envOr("COSMOS_ENDPOINT", defaultCosmosEndpoint),
		cosmosKey:      envOr("COSMOS_KEY", defaultCosmosKey),
		database:       envOr("COSMOS_DATABASE", "orders"),
		container:      envOr("COSMOS_CONTAINER", "orders"),
	}
	sbHost := "localhost:5672"
	for _, part := range strings.Split(e.connStr, ";") {
		if v, ok := strings.CutPrefix(part, "Endpoint=sb://"); ok {
			sbHost = strings.TrimSuffix(v, "/")
			if !strings.Contains(sbHost, ":") {
				sbHost += ":5672"
			}
		}
	}
	u, err := url.Parse(e.cosmosEndpoint)
	if err != nil {
		t.Fatalf("COSMOS_ENDPOINT %q: %v", e.cosmosEndpoint, err)
	}
	for what, addr := range map[string]string{"Service Bus emulator": sbHost, "Cosmos DB emulator": u.Host} {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Skipf("SKIP: the %s is not reachable at %s (%v); start the emulators with `docker compose up -d` in test/emulator (see its README)", what, addr, err)
		}
		c.Close()
	}

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	host, _, err := net.SplitHostPort(sbHost)
	if err != nil {
		t.Fatalf("Service Bus endpoint %q: %v", sbHost, err)
	}
	health := envOr("SERVICEBUS_EMULATOR_HEALTH_URL", "http://"+net.JoinHostPort(host, "5300")+"/health")
	if health != "off" {
		probe := emulator.HTTPHealthProbe(&http.Client{Timeout: 5 * time.Second}, health)
		if err := emulator.WaitReady(ctx, 2*time.Second, probe); err != nil {
			t.Fatalf("the Service Bus emulator accepts connections on %s but is not healthy at %s: %v; see `docker compose logs servicebus sqledge` (a stand-in broker without /health: set SERVICEBUS_EMULATOR_HEALTH_URL=off)", sbHost, health, err)
		}
	}
	client, err := cosmosstore.NewClientWithKey(e.cosmosEndpoint, e.cosmosKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	probe := func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return emulator.CosmosProbe(client)(pctx)
	}
	if err := emulator.WaitReady(ctx, 2*time.Second, probe); err != nil {
		t.Fatalf("the Cosmos DB emulator accepts connections on %s but its gateway does not answer: %v; see `docker compose logs cosmos`", u.Host, err)
	}
	return e
}

func (e emulators) env() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"SERVICEBUS_CONNECTION_STRING=" + e.connStr,
		"SERVICEBUS_QUEUE=" + itestQueue,
		"SERVICEBUS_LOCK_DURATION=PT30S",
		"COSMOS_ENDPOINT=" + e.cosmosEndpoint,
		"COSMOS_KEY=" + e.cosmosKey,
		"COSMOS_DATABASE=" + e.database,
		"COSMOS_CONTAINER=" + e.container,
		"COSMOS_CREATE_CONTAINER=true",
		"LOG_FORMAT=json",
		"WORKER_SUMMARY_INTERVAL=5s",
	}
}

func TestEmulatorPipeline(t *testing.T) {
	e := reachable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := e2etest.BuildCommands(t)

	client, err := cosmosstore.NewClientWithKey(e.cosmosEndpoint, e.cosmosKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, e.database, e.container, order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	cosmos, err := client.NewContainer(e.database, e.container)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := azservicebus.NewClientFromConnectionString(e.connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())

	run := fmt.Sprintf("itest-%d", time.Now().Unix())

	// The broker's duplicate detection drops an in-window resend whatever its
	// content: the worker must only ever see the first body.
	gen := ordergen.New(7, run+"-window")
	first := gen.Order(0)
	second := ordergen.Changed(first)
	sender, err := sb.NewSender(itestQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []order.Order{first, second} {
		ct := "application/json"
		if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &o.OrderID, ContentType: &ct, Body: ordergen.Body(o, time.Now(), "")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	sender.Close(ctx)

	worker := e2etest.Start(t, e.env(), bin, "orderworker", "orderworker", "-concurrency", "8")
	pc := e2etest.RunProducer(t, ctx, append(e.env(), "SERVICEBUS_QUEUE="+itestQueue), bin,
		"-count", "40", "-duplicates", "0.25", "-reused", "0.1", "-malformed", "0.05",
		"-resend-delay", "8s", "-seed", "42", "-id-prefix", run)

	// Wait for every order and every expected dead letter.
	dlq, err := sb.NewReceiverForQueue(itestQueue, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close(context.Background())
	dead := map[string][]*azservicebus.ReceivedMessage{}
	og := ordergen.New(pc.Seed, pc.Prefix)
	e2etest.Until(t, ctx, "every order stored and every rejected message dead-lettered", func() bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		msgs, _ := dlq.ReceiveMessages(rctx, 100, nil)
		cancel()
		for _, m := range msgs {
			if strings.HasPrefix(m.MessageID, run) {
				dead[m.MessageID] = append(dead[m.MessageID], m)
			}
			dlq.CompleteMessage(ctx, m, nil)
		}
		n := 0
		for _, ms := range dead {
			n += len(ms)
		}
		if n < pc.Reused+pc.Malformed {
			return false
		}
		_, ok := e2etest.ReadOrder(t, ctx, cosmos, og.ID(pc.Orders-1))
		return ok
	})
	if err := worker.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := worker.Wait(ctx); err != nil {
		t.Errorf("worker after SIGTERM: %v, want exit status 0", err)
	}

	// The in-window resend was dropped: the first body is stored, nothing
	// was dead-lettered for it.
	if doc, ok := e2etest.ReadOrder(t, ctx, cosmos, first.OrderID); !ok || doc.RequestHash != first.RequestHash() {
		t.Errorf("order %s: stored %v with hash %s, want the first body's %s", first.OrderID, ok, doc.RequestHash, first.RequestHash())
	}
	if len(dead[first.OrderID]) != 0 {
		t.Errorf("the in-window resend of %s reached the worker", first.OrderID)
	}
	// One document per order, never changed by a duplicate; reused ids
	// dead-lettered with OrderIdReused, malformed ones with InvalidMessage.
	for i := range pc.Orders {
		want := og.Order(i)
		doc, ok := e2etest.ReadOrder(t, ctx, cosmos, want.OrderID)
		if !ok || doc.RequestHash != want.RequestHash() || doc.Version != 1 {
			t.Errorf("order %s: stored %v, hash %s, version %d; want the original, version 1", want.OrderID, ok, doc.RequestHash, doc.Version)
		}
		for _, d := range dead[want.OrderID] {
			if d.DeadLetterReason == nil || *d.DeadLetterReason != order.ReasonOrderIDReused {
				t.Errorf("dead letter %s: reason %v, want %s", want.OrderID, d.DeadLetterReason, order.ReasonOrderIDReused)
			}
		}
	}
	for i := range pc.Malformed {
		id := fmt.Sprintf("%s-bad-%06d", pc.Prefix, i)
		if ms := dead[id]; len(ms) != 1 || ms[0].DeadLetterReason == nil || *ms[0].DeadLetterReason != idempotent.ReasonInvalidMessage {
			t.Errorf("malformed %s: dead letters %v, want one InvalidMessage", id, ms)
		}
	}
	if s := e2etest.FinalSummary(worker.Output()); s["duplicate"] < int64(pc.Duplicates) {
		t.Errorf("worker completed %d duplicates, want at least the %d resent after the window", s["duplicate"], pc.Duplicates)
	}
}
