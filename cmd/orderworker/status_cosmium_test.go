package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestStaleStatusChangeOnCosmiumKeepsTheNewerVersion runs the real run()
// against cosmium, which applies a patch whatever its filter predicate: the
// start-up check finds that out and the worker applies status changes by
// read and replace. Version 3 is applied first and version 2 arrives after
// it, one at a time: version 2 must be stale. With the conditional patch
// the worker uses on Cosmos DB, cosmium would write version 2 over 3.
func TestStaleStatusChangeOnCosmiumKeepsTheNewerVersion(t *testing.T) {
	cosmium := cosmiumtest.Start(t)
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })

	env := envOf(map[string]string{
		"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders",
		"SERVICEBUS_LOCK_DURATION": "5s", "WORKER_CONCURRENCY": "1",
		"COSMOS_ENDPOINT": cosmium.Endpoint, "COSMOS_KEY": cosmium.Key, "COSMOS_CREATE_CONTAINER": "true",
		"LOG_FORMAT": "json",
	})
	sigs := make(chan os.Signal, 2)
	ctx, stop := cli.Stages(context.Background(), sigs)
	defer stop()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, env, io.Discard, &logs) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	deadline, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	client, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	gen := ordergen.New(1, "stale")
	o := gen.Order(0)
	completed := int64(0)
	send := func(m *azservicebus.Message) {
		t.Helper()
		if err := sender.SendMessage(deadline, m, nil); err != nil {
			t.Fatal(err)
		}
		completed++
		e2etest.Until(t, deadline, "the message completed", func() bool { return q.Snapshot().Counters.Completed >= completed })
	}
	id := o.OrderID
	send(&azservicebus.Message{MessageID: &id, Body: ordergen.Body(o, time.Now(), "")})
	subject := order.SubjectOrderStatusChanged
	for _, c := range []order.StatusChange{
		{OrderID: id, Status: "shipped", Version: 3, ChangedAt: time.Now()},
		{OrderID: id, Status: "paid", Version: 2, ChangedAt: time.Now().Add(-time.Minute)},
	} {
		body, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		mid := order.StatusMessageID(id, c.Version)
		send(&azservicebus.Message{MessageID: &mid, Subject: &subject, Body: body})
	}

	cc, err := cosmosstore.NewClientWithKey(cosmium.Endpoint, cosmium.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	container, err := cc.NewContainer(defaultCosmosDatabase, defaultCosmosContainer)
	if err != nil {
		t.Fatal(err)
	}
	doc, ok := e2etest.ReadOrder(t, deadline, container, id)
	if !ok || doc.Version != 3 || doc.Status != "shipped" {
		t.Errorf("order %s is %q at version %d (found %v); want shipped at version 3: the late version 2 overwrote it", id, doc.Status, doc.Version, ok)
	}
	if !strings.Contains(logs.String(), "applies a patch whatever its condition") {
		t.Errorf("the worker did not say that it found patch conditions ignored")
	}
	sigs <- os.Interrupt
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v", err)
		}
	case <-deadline.Done():
		t.Fatal("run did not return")
	}
}
