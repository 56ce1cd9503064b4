package order_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
)

const validBody = `{
  "orderId": "ord-1", "customerId": "cust-1", "currency": "EUR",
  "lines": [{"sku": "SKU-1", "quantity": 2, "unitPriceMinor": 1999}, {"sku": "SKU-2", "quantity": 1, "unitPriceMinor": 500}],
  "totalMinor": 4498, "placedAt": "2026-11-30T10:00:00Z",
  "sentAt": "2026-11-30T10:00:01Z", "traceId": "abc"
}`

func validOrder() order.Order {
	return order.Order{
		OrderID: "ord-1", CustomerID: "cust-1", Currency: "EUR",
		Lines:      []order.Line{{SKU: "SKU-1", Quantity: 2, UnitPriceMinor: 1999}, {SKU: "SKU-2", Quantity: 1, UnitPriceMinor: 500}},
		TotalMinor: 4498, PlacedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
	}
}

func TestDecodeValid(t *testing.T) {
	o, err := order.Decode([]byte(validBody))
	if err != nil {
		t.Fatal(err)
	}
	want := validOrder()
	if o.OrderID != want.OrderID || o.TotalMinor != want.TotalMinor || len(o.Lines) != 2 || o.TraceID != "abc" || o.SentAt == nil {
		t.Errorf("Decode = %+v", o)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, body, field string // field empty: a *SyntaxError
	}{
		{"not JSON", `hello`, ""},
		{"truncated", `{"orderId": "a"`, ""},
		{"trailing data", validBody + `{}`, ""},
		{"array", `[]`, ""},
		{"unknown field", strings.Replace(validBody, `"traceId"`, `"discount"`, 1), ""},
		{"wrong type", strings.Replace(validBody, `"totalMinor": 4498`, `"totalMinor": "4498"`, 1), "totalMinor"},
		{"fractional amount", strings.Replace(validBody, `"totalMinor": 4498`, `"totalMinor": 44.98`, 1), "totalMinor"},
		{"missing orderId", strings.Replace(validBody, `"orderId": "ord-1",`, ``, 1), "orderId"},
		{"orderId with slash", strings.Replace(validBody, `"ord-1"`, `"ord/1"`, 1), "orderId"},
		{"orderId too long", strings.Replace(validBody, `"ord-1"`, `"`+strings.Repeat("x", 129)+`"`, 1), "orderId"},
		{"missing customerId", strings.Replace(validBody, `"customerId": "cust-1",`, ``, 1), "customerId"},
		{"lower-case currency", strings.Replace(validBody, `"EUR"`, `"eur"`, 1), "currency"},
		{"no lines", `{"orderId":"o","customerId":"c","currency":"EUR","lines":[],"totalMinor":0,"placedAt":"2026-11-30T10:00:00Z"}`, "lines"},
		{"empty sku", strings.Replace(validBody, `"SKU-2"`, `""`, 1), "lines[1].sku"},
		{"zero quantity", strings.Replace(validBody, `"quantity": 1,`, `"quantity": 0,`, 1), "lines[1].quantity"},
		{"huge quantity", strings.Replace(validBody, `"quantity": 1,`, `"quantity": 10001,`, 1), "lines[1].quantity"},
		{"negative price", strings.Replace(validBody, `"unitPriceMinor": 500`, `"unitPriceMinor": -500`, 1), "lines[1].unitPriceMinor"},
		{"overflowing price", strings.Replace(validBody, `"unitPriceMinor": 500`, `"unitPriceMinor": 9223372036854775807`, 1), "lines[1].unitPriceMinor"},
		{"total disagrees", strings.Replace(validBody, `4498`, `4499`, 1), "totalMinor"},
		{"missing placedAt", strings.Replace(validBody, `"placedAt": "2026-11-30T10:00:00Z",`, ``, 1), "placedAt"},
		{"too large", `{"orderId":"` + strings.Repeat("x", order.MaxBodySize) + `"}`, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := order.Decode([]byte(tt.body))
			if !errors.Is(err, order.ErrInvalid) {
				t.Fatalf("Decode error = %v, want one matching ErrInvalid", err)
			}
			var fe *order.FieldError
			var se *order.SyntaxError
			switch {
			case tt.field == "" && !errors.As(err, &se):
				t.Errorf("Decode error = %T %v, want *SyntaxError", err, err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Errorf("Decode error = %v, want a *FieldError for %q", err, tt.field)
			}
		})
	}
}

func TestDecodeTooManyLines(t *testing.T) {
	o := validOrder()
	o.Lines = make([]order.Line, order.MaxLines+1)
	for i := range o.Lines {
		o.Lines[i] = order.Line{SKU: "s", Quantity: 1, UnitPriceMinor: 1}
	}
	o.TotalMinor = int64(len(o.Lines))
	var fe *order.FieldError
	if err := o.Validate(); !errors.As(err, &fe) || fe.Field != "lines" {
		t.Errorf("Validate = %v, want a lines error", err)
	}
}

func TestRequestHashIgnoresRepresentationAndMetadata(t *testing.T) {
	variants := []string{
		validBody,
		// keys reordered, white space removed
		`{"totalMinor":4498,"lines":[{"unitPriceMinor":1999,"quantity":2,"sku":"SKU-1"},{"quantity":1,"sku":"SKU-2","unitPriceMinor":500}],"placedAt":"2026-11-30T10:00:00Z","currency":"EUR","customerId":"cust-1","orderId":"ord-1"}`,
		// other metadata, the same instant in another zone
		strings.NewReplacer(`"sentAt": "2026-11-30T10:00:01Z"`, `"sentAt": "2026-12-01T00:00:00Z"`, `"traceId": "abc"`, `"traceId": "zzz"`,
			`"2026-11-30T10:00:00Z"`, `"2026-11-30T11:00:00+01:00"`).Replace(validBody),
	}
	want := validOrder()
	wantHash := want.RequestHash()
	for i, body := range variants {
		o, err := order.Decode([]byte(body))
		if err != nil {
			t.Fatalf("variant %d: %v", i, err)
		}
		if got := o.RequestHash(); got != wantHash {
			t.Errorf("variant %d: hash %s, want %s", i, got, wantHash)
		}
	}
}

func TestRequestHashSeesEveryBusinessField(t *testing.T) {
	base := validOrder()
	baseHash := base.RequestHash()
	changes := map[string]func(o *order.Order){
		"orderId":        func(o *order.Order) { o.OrderID = "ord-2" },
		"customerId":     func(o *order.Order) { o.CustomerID = "cust-2" },
		"currency":       func(o *order.Order) { o.Currency = "USD" },
		"totalMinor":     func(o *order.Order) { o.TotalMinor++ },
		"placedAt":       func(o *order.Order) { o.PlacedAt = o.PlacedAt.Add(time.Nanosecond) },
		"sku":            func(o *order.Order) { o.Lines[0].SKU = "SKU-9" },
		"quantity":       func(o *order.Order) { o.Lines[0].Quantity = 3 },
		"unitPriceMinor": func(o *order.Order) { o.Lines[1].UnitPriceMinor = 501 },
		"line order":     func(o *order.Order) { o.Lines[0], o.Lines[1] = o.Lines[1], o.Lines[0] },
		"extra line":     func(o *order.Order) { o.Lines = append(o.Lines, order.Line{SKU: "x", Quantity: 1}) },
		"string framing": func(o *order.Order) { o.OrderID, o.CustomerID = "ord-1c", "ust-1" },
	}
	for name, change := range changes {
		o := validOrder()
		o.Lines = append([]order.Line(nil), base.Lines...)
		change(&o)
		if o.RequestHash() == baseHash {
			t.Errorf("changing %s did not change the request hash", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(validBody))
	f.Add([]byte(`{"orderId":"a","lines":[{"quantity":9223372036854775807,"unitPriceMinor":2}]}`))
	f.Add([]byte(`{"placedAt":"not a time"}`))
	f.Add([]byte(`null`))
	// Ambiguous keys: repeated (also through an escape), case variants, at
	// the top and in a line.
	f.Add([]byte(strings.Replace(validBody, `"totalMinor": 4498,`, `"totalMinor": 1, "totalMinor": 4498,`, 1)))
	f.Add([]byte(strings.Replace(validBody, `"orderId": "ord-1",`, `"orderId": "ord-1", "\u006frderId": "ord-1",`, 1)))
	f.Add([]byte(strings.Replace(validBody, `"orderId"`, `"OrderID"`, 1)))
	f.Add([]byte(strings.Replace(validBody, `"quantity": 1,`, `"quantity": 1, "Quantity": 2,`, 1)))
	f.Add([]byte(strings.Replace(validBody, `{"sku": "SKU-1"`, `{"s\u212au": "SKU-1"`, 1)))
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := order.Decode(body)
		if err != nil {
			if !errors.Is(err, order.ErrInvalid) {
				t.Fatalf("Decode error %v does not match ErrInvalid", err)
			}
			return
		}
		// Every JSON reader sees this order: no key repeats, every key is
		// spelled as its field.
		if err := strictKeys(body); err != nil {
			t.Fatalf("Decode accepted a body with ambiguous keys: %v", err)
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("Decode accepted an order that Validate rejects: %v", err)
		}
		_ = o.RequestHash()
	})
}

// TestRequestHashIsStable: the request hash of a known order is the one
// every earlier version computed. Stored orders carry it, so a change to the
// encoding (or to how it is built) that changes it would make every
// redelivery of a stored order a Mismatch.
func TestRequestHashIsStable(t *testing.T) {
	o := validOrder()
	if got, want := o.RequestHash(), "7527ef973e755aa251270fc49388bc1037e7a0153ab40ba973e2280c3ea14dbc"; got != want {
		t.Errorf("RequestHash = %s, want %s", got, want)
	}
}
