package relay_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// An EventFormat decides, by exact field names, which documents are events
// (the rest are skipped), which events can be published (the rest are
// unpublishable) and what each message carries: MessageId and Subject from
// its fields, the partition key as an application property only when one is
// named, the body without system properties.
func TestRelay_EventFormatDecidesWhatIsPublished(t *testing.T) {
	custom := relay.EventFormat{TypeField: "kind", TypeValue: "outbox", IDField: "messageId", SubjectField: "name", PartitionKeyField: "tenant"}
	long := strings.Repeat("x", relay.MaxMessageIDLength)
	tests := []struct {
		name        string
		format      relay.EventFormat
		doc         string
		id, subject string         // of the message; "" when none is sent
		props       map[string]any // the message's application properties
		skipped     bool           // counted in Skipped, else (no message) in Unpublishable
	}{
		{name: "generic event", doc: `{"id":"e-1","type":"event","eventType":"Created","_ts":5}`, id: "e-1", subject: "Created"},
		{name: "generic event with a partition key field named", format: relay.EventFormat{PartitionKeyField: "pk"},
			doc: `{"id":"e-1","pk":"p-1","type":"event","eventType":"Created"}`, id: "e-1", subject: "Created", props: map[string]any{"pk": "p-1"}},
		{name: "a partition key that is not a string is not a property", format: relay.EventFormat{PartitionKeyField: "pk"},
			doc: `{"id":"e-1","pk":7,"type":"event","eventType":"Created"}`, id: "e-1", subject: "Created"},
		{name: "an id of the longest length", doc: `{"id":"` + long + `","type":"event","eventType":"Created"}`, id: long, subject: "Created"},
		{name: "generic non-event", doc: `{"id":"e-1","type":"invoice","eventType":"Created"}`, skipped: true},
		{name: "generic shape without type", doc: `{"id":"e-1","eventType":"Created"}`, skipped: true},
		{name: "type under another case", doc: `{"id":"e-1","Type":"event","eventType":"Created"}`, skipped: true},
		{name: "generic event without subject", doc: `{"id":"e-1","type":"event"}`},
		{name: "generic event without id", doc: `{"type":"event","eventType":"Created"}`},
		{name: "an id over the longest length", doc: `{"id":"` + long + `y","type":"event","eventType":"Created"}`},
		{name: "not a JSON object", doc: `[1]`},
		{name: "custom event", format: custom, doc: `{"id":"d-1","tenant":"t-1","kind":"outbox","messageId":"m-1","name":"Shipped"}`,
			id: "m-1", subject: "Shipped", props: map[string]any{"tenant": "t-1"}},
		{name: "custom shape ignores the generic fields", format: custom, doc: `{"id":"e-1","type":"event","eventType":"Created"}`, skipped: true},
		{name: "custom event without its id field", format: custom, doc: `{"id":"d-1","kind":"outbox","name":"Shipped"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := &topic{}
			r, err := relay.New(&onePage{docs: [][]byte{[]byte(tt.doc)}}, memstore.New("/id"), tp,
				relay.Options{Name: "r", Owner: "a", Events: tt.format, Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := r.Stats()
			_, total := tp.sent()
			if tt.id == "" {
				wantSkipped, wantUnpublishable := int64(0), int64(1)
				if tt.skipped {
					wantSkipped, wantUnpublishable = 1, 0
				}
				if total != 0 || st.Skipped != wantSkipped || st.Unpublishable != wantUnpublishable {
					t.Errorf("sent %d, stats %+v; want none sent, %d skipped, %d unpublishable", total, st, wantSkipped, wantUnpublishable)
				}
				return
			}
			if total != 1 || st.Published != 1 || st.Skipped != 0 || st.Unpublishable != 0 {
				t.Fatalf("sent %d, stats %+v; want one message", total, st)
			}
			m := tp.batches[0][0]
			if *m.MessageID != tt.id || *m.Subject != tt.subject || *m.ContentType != "application/json" {
				t.Errorf("message %q subject %q content type %q; want %q, %q, application/json", *m.MessageID, *m.Subject, *m.ContentType, tt.id, tt.subject)
			}
			if len(m.ApplicationProperties) != len(tt.props) {
				t.Errorf("application properties %v, want %v", m.ApplicationProperties, tt.props)
			}
			for k, v := range tt.props {
				if m.ApplicationProperties[k] != v {
					t.Errorf("application properties %v, want %v", m.ApplicationProperties, tt.props)
				}
			}
			var body, doc map[string]any
			if err := json.Unmarshal(m.Body, &body); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(tt.doc), &doc)
			delete(doc, "_ts")
			if len(body) != len(doc) {
				t.Errorf("body %s, want the document %s without its system properties", m.Body, tt.doc)
			}
		})
	}
}

// The lease documents carry their id, their partition key value, under the
// field of LeasePartitionKeyPath, which a store partitioned there demands;
// under the default /id they carry no other field for it.
func TestRelay_LeaseDocumentsCarryThePartitionKeyField(t *testing.T) {
	for _, tt := range []struct{ path, field string }{{"", "id"}, {"/id", "id"}, {"/tenant", "tenant"}} {
		t.Run("path "+tt.path, func(t *testing.T) {
			leases := memstore.New("/" + tt.field)
			feed := &onePage{docs: [][]byte{[]byte(`{"id":"e-1","type":"event","eventType":"Created"}`)}}
			r, err := relay.New(feed, leases, &topic{}, relay.Options{Name: "r", Owner: "a", LeasePartitionKeyPath: tt.path, Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Step(context.Background()); err != nil {
				t.Fatalf("step with leases partitioned on /%s: %v", tt.field, err)
			}
			if st := r.Stats(); st.Checkpoints != 1 || st.Published != 1 {
				t.Errorf("stats %+v, want the event published and checkpointed", st)
			}
			for _, id := range []string{relay.ManifestID("r"), relay.LeaseID("r", "r")} {
				body, _, err := leases.ReadDocument(context.Background(), id, id)
				if err != nil {
					t.Fatal(err)
				}
				var fields map[string]any
				if err := json.Unmarshal(body, &fields); err != nil {
					t.Fatal(err)
				}
				if fields[tt.field] != id {
					t.Errorf("%s: %s = %v, want its id", id, tt.field, fields[tt.field])
				}
				for k := range fields {
					if k != "id" && k != tt.field && !strings.HasPrefix(k, "_") && !isLeaseField(k) {
						t.Errorf("%s holds an unexpected field %s", id, k)
					}
				}
			}
		})
	}
}

func isLeaseField(k string) bool {
	switch k {
	case "type", "relay", "feedRange", "owner", "expiresAt", "continuation", "checkpointedAt", "feedRanges", "createdAt":
		return true
	}
	return false
}

// New refuses a lease partition key path that is not a top-level field, or
// that is a field the lease documents use for something else.
func TestNew_RefusesALeasePartitionKeyPathItCannotWrite(t *testing.T) {
	for _, path := range []string{"orderId", "/", "/a/b", "/_ts", "/owner", "/type", `/a"b`} {
		_, err := relay.New(&onePage{}, memstore.New("/orderId"), &topic{}, relay.Options{Name: "r", LeasePartitionKeyPath: path})
		if err == nil {
			t.Errorf("New with lease partition key path %q: no error", path)
		}
	}
	for _, path := range []string{"", "/id", "/pk", "/orderId"} {
		if _, err := relay.New(&onePage{}, memstore.New("/orderId"), &topic{}, relay.Options{Name: "r", LeasePartitionKeyPath: path}); err != nil {
			t.Errorf("New with lease partition key path %q: %v", path, err)
		}
	}
}

// Hooks.Read reports the lag of a full page by the EventFormat's TimeField
// when the documents carry no _ts.
func TestRelay_LagByTheEventFormatsTimeField(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		name   string
		format relay.EventFormat
		doc    string
		lag    time.Duration // -1: not reported
	}{
		{"default occurredAt", relay.EventFormat{}, `{"id":"e","type":"event","eventType":"X","occurredAt":"2026-01-02T15:04:00Z"}`, 5 * time.Second},
		{"custom time field", relay.EventFormat{TimeField: "at"}, `{"id":"e","type":"event","eventType":"X","at":"2026-01-02T15:03:05Z"}`, time.Minute},
		{"custom time field absent", relay.EventFormat{TimeField: "at"}, `{"id":"e","type":"event","eventType":"X","occurredAt":"2026-01-02T15:04:00Z"}`, -1},
		{"_ts first", relay.EventFormat{}, `{"id":"e","type":"event","eventType":"X","occurredAt":"2026-01-02T15:04:00Z","_ts":` +
			jsonInt(now.Add(-time.Hour).Unix()) + `}`, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var lags []time.Duration
			r, err := relay.New(&onePage{docs: [][]byte{[]byte(tt.doc)}}, memstore.New("/id"), &topic{}, relay.Options{
				Name: "r", Owner: "a", PageSize: 1, Events: tt.format, Now: func() time.Time { return now }, Logger: discard(),
				Hooks: relay.Hooks{Read: func(_ string, lag time.Duration) { lags = append(lags, lag) }}})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.lag < 0 && len(lags) != 0:
				t.Errorf("lags %v, want none reported", lags)
			case tt.lag >= 0 && (len(lags) != 1 || lags[0] != tt.lag):
				t.Errorf("lags %v, want [%v]", lags, tt.lag)
			}
		})
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
