package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestRunNamesTheServiceBusSettingToFix runs the command against the test
// broker with a misspelt queue, a wrong key and a closed port: each fails
// before the first send with an error naming the setting to fix.
func TestRunNamesTheServiceBusSettingToFix(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	cs := func(addr, key string) string {
		return "Endpoint=sb://" + addr + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + key + ";UseDevelopmentEmulator=true;"
	}
	for _, tt := range []struct {
		name, connStr, queue string
		want                 []string
	}{
		{"missing queue", cs(broker.Addr().String(), sbbroker.DefaultKey), "ordres", []string{`queue "ordres" does not exist`, "SERVICEBUS_QUEUE (-queue)", "(notfound)"}},
		{"wrong key", cs(broker.Addr().String(), "WRONGKEY"), "orders", []string{"refused the key of SERVICEBUS_CONNECTION_STRING", "(unauthorized)"}},
		{"closed port", cs(closedAddr, sbbroker.DefaultKey), "orders", []string{"cannot reach the broker at " + closedAddr, "SERVICEBUS_CONNECTION_STRING", "(connlost)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"SERVICEBUS_CONNECTION_STRING": tt.connStr, "SERVICEBUS_QUEUE": tt.queue}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stdout strings.Builder
			err := run(ctx, []string{"-count", "3", "-log-format", "json"}, func(k string) string { return env[k] }, strings.NewReader(""), &stdout, io.Discard)
			if err == nil {
				t.Fatal("run succeeded")
			}
			for _, want := range append(tt.want, "start-up check of Service Bus") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v\nwant %q in it", err, want)
				}
			}
			if strings.Contains(err.Error(), "WRONGKEY") {
				t.Errorf("the key is shown: %v", err)
			}
		})
	}
}
