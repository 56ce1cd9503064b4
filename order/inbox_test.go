package order_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// TestInboxConsumerHonoursSubject: the loyalty consumer completes a status
// change without writing (it has no use for it), processes an order
// placement with either spelling of its subject, and dead-letters an
// unknown subject.
func TestInboxConsumerHonoursSubject(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	c := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: 35 * 24 * time.Hour, Now: fixedNow}
	unknown := msg(validBody)
	unknown.Subject = "OrderRefunded"
	placed := msg(validBody)
	placed.Subject = order.SubjectOrderPlaced
	for _, tt := range []struct {
		name       string
		m          idempotent.Message
		want       idempotent.Outcome
		wantReason string
		wantItems  int
	}{
		{"status change", statusMsg(2, "paid"), idempotent.Ignored, "", 0},
		{"unknown subject", unknown, idempotent.Invalid, idempotent.ReasonUnsupportedMessage, 0},
		{"order placement", placed, idempotent.Created, "", 2},
		{"status change after the order", statusMsg(3, "shipped"), idempotent.Ignored, "", 2},
		{"order placement, no subject", msg(validBody), idempotent.Duplicate, "", 2},
	} {
		r := c.Process(ctx, tt.m)
		if r.Outcome != tt.want || r.Reason != tt.wantReason {
			t.Errorf("%s: %v %q (%s), want %v %q", tt.name, r.Outcome, r.Reason, r.Description, tt.want, tt.wantReason)
		}
		if tt.want == idempotent.Ignored && (r.Key != "ord-1" || r.Description == "") {
			t.Errorf("%s: ignored result %+v does not name the order and why", tt.name, r)
		}
		if n := len(s.Items()); n != tt.wantItems {
			t.Errorf("%s: %d documents stored, want %d", tt.name, n, tt.wantItems)
		}
	}
}

// TestValidateConsumerName: every name ValidateConsumerName accepts gives
// legal marker ids for every legal MessageId, and every name with a
// character Cosmos DB forbids in ids, or too long for the longest
// MessageId, is refused.
func TestValidateConsumerName(t *testing.T) {
	longest := strings.Repeat("n", order.MaxConsumerNameLength)
	for _, name := range []string{"loyalty", "audit-v2", "a.b_c", longest} {
		if err := order.ValidateConsumerName(name); err != nil {
			t.Errorf("ValidateConsumerName(%q) = %v", name, err)
			continue
		}
		id := order.InboxMarkerID(name, strings.Repeat("m", order.MaxMessageIDLength))
		if len(id) > order.MaxDocumentIDLength || strings.ContainsAny(id, `/\?#`) {
			t.Errorf("consumer %q: marker id of the longest MessageId is %d characters (limit %d) or has a forbidden character", name, len(id), order.MaxDocumentIDLength)
		}
	}
	for _, name := range []string{"", "loy/alty", `loy\alty`, "loyalty?", "loyalty#1", "a:b", "loyalty ", longest + "n"} {
		if err := order.ValidateConsumerName(name); err == nil {
			t.Errorf("ValidateConsumerName(%q) accepted", name)
		}
	}
	if order.MaxDocumentIDLength != 255 {
		t.Errorf("MaxDocumentIDLength = %d, Cosmos DB's limit is 255", order.MaxDocumentIDLength)
	}
}

// TestInboxConsumerRefusesABadConfiguration: a consumer whose name or TTL
// would make every marker a 400 is refused by NewInboxConsumer and, built
// as a literal, writes nothing and retries (the breaker's business) rather
// than failing or dead-lettering every message of the backlog.
func TestInboxConsumerRefusesABadConfiguration(t *testing.T) {
	s := memstore.New("/orderId")
	for _, tt := range []struct {
		name string
		ttl  time.Duration
	}{
		{"loy/alty", time.Hour},
		{strings.Repeat("n", order.MaxConsumerNameLength+1), time.Hour},
		{"loyalty", 0},
		{"loyalty", 500 * time.Millisecond},
		{"loyalty", 2147483648 * time.Second},
	} {
		if _, err := order.NewInboxConsumer(tt.name, s, tt.ttl, fixedNow); err == nil {
			t.Errorf("NewInboxConsumer(%q, %v) accepted", tt.name, tt.ttl)
		}
		c := &order.InboxConsumer{Name: tt.name, Store: s, MarkerTTL: tt.ttl, Now: fixedNow}
		r := c.Process(context.Background(), msg(validBody))
		if r.Outcome != idempotent.Transient || r.Reason != order.ReasonConsumerMisconfigured || !r.DependencyFailed() {
			t.Errorf("consumer %q, TTL %v: %v %q (%s), want a retry the breaker counts", tt.name, tt.ttl, r.Outcome, r.Reason, r.Description)
		}
	}
	if n := len(s.Items()); n != 0 {
		t.Errorf("misconfigured consumers wrote %d documents", n)
	}
}

// TestInboxMarkerTTL: the marker's ttl is MarkerTTL rounded up to whole
// seconds (never shorter than configured), and -1 (never expires) for
// UnboundedRetention.
func TestInboxMarkerTTL(t *testing.T) {
	for _, tt := range []struct {
		ttl  time.Duration
		want int
	}{
		{time.Hour, 3600},
		{1500 * time.Millisecond, 2},
		{order.UnboundedRetention, -1},
	} {
		s := memstore.New("/orderId")
		c, err := order.NewInboxConsumer("loyalty", s, tt.ttl, fixedNow)
		if err != nil {
			t.Fatal(err)
		}
		if r := c.Process(context.Background(), msg(validBody)); r.Outcome != idempotent.Created {
			t.Fatalf("TTL %v: %v (%s)", tt.ttl, r.Outcome, r.Description)
		}
		it, ok := s.Get("ord-1", order.InboxMarkerID("loyalty", "ord-1"))
		var m order.InboxMarker
		if !ok || json.Unmarshal(it.Body, &m) != nil || m.TTL != tt.want {
			t.Errorf("MarkerTTL %v: stored ttl %d, want %d", tt.ttl, m.TTL, tt.want)
		}
	}
}

// TestInboxMarkerShape: the marker the core's inbox writes for this
// package's consumers is the documented InboxMarker, every field set, in
// the order's partition (the audit reads it so), and UnboundedRetention is
// the core's UnboundedRetention.
func TestInboxMarkerShape(t *testing.T) {
	if order.UnboundedRetention != idempotent.UnboundedRetention {
		t.Fatalf("UnboundedRetention %v is not idempotent.UnboundedRetention %v", order.UnboundedRetention, idempotent.UnboundedRetention)
	}
	s := memstore.New("/orderId")
	c, err := order.NewInboxConsumer("loyalty", s, time.Hour, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Process(context.Background(), msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatalf("%v (%s)", r.Outcome, r.Description)
	}
	it, ok := s.Get("ord-1", order.InboxMarkerID("loyalty", "ord-1"))
	var m order.InboxMarker
	if !ok || json.Unmarshal(it.Body, &m) != nil {
		t.Fatalf("no marker that decodes as an InboxMarker: %s", it.Body)
	}
	want := order.InboxMarker{ID: "inbox:loyalty:ord-1", OrderID: "ord-1", Type: order.TypeInboxMarker, Consumer: "loyalty", MessageID: "ord-1",
		RequestHash: m.RequestHash, ProcessedAt: fixedNow().UTC(), TTL: 3600}
	if m != want || len(m.RequestHash) != 64 {
		t.Errorf("marker %+v, want %+v with a request hash", m, want)
	}
}

// TestInboxConsumerRefusesATTLBelowItsHorizon: with a Horizon, a marker TTL
// below the queue's minimum retention is refused, and a consumer that
// would forget its markers too early writes nothing and retries.
func TestInboxConsumerRefusesATTLBelowItsHorizon(t *testing.T) {
	h := order.RedeliveryHorizon{LockDuration: time.Minute, MaxDeliveryCount: 6, MessageTimeToLive: time.Hour, DuplicateDetectionWindow: 10 * time.Minute}
	min, _ := h.MinRetention()
	s := memstore.New("/orderId")
	short := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: min - time.Second, Now: fixedNow, Horizon: h}
	if err := short.Validate(); err == nil || !strings.Contains(err.Error(), "minimum retention") {
		t.Errorf("Validate = %v, want the horizon's refusal", err)
	}
	if r := short.Process(context.Background(), msg(validBody)); r.Outcome != idempotent.Transient || r.Reason != order.ReasonConsumerMisconfigured || len(s.Items()) != 0 {
		t.Errorf("%v %q, %d documents: want a retry that wrote nothing", r.Outcome, r.Reason, len(s.Items()))
	}
	enough := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: min, Now: fixedNow, Horizon: h}
	if r := enough.Process(context.Background(), msg(validBody)); r.Outcome != idempotent.Created {
		t.Errorf("TTL at the minimum: %v (%s)", r.Outcome, r.Description)
	}
}
