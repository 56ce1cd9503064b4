package cosmosstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// healthyGateway is a fake gateway that answers Check as Cosmos DB does for a
// container that exists, is partitioned on /orderId and may be read and
// written, and that honours If-Match (412).
func healthyGateway(t *testing.T) *gateway {
	g := newGateway(t, false)
	g.setRead(reply{status: 404, body: `{"code":"NotFound"}`})
	g.readColl = reply{status: 200, body: `{"id":"orders","defaultTtl":-1,"partitionKey":{"paths":["/orderId"],"kind":"Hash","version":2}}`}
	g.readDB = reply{status: 200, body: `{"id":"orders"}`}
	g.createItem = reply{status: 201, header: map[string]string{"etag": `"e-created"`}, body: `{}`}
	g.setReplace(reply{status: 412, body: `{"code":"PreconditionFailed"}`})
	g.setPatch(reply{status: 412, body: `{"code":"PreconditionFailed"}`})
	g.deleteItem = reply{status: 204}
	return g
}

func TestCheck_FakeGateway_HealthyContainerThatHonoursETags(t *testing.T) {
	g := healthyGateway(t)
	s := storeFor(t, g.endpoint(), noRetries())
	res, err := s.Check(t.Context())
	if err != nil {
		t.Fatalf("Check = %v", err)
	}
	if !res.ETagsHonoured || !res.PatchConditionsHonoured || !res.ProbeDeleted || res.Database != "orders" || res.Container != "orders" || res.Endpoint != g.endpoint() {
		t.Errorf("Check = %+v; want ETags honoured, the probe deleted and the names", res)
	}
	// The probe lives in a partition of its own, expires by itself, and the
	// replace carries an ETag the document does not have.
	g.mu.Lock()
	created, deleted := g.created, g.deleted
	g.mu.Unlock()
	if len(created) != 1 || len(deleted) != 1 {
		t.Fatalf("%d creates, %d deletes; want 1 and 1", len(created), len(deleted))
	}
	var probe struct {
		ID      string `json:"id"`
		OrderID string `json:"orderId"`
		TTL     int    `json:"ttl"`
	}
	if err := json.Unmarshal(created[0], &probe); err != nil {
		t.Fatal(err)
	}
	if probe.ID != res.ProbeID || probe.OrderID != probe.ID || probe.TTL <= 0 || !strings.HasPrefix(probe.ID, "cosmosstore-check-") {
		t.Errorf("probe document = %s; want its own partition and a ttl", created[0])
	}
	replaces := g.sentReplaces()
	if len(replaces) != 1 || !replaces[0].hasIfMatch || replaces[0].ifMatch == `"e-created"` || !strings.HasSuffix(replaces[0].path, "/"+probe.ID) {
		t.Errorf("replaces = %+v; want one with a wrong If-Match for the probe", replaces)
	}
}

// Cosmium ignores If-Match; a gateway that replaces anyway is reported, not
// refused: the worker decides.
func TestCheck_FakeGateway_ReplaceWithWrongETagSucceeds_ETagsNotHonoured(t *testing.T) {
	g := healthyGateway(t)
	g.setReplace(reply{status: 200, body: `{}`})
	s := storeFor(t, g.endpoint(), noRetries())
	res, err := s.Check(t.Context())
	if err != nil || res.ETagsHonoured || !res.ProbeDeleted {
		t.Fatalf("Check = %+v, %v; want no error, ETags not honoured, probe deleted", res, err)
	}
}

// Cosmium applies a patch whatever its condition; a gateway that patches
// anyway is reported, so that the worker applies status changes by read and
// replace. The probe's patch carries a condition.
func TestCheck_FakeGateway_PatchWithFalseConditionSucceeds_PatchConditionsNotHonoured(t *testing.T) {
	g := healthyGateway(t)
	g.setPatch(reply{status: 200, body: `{}`})
	s := storeFor(t, g.endpoint(), noRetries())
	res, err := s.Check(t.Context())
	if err != nil || res.PatchConditionsHonoured || !res.ETagsHonoured || !res.ProbeDeleted {
		t.Fatalf("Check = %+v, %v; want no error, patch conditions not honoured, ETags honoured, probe deleted", res, err)
	}
	patches := g.sentPatches()
	if len(patches) != 1 || !strings.Contains(string(patches[0].body), `"condition":"FROM c WHERE`) || !strings.HasSuffix(patches[0].path, "/"+res.ProbeID) {
		t.Errorf("patches = %+v; want one conditional patch of the probe", patches)
	}
}

func TestCheck_FakeGateway_ProbeNotDeleted_IsReportedNotFatal(t *testing.T) {
	g := healthyGateway(t)
	g.deleteItem = reply{status: 403, body: `{}`}
	s := storeFor(t, g.endpoint(), noRetries())
	res, err := s.Check(t.Context())
	if err != nil || res.ProbeDeleted || !res.ETagsHonoured {
		t.Fatalf("Check = %+v, %v; want no error and ProbeDeleted false", res, err)
	}
}

// Every failure says what to fix, by the name of the setting (and its value
// where the store knows it).
func TestCheck_FakeGateway_FailuresNameTheSetting(t *testing.T) {
	missing := reply{status: 404, header: map[string]string{"x-ms-substatus": "1003"}, body: `{"code":"NotFound"}`}
	forbidden := reply{status: 403, header: map[string]string{"x-ms-substatus": "5301"}, body: `{"code":"Forbidden"}`}
	tests := []struct {
		name  string
		setup func(g *gateway)
		want  []string
	}{
		{
			name:  "database missing",
			setup: func(g *gateway) { g.setRead(missing); g.readDB = reply{status: 404, body: `{}`} },
			want:  []string{"COSMOS_DATABASE", `database "orders" does not exist`, "sub-status 1003"},
		},
		{
			name:  "container missing",
			setup: func(g *gateway) { g.setRead(missing) },
			want:  []string{"COSMOS_CONTAINER", `container "orders" does not exist in database "orders"`},
		},
		{
			name:  "container missing, answered without sub-status on the container read",
			setup: func(g *gateway) { g.readColl = reply{status: 404, body: `{}`} },
			want:  []string{"COSMOS_CONTAINER", `container "orders" does not exist`},
		},
		{
			name:  "no role to read",
			setup: func(g *gateway) { g.setRead(forbidden) },
			want:  []string{"AZURE_CLIENT_ID", "Cosmos DB Built-in Data Contributor", "read an item", "403"},
		},
		{
			name:  "no role to write",
			setup: func(g *gateway) { g.createItem = forbidden },
			want:  []string{"AZURE_CLIENT_ID", "Cosmos DB Built-in Data Contributor", "create a document", "403"},
		},
		{
			name:  "wrong key",
			setup: func(g *gateway) { g.setRead(reply{status: 401, body: `{"code":"Unauthorized"}`}) },
			want:  []string{"COSMOS_KEY", "COSMOS_ENDPOINT", "401"},
		},
		{
			name: "container partitioned on another path",
			setup: func(g *gateway) {
				g.readColl = reply{status: 200, body: `{"id":"orders","partitionKey":{"paths":["/id"],"kind":"Hash","version":2}}`}
			},
			want: []string{"COSMOS_CONTAINER", "/orderId", `"/id"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := healthyGateway(t)
			tt.setup(g)
			s := storeFor(t, g.endpoint(), noRetries())
			_, err := s.Check(t.Context())
			if err == nil {
				t.Fatal("Check succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check error %q does not contain %q", err, w)
				}
			}
			t.Logf("Check: %v", err)
			if idempotent.IsTransient(err) || errors.Is(err, idempotent.ErrRejected) || errors.Is(err, idempotent.ErrNotFound) {
				t.Errorf("Check error %v is transient, rejected or not-found; want a permanent configuration error", err)
			}
		})
	}
}

// The container's default TTL must be -1: a positive one deletes every
// document without its own ttl, and TTL off makes the inbox markers' ttl
// ignored. Cosmos DB omits defaultTtl when TTL is off.
func TestCheck_FakeGateway_DefaultTTLMustBeMinusOne(t *testing.T) {
	const props = `{"id":"orders",%s"partitionKey":{"paths":["/orderId"],"kind":"Hash","version":2}}`
	fix := []string{"az cosmosdb sql container update", "--ttl -1", "defaultTtl: -1", "infra/bicep"}
	tests := []struct {
		name     string
		field    string // the defaultTtl field of the container's properties
		etags    bool   // whether the server honours If-Match
		want     []string
		wantTTL  *int32
		wantPass bool
	}{
		{name: "-1", field: `"defaultTtl":-1,`, etags: true, wantPass: true, wantTTL: ptr(int32(-1))},
		{name: "absent: TTL off", etags: true, want: append([]string{"time to live off", "ttl of their own", "never expire"}, fix...)},
		{name: "3600", field: `"defaultTtl":3600,`, etags: true, wantTTL: ptr(int32(3600)),
			want: append([]string{"defaultTtl) 3600", "idempotency markers, outbox events, effect records, leases", "3600 seconds"}, fix...)},
		{name: "3600 on a server that ignores If-Match", field: `"defaultTtl":3600,`, wantTTL: ptr(int32(3600)), want: fix},
		// An emulator that ignores If-Match (cosmium) reports no TTL and
		// applies none: reported, not refused.
		{name: "absent on a server that ignores If-Match", wantPass: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := healthyGateway(t)
			g.readColl = reply{status: 200, body: fmt.Sprintf(props, tt.field)}
			if !tt.etags {
				g.setReplace(reply{status: 200, body: `{}`})
			}
			s := storeFor(t, g.endpoint(), noRetries())
			res, err := s.Check(t.Context())
			if (res.DefaultTTL == nil) != (tt.wantTTL == nil) || res.DefaultTTL != nil && *res.DefaultTTL != *tt.wantTTL {
				t.Errorf("DefaultTTL = %v, want %v", res.DefaultTTL, tt.wantTTL)
			}
			if tt.wantPass {
				if err != nil {
					t.Fatalf("Check = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check = %+v, nil; want the default TTL refused", res)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check error %q does not contain %q", err, w)
				}
			}
			if idempotent.IsTransient(err) {
				t.Errorf("Check error %v is transient; want a configuration error", err)
			}
			t.Logf("Check: %v", err)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestCheck_UnreachableEndpoint_NamesTheEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String() + "/"
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The SDK's own retries, bounded by a short deadline, as the worker
	// bounds its start-up check.
	s := storeFor(t, endpoint, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err = s.Check(ctx)
	if err == nil {
		t.Fatal("Check of a closed port succeeded")
	}
	for _, w := range []string{"COSMOS_ENDPOINT", endpoint, "cannot reach"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Check error %q does not contain %q", err, w)
		}
	}
	if !idempotent.IsTransient(err) {
		t.Errorf("Check error %v is not transient; an unreachable endpoint may come back", err)
	}
	t.Logf("Check: %v", err)
}

func TestPing_FakeGateway(t *testing.T) {
	tests := []struct {
		name          string
		reply         reply
		wantErr       bool
		wantTransient bool
	}{
		{name: "missing item: the container answers", reply: reply{status: 404, body: `{}`}},
		{name: "item exists", reply: reply{status: 200, body: `{"id":"cosmosstore-ping"}`}},
		{name: "container missing", reply: reply{status: 404, header: map[string]string{"x-ms-substatus": "1003"}, body: `{}`}, wantErr: true},
		{name: "unavailable", reply: reply{status: 503, body: `{}`}, wantErr: true, wantTransient: true},
		{name: "throttled", reply: reply{status: 429, body: `{}`}, wantErr: true, wantTransient: true},
		{name: "forbidden", reply: reply{status: 403, body: `{}`}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setRead(tt.reply)
			s := storeFor(t, g.endpoint(), noRetries())
			err := s.Ping(t.Context())
			if (err != nil) != tt.wantErr || idempotent.IsTransient(err) != tt.wantTransient {
				t.Errorf("Ping = %v; want error %v, transient %v", err, tt.wantErr, tt.wantTransient)
			}
			if errors.Is(err, idempotent.ErrNotFound) {
				t.Errorf("Ping = %v matches ErrNotFound", err)
			}
			var e *cosmosstore.Error
			if err != nil && (!errors.As(err, &e) || e.Op != "ping") {
				t.Errorf("Ping = %v, want a *cosmosstore.Error of op ping", err)
			}
		})
	}
}

// TestCheck_FakeGateway_MultipleWriteLocationsAreRefused: on an account
// with multiple write regions a create of an existing id in another region
// commits (last writer wins, no 409), so the duplicate check cannot hold:
// Check refuses it, naming the setting, before it writes anything. Check
// used to accept it.
func TestCheck_FakeGateway_MultipleWriteLocationsAreRefused(t *testing.T) {
	tests := []struct {
		name        string
		multiWrite  bool
		wantErr     bool
		wantRegions []string
	}{
		{"single write region", false, false, []string{"local"}},
		{"multiple write regions", true, true, []string{"local", "remote"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := healthyGateway(t)
			g.multiWrite = tt.multiWrite
			s := storeFor(t, g.endpoint(), noRetries())
			res, err := s.Check(t.Context())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Check = %v, want error %v", err, tt.wantErr)
			}
			if !res.AccountRead || !slices.Equal(res.WriteRegions, tt.wantRegions) {
				t.Errorf("Check found account read %v, write regions %q; want true, %q", res.AccountRead, res.WriteRegions, tt.wantRegions)
			}
			if !tt.wantErr {
				return
			}
			for _, want := range []string{"enableMultipleWriteLocations", cosmosstore.SettingEndpoint, "single write region", "last-writer-wins"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Check = %v; want it to name %q", err, want)
				}
			}
			g.mu.Lock()
			created := len(g.created)
			g.mu.Unlock()
			if created != 0 {
				t.Errorf("Check created %d probe documents on a refused account, want none", created)
			}
		})
	}
}

// TestCheck_FakeGateway_ForeignClientCannotSeeTheAccount: a client built
// with azcosmos directly gives Check no view of the account's properties
// (the SDK does not export them): Check says so in AccountRead rather than
// guess.
func TestCheck_FakeGateway_ForeignClientCannotSeeTheAccount(t *testing.T) {
	g := healthyGateway(t)
	g.multiWrite = true
	cred, err := azcosmos.NewKeyCredential(cosmiumtest.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azcosmos.NewClientWithKey(g.endpoint(), cred, &noRetries().ClientOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := cosmosstore.New(c, "orders", "orders", "/orderId")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Check(t.Context())
	if err != nil || res.AccountRead || res.WriteRegions != nil {
		t.Errorf("Check = %+v, %v; want no error and the account not read", res, err)
	}
}
