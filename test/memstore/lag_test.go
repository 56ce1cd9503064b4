package memstore_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

func lagBody(id, state string) []byte {
	return []byte(`{"id":"` + id + `","orderId":"p","state":"` + state + `"}`)
}

// readState returns the state a session reads of p/id, "" for a 404.
func readState(t *testing.T, c *memstore.Session, id string) string {
	t.Helper()
	b, _, err := c.ReadDocument(t.Context(), "p", id)
	if errors.Is(err, idempotent.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ State string }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.State
}

// Session consistency: a read without the session token of the partition's
// latest write may see an older state, within Versions writes, and sees the
// documents of one batch together; the writer's own session reads its
// writes; the Store's own reads are always the latest.
func TestReplicaLag_ReadsWithoutTheTokenMayLag(t *testing.T) {
	var pick int
	s := memstore.New("/orderId")
	s.SetReplicaLag(memstore.ReplicaLag{Versions: 2, Pick: func(n int) int { return pick }})
	ctx := t.Context()
	writer := s.NewSession()
	if _, err := writer.CreateBatch(ctx, "p", []idempotent.Document{{ID: "a", Body: lagBody("a", "1")}, {ID: "b", Body: lagBody("b", "1")}}); err != nil {
		t.Fatal(err)
	}
	_, etag, err := writer.ReadDocument(ctx, "p", "a")
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range []string{"2", "3", "4"} {
		if etag, err = writer.ReplaceDocument(ctx, "p", idempotent.Document{ID: "a", Body: lagBody("a", st)}, etag); err != nil {
			t.Fatalf("replace %d: %v", i, err)
		}
	}
	// The partition's writes: the batch, then a=2, a=3, a=4. A reader
	// without a token sees one of the last three states, oldest first.
	for p, want := range []string{"2", "3", "4"} {
		pick = p
		if got := readState(t, s.NewSession(), "a"); got != want {
			t.Errorf("pick %d: a = %q, want %q", p, got, want)
		}
	}
	// The writer reads its writes whatever replica it lands on.
	pick = 0
	if got := readState(t, writer, "a"); got != "4" {
		t.Errorf("the writer reads a = %q, want 4", got)
	}
	if b, _, err := s.ReadDocument(ctx, "p", "a"); err != nil || string(b) != string(lagBody("a", "4")) {
		t.Errorf("the Store's own read = %s, %v; want the latest", b, err)
	}
	// A reader learns the token of what it saw and never goes back.
	r := s.NewSession()
	pick = 1
	if got := readState(t, r, "a"); got != "3" {
		t.Fatalf("a = %q, want 3", got)
	}
	pick = 0
	if got := readState(t, r, "a"); got != "3" {
		t.Errorf("after seeing 3, a = %q; a session never reads older than its token", got)
	}

	// A batch appears at once: before it, neither document.
	t.Run("batch", func(t *testing.T) {
		s := memstore.New("/orderId")
		pick := 0
		s.SetReplicaLag(memstore.ReplicaLag{Versions: 3, Pick: func(n int) int { return pick }})
		if _, err := s.CreateBatch(ctx, "p", []idempotent.Document{{ID: "x", Body: lagBody("x", "1")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateBatch(ctx, "p", []idempotent.Document{{ID: "o", Body: lagBody("o", "1")}, {ID: "e", Body: lagBody("e", "1")}}); err != nil {
			t.Fatal(err)
		}
		r := s.NewSession()
		if o, e := readState(t, r, "o"), readState(t, r, "e"); o != "" || e != "" {
			t.Errorf("before the batch: o %q, e %q; want neither (the session saw the state before it)", o, e)
		}
		pick = 1 // after x, before the batch, for a reader without a token
		if o, e := readState(t, s.NewSession(), "o"), readState(t, s.NewSession(), "e"); o != "" || e != "" {
			t.Errorf("after x: o %q, e %q; want neither", o, e)
		}
		pick = 1 << 30 // the latest
		if o, e := readState(t, r, "o"), readState(t, r, "e"); o != "1" || e != "1" {
			t.Errorf("after the batch: o %q, e %q; want both", o, e)
		}
	})
}

// A refused write teaches a session nothing: after a 409 on a partition
// another session wrote, its reads may still lag (and 404), until one sees
// the newer state; from then on they see it.
func TestReplicaLag_ConflictTeachesNoToken(t *testing.T) {
	pick := 0
	s := memstore.New("/orderId")
	s.SetReplicaLag(memstore.ReplicaLag{Versions: 3, Pick: func(n int) int { return pick }})
	ctx := t.Context()
	if _, err := s.NewSession().CreateBatch(ctx, "p", []idempotent.Document{{ID: "o", Body: lagBody("o", "1")}, {ID: "e", Body: lagBody("e", "1")}}); err != nil {
		t.Fatal(err)
	}
	r := s.NewSession()
	if _, err := r.CreateBatch(ctx, "p", []idempotent.Document{{ID: "o", Body: lagBody("o", "2")}}); !errors.Is(err, idempotent.ErrAlreadyExists) {
		t.Fatalf("CreateBatch = %v, want a conflict", err)
	}
	if got := readState(t, r, "o"); got != "" {
		t.Errorf("a lagging read after the 409 = %q, want a 404", got)
	}
	pick = 1 << 30 // the latest
	if got := readState(t, r, "e"); got != "1" {
		t.Errorf("e = %q, want 1", got)
	}
	pick = 0
	if got := readState(t, r, "o"); got != "1" {
		t.Errorf("o after the session saw the batch = %q, want 1", got)
	}
}

// Without Pick the lag is random but bounded: every state read is one of
// the last Versions+1, and the same seed reads the same states.
func TestReplicaLag_RandomWithinTheBound(t *testing.T) {
	run := func() []string {
		s := memstore.New("/orderId")
		s.SetReplicaLag(memstore.ReplicaLag{Versions: 2, Seed: 7})
		ctx := t.Context()
		if _, err := s.CreateBatch(ctx, "p", []idempotent.Document{{ID: "a", Body: lagBody("a", "0")}}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := 1; i <= 20; i++ {
			st := string(rune('0' + i%10))
			if _, err := s.ReplaceDocument(ctx, "p", idempotent.Document{ID: "a", Body: lagBody("a", st)}, ""); err != nil {
				t.Fatal(err)
			}
			r := readState(t, s.NewSession(), "a")
			ok := false
			for back := 0; back <= 2; back++ {
				if r == string(rune('0'+((i-back)%10+10)%10)) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("after write %d read %q: more than 2 writes behind", i, r)
			}
			got = append(got, r)
		}
		return got
	}
	a, b := run(), run()
	lagged := false
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different reads: %v and %v", a, b)
		}
		lagged = lagged || a[i] != string(rune('0'+(i+1)%10))
	}
	if !lagged {
		t.Errorf("no read lagged in %v", a)
	}
}

// Replicas catch up: with Window set, a state replaced by a write older
// than Window is never served, so a partition no one writes again stops
// lagging (the simulation's seeds 15 and 181 re-read a payment claim
// replaced 30 s earlier on every delivery until MaxDeliveryCount, a failure
// Cosmos DB's replication cannot produce).
func TestReplicaLag_WindowBoundsTheLagInTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := memstore.NewWithClock("/orderId", func() time.Time { return now })
	s.SetReplicaLag(memstore.ReplicaLag{Versions: 3, Window: time.Second, Pick: func(n int) int { return 0 }})
	ctx := t.Context()
	writer := s.NewSession()
	if _, err := writer.CreateBatch(ctx, "p", []idempotent.Document{{ID: "a", Body: lagBody("a", "1")}}); err != nil {
		t.Fatal(err)
	}
	_, etag, err := writer.ReadDocument(ctx, "p", "a")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if _, err := writer.ReplaceDocument(ctx, "p", idempotent.Document{ID: "a", Body: lagBody("a", "2")}, etag); err != nil {
		t.Fatal(err)
	}
	// Right after the replace a reader without the token may see a=1 (the
	// create is older than the window, so the state before it is not served).
	if got := readState(t, s.NewSession(), "a"); got != "1" {
		t.Errorf("within the window: a = %q, want the lagging %q", got, "1")
	}
	now = now.Add(time.Second)
	if got := readState(t, s.NewSession(), "a"); got != "2" {
		t.Errorf("a window after the replace: a = %q, want %q", got, "2")
	}
}
