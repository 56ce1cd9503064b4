package order

import "testing"

// BenchmarkCheckKeys measures the key scan alone on a typical order body,
// the cost Decode adds to encoding/json for rejecting ambiguous keys.
func BenchmarkCheckKeys(b *testing.B) {
	body := []byte(`{
  "orderId": "ord-1", "customerId": "cust-1", "currency": "EUR",
  "lines": [{"sku": "SKU-1", "quantity": 2, "unitPriceMinor": 1999}, {"sku": "SKU-2", "quantity": 1, "unitPriceMinor": 500}],
  "totalMinor": 4498, "placedAt": "2026-11-30T10:00:00Z",
  "sentAt": "2026-11-30T10:00:01Z", "traceId": "abc"
}`)
	var o Order
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkKeys(body, &o); err != nil {
			b.Fatal(err)
		}
	}
}
