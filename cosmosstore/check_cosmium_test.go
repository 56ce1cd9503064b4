package cosmosstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// Cosmium v0.1.20 ignores If-Match: the start-up check must see it, so that
// the worker can refuse to run its ETag-guarded paths there, or warn.
func TestCosmium_Check_ReportsETagsNotHonoured(t *testing.T) {
	s, _ := cosmiumStore(t)
	res, err := s.Check(t.Context())
	if err != nil {
		t.Fatalf("Check = %v", err)
	}
	if res.ETagsHonoured || res.PatchConditionsHonoured {
		t.Errorf("Check = %+v; cosmium ignores If-Match and patch conditions, want ETagsHonoured and PatchConditionsHonoured false", res)
	}
	if !res.ProbeDeleted || res.Database != testDatabase || res.Container != testContainer {
		t.Errorf("Check = %+v; want the probe deleted and the names", res)
	}
	// Cosmium v0.1.20 reports no defaultTtl (its collections have no such
	// field) and applies no TTL: Check reports it and, since cosmium
	// ignores If-Match too, does not refuse it (Cosmos DB with TTL off is
	// refused; see TestCheck_FakeGateway_DefaultTTLMustBeMinusOne).
	if res.DefaultTTL != nil {
		t.Errorf("DefaultTTL = %d; cosmium v0.1.20 reports none, so a change in cosmium needs a new look at Check", *res.DefaultTTL)
	}
	if _, _, err := s.ReadDocument(t.Context(), res.ProbeID, res.ProbeID); !errors.Is(err, idempotent.ErrNotFound) {
		t.Errorf("the probe document is still there: %v", err)
	}
}

func TestCosmium_Ping(t *testing.T) {
	s, _ := cosmiumStore(t)
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping = %v", err)
	}
}

// TestCosmium_Probe: on a real container Probe's read and its delete of
// the missing item both answer 404, and it leaves no document behind; if
// someone created the item, Probe deletes it and still succeeds.
func TestCosmium_Probe(t *testing.T) {
	s, _ := cosmiumStore(t)
	const ping = "cosmosstore-ping"
	noDocument := func(when string) {
		t.Helper()
		if _, _, err := s.ReadDocument(t.Context(), ping, ping); !errors.Is(err, idempotent.ErrNotFound) {
			t.Errorf("%s: ReadDocument of the ping item = %v, want ErrNotFound", when, err)
		}
		if docs, err := s.ReadPartition(t.Context(), ping); err != nil || len(docs) != 0 {
			t.Errorf("%s: ReadPartition of the ping partition = %d documents, %v; want none", when, len(docs), err)
		}
	}
	for i := range 2 {
		if err := s.Probe(t.Context()); err != nil {
			t.Fatalf("Probe %d = %v", i, err)
		}
	}
	noDocument("after two probes")

	body := []byte(`{"id":"` + ping + `","orderId":"` + ping + `"}`)
	if _, err := s.CreateBatch(t.Context(), ping, []idempotent.Document{{ID: ping, Body: body}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Probe(t.Context()); err != nil {
		t.Errorf("Probe with the ping item present = %v, want nil", err)
	}
	noDocument("after a probe found the item")
}

// Cosmium answers a missing database or container with a 404 without the
// sub-status 1003 that Cosmos DB sends; Check still names the setting.
func TestCosmium_Check_MissingDatabaseOrContainer_NamesTheSetting(t *testing.T) {
	srv := cosmiumtest.Start(t)
	c, err := cosmosstore.NewClientWithKey(srv.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), c, testDatabase, testContainer, order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, database, container string
		want                      []string
	}{
		{"database missing", "no-such-db", testContainer, []string{"COSMOS_DATABASE", `"no-such-db"`}},
		{"container missing", testDatabase, "no-such-container", []string{"COSMOS_CONTAINER", `"no-such-container"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := cosmosstore.New(c, tt.database, tt.container, order.PartitionKeyPath)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Check(t.Context())
			if err == nil {
				t.Fatal("Check succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check error %q does not contain %q", err, w)
				}
			}
			if idempotent.IsTransient(err) {
				t.Errorf("Check error %v is transient", err)
			}
			t.Logf("Check: %v", err)
		})
	}
}

// The one refusal for content that cosmium answers as Cosmos DB does: a
// replace whose body is not JSON (400). Every other rule (ids, partition key
// values, ttl, sizes, batch limits) cosmium v0.1.20 does not check; they are
// tested on the fake gateway (TestGateway_*_ContentRefused_Rejected_NotFaithfulInCosmium)
// and on memstore.
func TestCosmium_ReplaceDocument_BodyNotJSON_Rejected(t *testing.T) {
	s, _ := cosmiumStore(t)
	d := testDoc{ID: "a", OrderID: "ord-1", Type: "t", State: "s"}
	if _, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{d.document(t)}); err != nil {
		t.Fatal(err)
	}
	_, err := s.ReplaceDocument(t.Context(), "ord-1", idempotent.Document{ID: "a", Body: []byte(`{"id":"a",`)}, "")
	checkSentinels(t, err, idempotent.ErrRejected)
	var e *cosmosstore.Error
	if !errors.As(err, &e) || e.StatusCode != 400 {
		t.Errorf("ReplaceDocument = %v, want a 400", err)
	}
}
