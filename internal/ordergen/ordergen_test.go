package ordergen_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
)

func TestGeneratedOrdersAreValidAndDeterministic(t *testing.T) {
	g1, g2 := ordergen.New(7, "ord"), ordergen.New(7, "ord")
	for i := range 200 {
		o := g1.Order(i)
		if err := o.Validate(); err != nil {
			t.Fatalf("order %d: %v", i, err)
		}
		if o2 := g2.Order(i); o.RequestHash() != o2.RequestHash() {
			t.Fatalf("order %d differs between generators with one seed", i)
		}
		c := ordergen.Changed(o)
		if err := c.Validate(); err != nil || c.OrderID != o.OrderID || c.RequestHash() == o.RequestHash() {
			t.Fatalf("Changed(order %d) = %+v, %v: want a valid order with the same id and another hash", i, c, err)
		}
		b := ordergen.Body(o, time.Now(), "t")
		d, err := order.Decode(b)
		if err != nil || d.RequestHash() != o.RequestHash() {
			t.Fatalf("Body(order %d) does not decode to the same order: %v", i, err)
		}
	}
	if bytes.Equal(ordergen.Body(g1.Order(1), time.Time{}, ""), ordergen.Body(ordergen.New(8, "ord").Order(1), time.Time{}, "")) {
		t.Error("seeds 7 and 8 gave the same order")
	}
}

func TestMalformedBodiesAreInvalid(t *testing.T) {
	for i := range 3 {
		if _, err := order.Decode(ordergen.Malformed("ord-x", i)); !errors.Is(err, order.ErrInvalid) {
			t.Errorf("Malformed kind %d decoded: %v", i, err)
		}
	}
}
