package relay_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// onePage is a change feed of one range that returns docs once.
type onePage struct{ docs [][]byte }

func (f *onePage) FeedRanges(context.Context) ([]string, error) { return []string{"r"}, nil }
func (f *onePage) ReadChanges(_ context.Context, _, cont string, _ int) ([][]byte, string, error) {
	if cont == "done" {
		return nil, "done", nil
	}
	return f.docs, "done", nil
}

// Whatever a change feed document holds, the relay with the generic event
// shape (the zero EventFormat) does not panic, and it publishes exactly the
// documents of type "event" with a usable id and event type, with that id as
// MessageId and no system property in the body. Its leases live in a
// container partitioned on /id, the default.
func FuzzRelayDecodesChangeFeedDocuments(f *testing.F) {
	f.Add([]byte(`{"id":"OrderAccepted:o","orderId":"o","type":"event","eventType":"OrderAccepted","_lsn":3}`))
	f.Add([]byte(`{"id":"o","orderId":"o","type":"order"}`))
	f.Add([]byte(`{"id":7,"type":"event","eventType":"X"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"id":"x","tYpe":"event","eventType":"X"}`)) // not "type": encoding/json alone would take it
	f.Add([]byte(`{"type":"event","eventType":"","id":"x"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		tp := &topic{}
		r, err := relay.New(&onePage{docs: [][]byte{doc}}, memstore.New("/id"), tp,
			relay.Options{Name: "fz", Owner: "a", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		isObject := json.Unmarshal(doc, &fields) == nil && fields != nil
		str := func(k string) string { // exact key, as the relay reads it
			var v string
			_ = json.Unmarshal(fields[k], &v)
			return v
		}
		id := str("id")
		want := isObject && str("type") == "event" && id != "" && len(id) <= relay.MaxMessageIDLength && str("eventType") != ""
		sent, total := tp.sent()
		if want != (total == 1) || (want && sent[id] != 1) {
			t.Fatalf("doc %s: sent %v; want published: %v", doc, sent, want)
		}
		if want {
			var body map[string]json.RawMessage
			if err := json.Unmarshal(tp.batches[0][0].Body, &body); err != nil {
				t.Fatal(err)
			}
			for k := range body {
				if strings.HasPrefix(k, "_") {
					t.Errorf("system property %s in the body", k)
				}
			}
		}
	})
}
