package invoice_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

func TestDecode_Rejects(t *testing.T) {
	tests := []struct {
		name, body, want string // want: a substring of the error
	}{
		{"not JSON", `{"invoiceId":`, "unexpected EOF"},
		{"not an object", `[1]`, "cannot unmarshal array"},
		{"unknown field", strings.Replace(body("inv-1"), "{", `{"note": "x", `, 1), `unknown field "note"`},
		{"data after the object", body("inv-1") + "{}", "data after the invoice object"},
		{"missing invoiceId", body("", "invoiceId", ""), "invoiceId: must be"},
		{"invoiceId with a colon", body("inv:1"), "invoiceId: must be"},
		{"invoiceId with a slash", body("inv/1"), "invoiceId: must be"},
		{"invoiceId too long", body(strings.Repeat("x", 129)), "invoiceId: must be"},
		{"missing customerId", body("inv-1", "customerId", ""), "customerId: must be"},
		{"lower-case currency", body("inv-1", "currency", `"eur"`), "currency: must be three"},
		{"zero amount", body("inv-1", "amountMinor", "0"), "amountMinor: must be positive"},
		{"fractional amount", body("inv-1", "amountMinor", "19.99"), "amountMinor"},
		{"missing issuedAt", body("inv-1", "issuedAt", ""), "issuedAt: is required"},
		{"every problem at once", `{}`, "customerId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := invoice.Kind{}.Decode([]byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode(%s) = %v; want an error containing %q", tt.body, err, tt.want)
			}
			if v != (invoice.Invoice{}) {
				t.Errorf("Decode(%s) returned %+v with its error, want the zero Invoice", tt.body, v)
			}
		})
	}
}

// TestRequestHash: every field changes the hash; the JSON text, the time
// zone of issuedAt and the length-prefixing boundaries do not fool it.
func TestRequestHash(t *testing.T) {
	base := hashOf(t, body("inv-1"))
	same := []string{
		`{"amountMinor":1999,"issuedAt":"2026-11-30T05:00:00-05:00","currency":"EUR","customerId":"cust-42","invoiceId":"inv-1"}`,
		"{\n  \"invoiceId\": \"inv-1\", \"customerId\": \"cust-42\", \"currency\": \"EUR\", \"amountMinor\": 1999, \"issuedAt\": \"2026-11-30T10:00:00.000Z\"\n}",
	}
	for _, b := range same {
		if got := hashOf(t, b); got != base {
			t.Errorf("hash of %s = %s, want %s, the hash of the same invoice", b, got, base)
		}
	}
	different := map[string]string{
		"invoiceId":   body("inv-2"),
		"customerId":  body("inv-1", "customerId", `"cust-43"`),
		"currency":    body("inv-1", "currency", `"USD"`),
		"amountMinor": body("inv-1", "amountMinor", "2000"),
		"issuedAt":    body("inv-1", "issuedAt", `"2026-11-30T10:00:00.000000001Z"`),
	}
	for field, b := range different {
		if hashOf(t, b) == base {
			t.Errorf("changing %s does not change the hash", field)
		}
	}
	// Without length prefixes, "ab"+"c" and "a"+"bc" would encode alike.
	if hashOf(t, body("inv-1", "customerId", `"ab"`, "currency", `"CDE"`)) == hashOf(t, body("inv-1", "customerId", `"abC"`, "currency", `"DEF"`)) {
		t.Error("two invoices whose fields concatenate alike have one hash")
	}
}

func TestDocuments(t *testing.T) {
	v, err := invoice.Kind{}.Decode([]byte(body("inv-1")))
	if err != nil {
		t.Fatal(err)
	}
	hash := invoice.Kind{}.RequestHash(v)
	docs, err := invoice.Kind{}.Documents(idempotent.Message{ID: "inv-1"}, v, hash)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].ID != "inv-1" || docs[1].ID != "InvoiceIssued:inv-1" || invoice.EventID("inv-1") != docs[1].ID {
		t.Fatalf("documents %v, want the marker inv-1 and the event InvoiceIssued:inv-1", docs)
	}
	for i, want := range []map[string]any{
		{"id": "inv-1", "invoiceId": "inv-1", "type": "invoice", "requestHash": hash, "messageId": "inv-1", "amountMinor": 1999.0},
		{"id": "InvoiceIssued:inv-1", "invoiceId": "inv-1", "type": "event", "eventType": "InvoiceIssued", "requestHash": hash, "customerId": "cust-42"},
	} {
		var got map[string]any
		if err := json.Unmarshal(docs[i].Body, &got); err != nil {
			t.Fatal(err)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("document %s: %s = %v, want %v", docs[i].ID, k, got[k], w)
			}
		}
		if h, err := idempotent.MarkerHash(docs[i].Body); err != nil || h != hash {
			t.Errorf("document %s: MarkerHash = %q, %v", docs[i].ID, h, err)
		}
	}
}
