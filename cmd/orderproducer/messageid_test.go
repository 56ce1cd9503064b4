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

// TestRunRefusesAnIDPrefixTooLong: with an -id-prefix that makes order ids
// over order.MaxOrderIDLength (and so MessageIds that Service Bus refuses,
// once a status change's suffix is added), the command stops before it
// sends anything, naming the flag and the limit. It used to send them:
// Service Bus refuses a MessageId over 128 characters, and the SDK reports
// only "context deadline exceeded" after its retries.
func TestRunRefusesAnIDPrefixTooLong(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	env := map[string]string{"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	longest := strings.Repeat("p", maxIDPrefix())
	for _, tt := range []struct {
		prefix  string
		wantErr bool
	}{
		{longest, false},
		{longest + "p", true},
		{strings.Repeat("p", 200), true},
	} {
		before := len(q.Peek(1 << 20))
		args := []string{"-count", "2", "-status-changes", "1", "-malformed", "1", "-id-prefix", tt.prefix, "-progress", "never", "-log-level", "error"}
		err := run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, io.Discard)
		sent := len(q.Peek(1<<20)) - before
		switch {
		case !tt.wantErr && err != nil:
			t.Errorf("-id-prefix of %d characters: %v", len(tt.prefix), err)
		case !tt.wantErr && sent != 2+4+2:
			t.Errorf("-id-prefix of %d characters: %d messages sent, want 8", len(tt.prefix), sent)
		case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "-id-prefix has") || !strings.Contains(err.Error(), "128 characters Service Bus accepts")):
			t.Errorf("-id-prefix of %d characters: err = %v, want one naming -id-prefix and the limit", len(tt.prefix), err)
		case tt.wantErr && sent != 0:
			t.Errorf("-id-prefix of %d characters: %d messages sent, want none", len(tt.prefix), sent)
		}
	}
}

// TestCheckMessageIDs: every MessageId is checked before the first send;
// the error counts the refused ones and names the first few with the limit.
func TestCheckMessageIDs(t *testing.T) {
	long := func(c string) outgoing { return outgoing{id: strings.Repeat(c, 129)} }
	if err := checkMessageIDs([]outgoing{{id: "ord-1"}, {id: strings.Repeat("x", 128)}}, nil); err != nil {
		t.Errorf("ids within the limit: %v", err)
	}
	err := checkMessageIDs([]outgoing{{id: "ord-1"}, long("a")}, []outgoing{long("b"), long("c"), long("d"), long("e")})
	if err == nil {
		t.Fatal("ids over the limit were accepted")
	}
	for _, want := range []string{"5 messages would be refused by Service Bus, so nothing was sent", strings.Repeat("a", 129), strings.Repeat("c", 129), "has 129 characters; Service Bus accepts at most 128"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant %q in it", err, want)
		}
	}
	if strings.Contains(err.Error(), strings.Repeat("d", 129)) {
		t.Errorf("err names more than the first three: %v", err)
	}
}
