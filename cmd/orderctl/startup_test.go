package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestRunNamesTheServiceBusSettingToFix runs dlq list on the test broker
// for a queue and a subscription that do not exist, and with a wrong key:
// each error names the setting to fix.
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
	cs := func(key string) string {
		return "Endpoint=sb://" + broker.Addr().String() + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + key + ";UseDevelopmentEmulator=true;"
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"missing queue", map[string]string{"SERVICEBUS_CONNECTION_STRING": cs(sbbroker.DefaultKey), "SERVICEBUS_QUEUE": "ordres"},
			[]string{`queue "ordres" does not exist`, "set SERVICEBUS_QUEUE (-queue)"}},
		{"missing subscription", map[string]string{"SERVICEBUS_CONNECTION_STRING": cs(sbbroker.DefaultKey), "SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty"},
			[]string{`subscription "loyalty" of topic "order-events" does not exist`, "SERVICEBUS_TOPIC (-topic) and SERVICEBUS_SUBSCRIPTION (-subscription)"}},
		{"wrong key", map[string]string{"SERVICEBUS_CONNECTION_STRING": cs("WRONGKEY")},
			[]string{"refused the key of SERVICEBUS_CONNECTION_STRING"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := run(ctx, []string{"dlq", "list"}, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("dlq list succeeded")
			}
			for _, want := range tt.want {
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
