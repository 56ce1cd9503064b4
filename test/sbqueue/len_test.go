package sbqueue_test

import (
	"context"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestLenMatchesSnapshot checks that Len counts what a Snapshot holds, as
// messages are sent, locked and settled.
func TestLenMatchesSnapshot(t *testing.T) {
	q, err := sbqueue.NewNamespace(nil).CreateQueue("q", sbqueue.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(step string, wantAvail, wantLocked int) {
		t.Helper()
		a, l, sc := q.Len()
		s := q.Snapshot()
		if a != len(s.Active) || l != len(s.Locked) || sc != len(s.Scheduled) {
			t.Fatalf("%s: Len() = %d, %d, %d; Snapshot has %d active, %d locked, %d scheduled", step, a, l, sc, len(s.Active), len(s.Locked), len(s.Scheduled))
		}
		if a != wantAvail || l != wantLocked {
			t.Fatalf("%s: Len() = %d, %d; want %d, %d", step, a, l, wantAvail, wantLocked)
		}
	}
	check("new", 0, 0)
	for i := range 3 {
		if _, err := q.Send(ctx, sbqueue.Message{Body: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	check("sent 3", 3, 0)
	got := q.TryReceive(2)
	check("locked 2", 1, 2)
	if err := q.Complete(got[0].LockToken); err != nil {
		t.Fatal(err)
	}
	check("completed 1", 1, 1)
	if err := q.Abandon(got[1].LockToken, nil); err != nil {
		t.Fatal(err)
	}
	check("abandoned 1", 2, 0)
}
