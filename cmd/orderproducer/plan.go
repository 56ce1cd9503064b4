package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// kind says why a message is sent.
type kind int

const (
	original     kind = iota // the first send of an order
	duplicate                // the same bytes again, as a producer retry
	reused                   // the same order id with other content
	malformed                // a body that can never be processed
	statusChange             // an OrderStatusChanged message
)

var kindNames = [...]string{original: "original", duplicate: "duplicate", reused: "reused", malformed: "malformed", statusChange: "status change"}

func (k kind) String() string { return kindNames[k] }

// outgoing is one message to send. Its MessageId is id; subject is empty
// for an order placement.
type outgoing struct {
	id      string
	subject string
	body    []byte
	kind    kind
}

// source is an order and the body that carries it.
type source struct {
	order order.Order
	body  []byte
}

// generate returns c.Count generated orders.
func generate(c config, now time.Time) []source {
	g := ordergen.New(c.Seed, c.IDPrefix)
	out := make([]source, c.Count)
	for i := range out {
		o := g.Order(i)
		out[i] = source{order: o, body: ordergen.Body(o, now, fmt.Sprintf("%016x", c.Seed^uint64(i)))}
	}
	return out
}

// maxIDPrefix is the longest -id-prefix whose generated order ids (of up
// to the 1,000,000 orders -count allows) are valid order ids: at most
// order.MaxOrderIDLength characters, short enough for every MessageId made
// from them.
func maxIDPrefix() int { return order.MaxOrderIDLength - len(ordergen.New(0, "").ID(999_999)) }

// readOrders reads one JSON order per line; blank lines are skipped. A line
// that is not a valid order stops the run with its line number: the producer
// never sends what it was not asked to.
func readOrders(r io.Reader) ([]source, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), order.MaxBodySize+1)
	var out []source
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		o, err := order.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("input line %d: %w", line, err)
		}
		out = append(out, source{order: o, body: append([]byte(nil), b...)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading input: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the input holds no orders")
	}
	return out, nil
}

// plan decides what to send: first every original (and the malformed
// messages), then, after the resend delay, the duplicates, the reused ids
// and the status changes, newest version first, so that the older change
// arrives late and must be recognised as stale. The choice is deterministic
// for c.Seed.
func plan(c config, orders []source, now time.Time) (first, second []outgoing) {
	r := rand.New(rand.NewPCG(c.Seed, 0x9e3779b97f4a7c15))
	for _, s := range orders {
		first = append(first, outgoing{id: s.order.OrderID, body: s.body, kind: original})
		if r.Float64() < c.Duplicates {
			second = append(second, outgoing{id: s.order.OrderID, body: s.body, kind: duplicate})
		}
		if r.Float64() < c.Reused {
			changed := ordergen.Changed(s.order)
			second = append(second, outgoing{id: s.order.OrderID, body: ordergen.Body(changed, now, "reused"), kind: reused})
		}
		if r.Float64() < c.StatusChanges {
			second = append(second, statusMessage(s.order.OrderID, 3, "shipped", now), statusMessage(s.order.OrderID, 2, "paid", now))
		}
	}
	bad := int(c.Malformed*float64(len(orders)) + 0.5)
	for i := range bad {
		id := fmt.Sprintf("%s-bad-%06d", c.IDPrefix, i)
		first = append(first, outgoing{id: id, body: ordergen.Malformed(id, i), kind: malformed})
	}
	return first, second
}

// statusMessage returns the status change of an order to version.
func statusMessage(orderID string, version int64, status string, now time.Time) outgoing {
	body, err := json.Marshal(order.StatusChange{OrderID: orderID, Status: status, Version: version, ChangedAt: now.Add(time.Duration(version) * time.Minute)})
	if err != nil {
		panic(err) // a StatusChange always marshals
	}
	return outgoing{id: order.StatusMessageID(orderID, version), subject: order.SubjectOrderStatusChanged, body: body, kind: statusChange}
}
