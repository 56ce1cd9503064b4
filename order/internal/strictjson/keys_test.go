package strictjson_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order/internal/strictjson"
)

type line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

type doc struct {
	ID     string    `json:"orderId"`
	Lines  []line    `json:"lines"`
	Placed time.Time `json:"placedAt"`
}

func TestCheckKeys(t *testing.T) {
	for _, tt := range []struct {
		body, wantPath string // wantPath "": accepted
	}{
		{`{"orderId":"a","lines":[{"sku":"x","quantity":1}],"placedAt":"2026-11-30T10:00:00Z"}`, ""},
		{`{"orderId":"a","orderId":"b"}`, "orderId"},
		{`{"OrderId":"a"}`, "orderId"},
		{`{"orderId":"a","lines":[{"sku":"x","SKU":"y"}]}`, "lines[0].sku"},
		{`{"orderId":"a","lines":[{"sku":"x"},{"Quantity":2}]}`, "lines[1].quantity"},
		{`{"orderId":"a\u0041"}`, ""},
	} {
		var d doc
		if err := json.Unmarshal([]byte(tt.body), &d); err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		err := strictjson.CheckKeys([]byte(tt.body), &d)
		var ke *strictjson.KeyError
		switch {
		case tt.wantPath == "" && err != nil:
			t.Errorf("CheckKeys(%s) = %v, want nil", tt.body, err)
		case tt.wantPath != "" && (!errors.As(err, &ke) || ke.Path != tt.wantPath):
			t.Errorf("CheckKeys(%s) = %v, want a *KeyError at %s", tt.body, err, tt.wantPath)
		}
	}
}

// BenchmarkCheckKeys measures the key scan alone on a typical order body,
// the cost a strict decode adds to encoding/json.
func BenchmarkCheckKeys(b *testing.B) {
	body := []byte(`{"orderId": "ord-1", "lines": [{"sku": "SKU-1", "quantity": 2}, {"sku": "SKU-2", "quantity": 1}], "placedAt": "2026-11-30T10:00:00Z"}`)
	var d doc
	if err := json.Unmarshal(body, &d); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := strictjson.CheckKeys(body, &d); err != nil {
			b.Fatal(err)
		}
	}
}
