package order_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// TestDecodeRejectsAmbiguousKeys: encoding/json lets the last of two equal
// keys win and matches keys case-insensitively; another JSON reader may take
// the first key, or ignore a misspelt one, and see another order in the
// same bytes. Decode rejects both, at any depth, naming the key.
func TestDecodeRejectsAmbiguousKeys(t *testing.T) {
	tests := []struct {
		name, body, field, problem string
	}{
		{"duplicate orderId", strings.Replace(validBody, `"orderId": "ord-1",`, `"orderId": "ord-1", "orderId": "ord-2",`, 1),
			"orderId", `duplicate key "orderId"`},
		{"duplicate total", strings.Replace(validBody, `"totalMinor": 4498,`, `"totalMinor": 1, "totalMinor": 4498,`, 1),
			"totalMinor", `duplicate key "totalMinor"`},
		{"duplicate by an escape", strings.Replace(validBody, `"orderId": "ord-1",`, `"orderId": "ord-1", "\u006frderId": "ord-1",`, 1),
			"orderId", `duplicate key "orderId"`},
		{"duplicate metadata", strings.Replace(validBody, `"traceId": "abc"`, `"traceId": "abc", "traceId": "abd"`, 1),
			"traceId", `duplicate key "traceId"`},
		{"case variant", strings.Replace(validBody, `"orderId"`, `"OrderId"`, 1),
			"orderId", `key "OrderId" must be spelled "orderId"`},
		{"case variant beside the field", strings.Replace(validBody, `"customerId": "cust-1",`, `"customerId": "cust-1", "CUSTOMERID": "cust-2",`, 1),
			"customerId", `key "CUSTOMERID" must be spelled "customerId"`},
		{"duplicate in a line", strings.Replace(validBody, `"quantity": 1,`, `"quantity": 1, "quantity": 2,`, 1),
			"lines[1].quantity", `duplicate key "quantity"`},
		{"case variant in a line", strings.Replace(validBody, `{"sku": "SKU-1"`, `{"Sku": "SKU-1"`, 1),
			"lines[0].sku", `key "Sku" must be spelled "sku"`},
		{"Kelvin sign folds to k", strings.Replace(validBody, `{"sku": "SKU-1"`, `{"s\u212au": "SKU-1"`, 1),
			"lines[0].sku", "must be spelled \"sku\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := json.Marshal(json.RawMessage(tt.body)); err != nil {
				t.Fatalf("test body is not JSON: %v", err)
			}
			_, err := order.Decode([]byte(tt.body))
			var fe *order.FieldError
			if !errors.Is(err, order.ErrInvalid) || !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Problem, tt.problem) {
				t.Fatalf("Decode error = %v, want a *FieldError for %s: %s", err, tt.field, tt.problem)
			}
			r := order.NewProcessor(nil, fixedNow).Process(t.Context(), msg(tt.body))
			if r.Outcome != idempotent.Invalid || r.Reason != idempotent.ReasonInvalidMessage || !strings.Contains(r.Description, tt.problem) {
				t.Errorf("Process = %v %q (%s), want invalid naming the key", r.Outcome, r.Reason, r.Description)
			}
		})
	}
	status := `{"orderId":"ord-1","status":"paid","version":2,"version":3,"changedAt":"2026-11-30T12:00:00Z"}`
	if _, err := order.DecodeStatusChange([]byte(status)); err == nil || !strings.Contains(err.Error(), `duplicate key "version"`) {
		t.Errorf("DecodeStatusChange with a repeated version = %v, want a duplicate-key error", err)
	}
	if _, err := order.DecodeStatusChange([]byte(strings.Replace(status, `"version":2,"version":3`, `"Version":3`, 1))); err == nil || !strings.Contains(err.Error(), `must be spelled "version"`) {
		t.Errorf("DecodeStatusChange with a case variant = %v, want a spelling error", err)
	}
}

// orderFields are the exact keys of an order object and of a line object.
var orderFields = map[string]bool{"orderId": true, "customerId": true, "currency": true, "lines": true,
	"totalMinor": true, "placedAt": true, "sentAt": true, "traceId": true}
var lineFields = map[string]bool{"sku": true, "quantity": true, "unitPriceMinor": true}

// strictKeys is an independent reader, on encoding/json's token stream: it
// reports a repeated key in any object, or a key of the order or of one of
// its lines that is not exactly a field name.
func strictKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object    bool
		keys      map[string]bool
		fields    map[string]bool // nil: any key
		expectKey bool
		lastKey   string
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("repeated key %q", k)
			}
			if top.fields != nil && !top.fields[k] {
				return fmt.Errorf("key %q is no field", k)
			}
			top.keys[k], top.expectKey, top.lastKey = true, false, k
			continue
		}
		if top != nil && top.object {
			top.expectKey = true
		}
		switch tok {
		case json.Delim('{'):
			var fields map[string]bool
			switch {
			case len(stack) == 0:
				fields = orderFields
			case len(stack) == 2 && stack[0].lastKey == "lines" && !stack[1].object:
				fields = lineFields
			}
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, fields: fields, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

func TestStrictKeysReader(t *testing.T) {
	if err := strictKeys([]byte(validBody)); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{`{"orderId":1,"orderId":2}`, `{"OrderId":1}`, `{"lines":[{"sku":1,"SKU":2}]}`} {
		if strictKeys([]byte(b)) == nil {
			t.Errorf("strictKeys(%s) found nothing", b)
		}
	}
}
