// Package ordergen generates realistic, valid orders and the faulty variants
// the project's producer, simulation and end-to-end tests send: exact
// duplicates, the same order id with other content, and malformed bodies.
// Everything is deterministic for a given seed, so a run can be replayed.
package ordergen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
)

var (
	currencies = []string{"EUR", "USD", "GBP", "SEK"}
	skus       = []string{"BOOK-0042", "MUG-0007", "TEE-0100", "PEN-0003", "BAG-0019", "CAP-0021", "LAMP-0008", "SOCK-0404"}
	epoch      = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
)

// Generator makes orders. It is not safe for concurrent use.
type Generator struct {
	seed   uint64
	prefix string
}

// New returns a Generator whose order ids are prefix + "-" + a six-digit
// number. The same seed and prefix always give the same orders.
func New(seed uint64, prefix string) *Generator { return &Generator{seed: seed, prefix: prefix} }

// ID returns the id of order i.
func (g *Generator) ID(i int) string { return fmt.Sprintf("%s-%06d", g.prefix, i) }

// Order returns order i: 1 to 4 lines, a total that agrees with them.
func (g *Generator) Order(i int) order.Order {
	r := rand.New(rand.NewPCG(g.seed, uint64(i)))
	o := order.Order{
		OrderID:    g.ID(i),
		CustomerID: fmt.Sprintf("cust-%04d", r.IntN(5000)),
		Currency:   currencies[r.IntN(len(currencies))],
		PlacedAt:   epoch.Add(time.Duration(i) * time.Second),
	}
	for range 1 + r.IntN(4) {
		l := order.Line{SKU: skus[r.IntN(len(skus))], Quantity: int64(1 + r.IntN(5)), UnitPriceMinor: int64(100 + r.IntN(9900))}
		o.Lines = append(o.Lines, l)
		o.TotalMinor += l.Quantity * l.UnitPriceMinor
	}
	return o
}

// Changed returns o with the same id and other content: one more unit of its
// first line, as when a producer reuses an id for an amended order.
func Changed(o order.Order) order.Order {
	c := o
	c.Lines = append([]order.Line(nil), o.Lines...)
	c.Lines[0].Quantity++
	c.TotalMinor += c.Lines[0].UnitPriceMinor
	return c
}

// Body returns the JSON message body of o, stamped with the metadata a
// producer adds (sentAt, traceId), which the request hash ignores.
func Body(o order.Order, sentAt time.Time, traceID string) []byte {
	o.SentAt = &sentAt
	o.TraceID = traceID
	b, err := json.Marshal(o)
	if err != nil {
		panic(err) // an Order always marshals
	}
	return b
}

// Malformed returns a body that can never be processed, of one of several
// kinds chosen by i: not JSON, a missing field, a total that disagrees.
func Malformed(id string, i int) []byte {
	switch i % 3 {
	case 0:
		return []byte(`{"orderId": "` + id + `", "lines": [`)
	case 1:
		return []byte(`{"orderId": "` + id + `", "currency": "EUR", "lines": [], "totalMinor": 0}`)
	default:
		return []byte(`{"orderId": "` + id + `", "customerId": "c-1", "currency": "EUR", "placedAt": "2026-11-30T09:00:00Z",
			"lines": [{"sku": "MUG-0007", "quantity": 1, "unitPriceMinor": 900}], "totalMinor": 1}`)
	}
}
