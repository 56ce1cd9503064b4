package audit

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/relay"
)

// TestLeaseFormatIsTheRelays: the lease documents the audit reads are the
// ones package relay writes: the same ids, type and fields.
func TestLeaseFormatIsTheRelays(t *testing.T) {
	if got, want := manifestID("r"), relay.ManifestID("r"); got != want {
		t.Errorf("manifestID = %q, relay's %q", got, want)
	}
	if got, want := leaseID("r", "00-FF"), relay.LeaseID("r", "00-FF"); got != want {
		t.Errorf("leaseID = %q, relay's %q", got, want)
	}
	if typeLease != relay.TypeLease {
		t.Errorf("typeLease = %q, relay's %q", typeLease, relay.TypeLease)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	l := relay.Lease{ID: "lease:r:00-FF", Type: relay.TypeLease, Relay: "r", FeedRange: "00-FF",
		Owner: "o", ExpiresAt: at, Continuation: "c", CheckpointedAt: at.Add(time.Second)}
	b, _ := json.Marshal(l)
	var got leaseDoc
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := leaseDoc{ID: l.ID, Type: l.Type, Relay: l.Relay, FeedRange: l.FeedRange, Owner: l.Owner, ExpiresAt: at, Continuation: "c", CheckpointedAt: l.CheckpointedAt}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("relay.Lease read as %+v, want %+v", got, want)
	}
	b, _ = json.Marshal(relay.Manifest{FeedRanges: []string{"a", "b"}})
	var m manifestDoc
	if err := json.Unmarshal(b, &m); err != nil || !reflect.DeepEqual(m.FeedRanges, []string{"a", "b"}) {
		t.Errorf("relay.Manifest read as %+v, %v", m, err)
	}
	var _ Feed = relay.ChangeFeed(nil) // the relay's feed is the audit's
}
