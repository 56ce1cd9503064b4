package cosmosstore_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// These tests run a store on a container partitioned on a path of its own,
// /tenantId, against cosmium: nothing in the store may assume the path of
// the project's example containers.

const (
	tenantDatabase  = "saas"
	tenantContainer = "tenants"
	tenantPath      = "/tenantId"
)

// tenantDoc is a document of a container partitioned on /tenantId. It has no
// other partition-like field, so a query or probe on any other field than
// tenantId finds nothing.
type tenantDoc struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantId"`
	Type     string `json:"type"`
}

func (d tenantDoc) document(t *testing.T) idempotent.Document {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return idempotent.Document{ID: d.ID, Body: b}
}

// tenantClient starts cosmium and creates the database and a container
// partitioned on /tenantId.
func tenantClient(t *testing.T) *azcosmos.Client {
	t.Helper()
	srv := cosmiumtest.Start(t)
	c, err := cosmosstore.NewClientWithKey(srv.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), c, tenantDatabase, tenantContainer, tenantPath); err != nil {
		t.Fatalf("CreateDatabaseAndContainer(%s) = %v", tenantPath, err)
	}
	return c
}

// TestCosmium_OtherPartitionKeyPath_EndToEnd: provisioning, Check, the batch
// create, a read, a duplicate create and ReadPartition all work on the path
// the store was given.
func TestCosmium_OtherPartitionKeyPath_EndToEnd(t *testing.T) {
	c := tenantClient(t)
	ctx := t.Context()

	cc, err := c.NewContainer(tenantDatabase, tenantContainer)
	if err != nil {
		t.Fatal(err)
	}
	props, err := cc.Read(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := props.ContainerProperties.PartitionKeyDefinition.Paths; !slices.Equal(got, []string{tenantPath}) {
		t.Fatalf("the container is partitioned on %q, want [%q]", got, tenantPath)
	}
	// A second call finds the container as it wants it.
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, c, tenantDatabase, tenantContainer, tenantPath); err != nil {
		t.Fatalf("CreateDatabaseAndContainer again = %v", err)
	}

	s, err := cosmosstore.New(c, tenantDatabase, tenantContainer, tenantPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.PartitionKeyPath(); got != tenantPath {
		t.Errorf("PartitionKeyPath() = %q, want %q", got, tenantPath)
	}
	res, err := s.Check(ctx)
	if err != nil {
		t.Fatalf("Check = %v", err)
	}
	if !res.ProbeDeleted {
		t.Errorf("Check = %+v; want the probe deleted", res)
	}

	t1 := []tenantDoc{{ID: "t-1", TenantID: "t-1", Type: "marker"}, {ID: "Created:t-1", TenantID: "t-1", Type: "event"}}
	t2 := []tenantDoc{{ID: "t-2", TenantID: "t-2", Type: "marker"}}
	for _, docs := range [][]tenantDoc{t1, t2} {
		batch := make([]idempotent.Document, len(docs))
		for i, d := range docs {
			batch[i] = d.document(t)
		}
		etags, err := s.CreateBatch(ctx, docs[0].TenantID, batch)
		if err != nil {
			t.Fatalf("CreateBatch(%s) = %v", docs[0].TenantID, err)
		}
		if len(etags) != len(docs) {
			t.Fatalf("CreateBatch(%s) returned %d ETags for %d documents", docs[0].TenantID, len(etags), len(docs))
		}
	}
	// The marker exists now: creating it again writes nothing.
	if _, err := s.CreateBatch(ctx, "t-1", []idempotent.Document{t1[0].document(t)}); !errors.Is(err, idempotent.ErrAlreadyExists) {
		t.Errorf("second CreateBatch of t-1 = %v, want ErrAlreadyExists", err)
	}

	body, _, err := s.ReadDocument(ctx, "t-1", "Created:t-1")
	if err != nil {
		t.Fatalf("ReadDocument = %v", err)
	}
	var got tenantDoc
	if err := json.Unmarshal(body, &got); err != nil || got != t1[1] {
		t.Errorf("ReadDocument = %s (%v), want %+v", body, err, t1[1])
	}

	for _, tt := range []struct {
		pk      string
		wantIDs []string
	}{
		{"t-1", []string{"Created:t-1", "t-1"}},
		{"t-2", []string{"t-2"}},
		{"t-none", nil},
	} {
		docs, err := s.ReadPartition(ctx, tt.pk)
		if err != nil {
			t.Fatalf("ReadPartition(%s) = %v", tt.pk, err)
		}
		var ids []string
		for _, b := range docs {
			var d tenantDoc
			if err := json.Unmarshal(b, &d); err != nil || d.TenantID != tt.pk {
				t.Fatalf("ReadPartition(%s) returned %s (%v)", tt.pk, b, err)
			}
			ids = append(ids, d.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, tt.wantIDs) {
			t.Errorf("ReadPartition(%s) = %q, want %q", tt.pk, ids, tt.wantIDs)
		}
	}
}

// TestCosmium_PartitionKeyPathMismatch_Refused: a store built for another
// path than the container's is refused by Check, and provisioning refuses
// an existing container partitioned on another path; both name both paths.
func TestCosmium_PartitionKeyPathMismatch_Refused(t *testing.T) {
	c := tenantClient(t)
	ctx := t.Context()

	s, err := cosmosstore.New(c, tenantDatabase, tenantContainer, "/invoiceId")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Check(ctx)
	if err == nil {
		t.Fatal("Check accepted a /tenantId container for a store built for /invoiceId")
	}
	for _, w := range []string{`"/tenantId"`, `"/invoiceId"`, cosmosstore.SettingContainer} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Check = %q, want it to name %s", err, w)
		}
	}
	if idempotent.IsTransient(err) {
		t.Errorf("Check = %v is transient; a mismatched path is a configuration error", err)
	}

	err = cosmosstore.CreateDatabaseAndContainer(ctx, c, tenantDatabase, tenantContainer, "/invoiceId")
	if err == nil {
		t.Fatal("CreateDatabaseAndContainer accepted a /tenantId container for /invoiceId")
	}
	for _, w := range []string{`"/tenantId"`, `"/invoiceId"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("CreateDatabaseAndContainer = %q, want it to name %s", err, w)
		}
	}
}
