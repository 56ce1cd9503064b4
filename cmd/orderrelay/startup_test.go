package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestRunNamesTheMissingTopic starts the relay against cosmium (behind the
// change-feed proxy, as on the local stack) and the test broker, which has
// no topic order-events: it stops at start with an error naming
// SERVICEBUS_TOPIC, instead of failing at the first event.
func TestRunNamesTheMissingTopic(t *testing.T) {
	cosmium := cosmiumtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := cosmosstore.NewClientWithKey(cosmium.Endpoint, cosmium.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	feed := e2etest.StartFeedProxy(t, cosmium.Endpoint, cosmium.Key, "orders", "orders")
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	env := map[string]string{
		"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(),
		"COSMOS_ENDPOINT":              feed.Endpoint, "COSMOS_KEY": cosmium.Key, "LOG_FORMAT": "json",
	}
	err = run(ctx, nil, envOf(env), io.Discard, io.Discard)
	for _, want := range []string{"start-up check of Service Bus", `topic "order-events" does not exist`, "set SERVICEBUS_TOPIC (-topic)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant %q in it", err, want)
		}
	}
}
