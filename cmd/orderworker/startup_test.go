package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestStartupErrorsNameTheSettingToFix starts the worker on the local
// env's settings (the test broker, cosmium, COSMOS_CREATE_CONTAINER=true)
// with one setting wrong at a time: each start fails with an error, on one
// line, that names the setting to fix, and no database or container is
// created for a misspelt COSMOS_DATABASE or COSMOS_CONTAINER.
func TestStartupErrorsNameTheSettingToFix(t *testing.T) {
	cosmium := cosmiumtest.Start(t)
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	sbConn := func(addr, key string) string {
		return "Endpoint=sb://" + addr + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + key + ";UseDevelopmentEmulator=true;"
	}
	local := map[string]string{
		"SERVICEBUS_CONNECTION_STRING": sbConn(broker.Addr().String(), sbbroker.DefaultKey), "SERVICEBUS_QUEUE": "orders",
		"COSMOS_ENDPOINT": cosmium.Endpoint, "COSMOS_KEY": cosmium.Key, "COSMOS_DATABASE": "orders", "COSMOS_CONTAINER": "orders",
		"COSMOS_CREATE_CONTAINER": "true", "LOG_FORMAT": "json",
	}
	wrongKey := strings.Repeat("A", 86) + "=="
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"misspelt database", map[string]string{"COSMOS_DATABASE": "ordres"},
			[]string{`database "ordres" does not exist`, "set COSMOS_DATABASE (-cosmos-database)", "COSMOS_CREATE_DATABASE=true"}},
		{"misspelt container", map[string]string{"COSMOS_CONTAINER": "ordres"},
			[]string{`container "ordres" does not exist in database "orders"`, "set COSMOS_CONTAINER (-cosmos-container)", "COSMOS_CREATE_OTHER_CONTAINER=true"}},
		{"wrong Cosmos DB key", map[string]string{"COSMOS_KEY": wrongKey},
			[]string{"refused COSMOS_KEY (-cosmos-key)", "401 Unauthorized"}},
		{"unreachable Cosmos DB", map[string]string{"COSMOS_ENDPOINT": "http://" + closed + "/"},
			[]string{"cannot reach Cosmos DB at COSMOS_ENDPOINT=http://" + closed + "/", "connection refused"}},
		{"misspelt queue", map[string]string{"SERVICEBUS_QUEUE": "ordres"},
			[]string{`queue "ordres" does not exist`, "set SERVICEBUS_QUEUE (-queue)"}},
		{"missing subscription", map[string]string{"SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty"},
			[]string{`subscription "loyalty" of topic "order-events" does not exist`, "SERVICEBUS_TOPIC (-topic) and SERVICEBUS_SUBSCRIPTION (-subscription)"}},
		{"wrong Service Bus key", map[string]string{"SERVICEBUS_CONNECTION_STRING": sbConn(broker.Addr().String(), "WRONGKEY")},
			[]string{"refused the key of SERVICEBUS_CONNECTION_STRING (-servicebus-connection-string)"}},
		{"unreachable Service Bus", map[string]string{"SERVICEBUS_CONNECTION_STRING": sbConn(closed, sbbroker.DefaultKey)},
			[]string{"cannot reach the broker at " + closed, "SERVICEBUS_CONNECTION_STRING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range local {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err := run(ctx, nil, envOf(env), io.Discard, io.Discard)
			if err == nil {
				t.Fatal("the worker started")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v\nwant %q in it", err, want)
				}
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || strings.Contains(msg, "RESPONSE") || strings.Contains(msg, wrongKey) || strings.Contains(msg, "WRONGKEY") {
				t.Errorf("not one line, or with the SDK's dump or the key:\n%v", err)
			}
			t.Logf("orderworker: %v", err)
		})
	}

	// A container of another name, asked for, is created and the log says
	// so; found at the next start, it is not said to be new. (The misspelt
	// queue stops each start after the store's set-up.)
	for i, wantCreated := range []bool{true, false} {
		env := map[string]string{}
		for k, v := range local {
			env[k] = v
		}
		env["COSMOS_CONTAINER"], env["COSMOS_CREATE_OTHER_CONTAINER"], env["SERVICEBUS_QUEUE"] = "invoices", "true", "ordres"
		var logs strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := run(ctx, nil, envOf(env), io.Discard, &logs)
		cancel()
		if err == nil || !strings.Contains(err.Error(), `queue "ordres" does not exist`) {
			t.Fatalf("start %d: %v, want the misspelt queue refused", i+1, err)
		}
		created := strings.Contains(logs.String(), `"msg":"created a new, empty Cosmos DB container: it did not exist","database":"orders","container":"invoices"`)
		if created != wantCreated {
			t.Errorf("start %d: logged a created container %v, want %v:\n%s", i+1, created, wantCreated, logs.String())
		}
	}
}
