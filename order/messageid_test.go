package order_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// placementID returns the MessageId of an order placement with order id id,
// and whether Validate accepts that order.
func placementID(id string) (string, bool) {
	o := validOrder()
	o.OrderID = id
	return o.OrderID, o.Validate() == nil
}

// statusID returns the MessageId of a status change of order id to version
// v, and whether DecodeStatusChange accepts that change.
func statusID(id string, v int64) (string, bool) {
	body := fmt.Sprintf(`{"orderId":%q,"status":"paid","version":%d,"changedAt":"2026-11-30T12:00:00Z"}`, id, v)
	c, err := order.DecodeStatusChange([]byte(body))
	if err != nil {
		return "", false
	}
	return order.StatusMessageID(c.OrderID, c.Version), true
}

// checkMessageIDs asserts the MessageId scheme's guarantee for the given
// ids and versions: every accepted message has a MessageId of at most 128
// characters, no order placement shares one with a status change, and two
// status changes share one only if they are the same change.
func checkMessageIDs(t *testing.T, a, b string, v, w int64) {
	t.Helper()
	ids := map[string]string{} // MessageId -> the logical message
	add := func(id, what string) {
		if len(id) > order.MaxMessageIDLength {
			t.Errorf("%s has MessageId %q of %d characters, over the limit of %d", what, id, len(id), order.MaxMessageIDLength)
		}
		if prev, ok := ids[id]; ok && prev != what {
			t.Errorf("%s and %s share the MessageId %q", prev, what, id)
		}
		ids[id] = what
	}
	for _, id := range []string{a, b} {
		if m, ok := placementID(id); ok {
			add(m, fmt.Sprintf("placement of %q", id))
		}
		for _, ver := range []int64{v, w} {
			if m, ok := statusID(id, ver); ok {
				add(m, fmt.Sprintf("status change of %q to v%d", id, ver))
			}
		}
	}
}

// TestMessageIDsNeverCollide: the reproduced collision (order "X:v2" and
// status change v2 of order "X"), the longest ids and the largest version.
func TestMessageIDsNeverCollide(t *testing.T) {
	longest := strings.Repeat("x", order.MaxOrderIDLength)
	tests := []struct {
		a, b string
		v, w int64
	}{
		{"X:v2", "X", 2, 3},
		{"X", "X:v2", 2, 2},
		{"a:v1", "a", 1, 2},
		{longest, longest + "y", math.MaxInt64, 2},
		{longest[:order.MaxOrderIDLength-3] + "9", longest[:order.MaxOrderIDLength-3], 99, 9},
		{"ord-1", "ord-12", 3, 23},
	}
	for _, tt := range tests {
		checkMessageIDs(t, tt.a, tt.b, tt.v, tt.w)
	}
	// The order id limit is derived from the suffix of the largest int64
	// version, though a status change accepts versions up to
	// order.MaxSafeInteger only (its MessageIds are then shorter still).
	if m := order.StatusMessageID(longest, math.MaxInt64); len(m) != order.MaxMessageIDLength {
		t.Errorf("the longest status MessageId is %q (%d characters), want exactly %d: the order id limit is not derived from the suffix",
			m, len(m), order.MaxMessageIDLength)
	}
	if m, ok := statusID(longest, order.MaxSafeInteger); !ok || len(m) > order.MaxMessageIDLength {
		t.Errorf("the longest accepted status MessageId is %q (%d characters, accepted %v), want at most %d", m, len(m), ok, order.MaxMessageIDLength)
	}
	if _, ok := statusID(longest, math.MaxInt64); ok {
		t.Errorf("a status change to version %d (above order.MaxSafeInteger) was accepted", int64(math.MaxInt64))
	}
	for _, id := range []string{"X:v2", longest + "y"} {
		if _, ok := placementID(id); ok {
			t.Errorf("order id %q accepted", id)
		}
		if err := order.ValidateOrderID(id); !errors.Is(err, order.ErrInvalid) {
			t.Errorf("ValidateOrderID(%q) = %v, want ErrInvalid", id, err)
		}
	}
}

// FuzzMessageIDsNeverCollide: for any two order ids and versions, the
// MessageIds of the messages the contract accepts are distinct and legal.
func FuzzMessageIDsNeverCollide(f *testing.F) {
	f.Add("X:v2", "X", int64(2), int64(3))
	f.Add("ord-1", "ord-1:v2", int64(2), int64(2))
	f.Add(strings.Repeat("z", order.MaxOrderIDLength), "z", int64(math.MaxInt64), int64(10))
	f.Add("a.b_c-d", "a.b_c-d:v9", int64(9), int64(90))
	f.Fuzz(func(t *testing.T, a, b string, v, w int64) {
		checkMessageIDs(t, a, b, v, w)
	})
}

// TestInvalidResultNamesTheOrder: a message whose order id parsed but whose
// other content is invalid still names its order in the result (and so in
// the worker's log line and the dead-letter queue).
func TestInvalidResultNamesTheOrder(t *testing.T) {
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	inbox := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: 35 * 24 * time.Hour, Now: fixedNow}
	badOrder := msg(strings.Replace(validBody, "EUR", "euro", 1))
	badStatus := statusMsg(2, "lost")
	badID := msg(strings.Replace(validBody, `"ord-1"`, `"ord/1"`, 1))
	badID.ID = "ord/1"
	for _, tt := range []struct {
		name    string
		r       idempotent.Result
		orderID string
	}{
		{"order with a bad currency", p.Process(context.Background(), badOrder), "ord-1"},
		{"inbox consumer, order with a bad currency", inbox.Process(context.Background(), badOrder), "ord-1"},
		{"status change with a bad status", p.Process(context.Background(), badStatus), "ord-1"},
		{"an illegal order id is not echoed", p.Process(context.Background(), badID), ""},
	} {
		if tt.r.Outcome != idempotent.Invalid || tt.r.Key != tt.orderID {
			t.Errorf("%s: %v with order id %q (%s), want invalid with %q", tt.name, tt.r.Outcome, tt.r.Key, tt.r.Description, tt.orderID)
		}
	}
}
