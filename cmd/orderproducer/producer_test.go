package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/order"
)

// fakeBatch holds messages up to a byte limit, like a Service Bus batch.
type fakeBatch struct {
	limit, size int
	msgs        []*azservicebus.Message
}

func (b *fakeBatch) AddMessage(m *azservicebus.Message, _ *azservicebus.AddMessageOptions) error {
	if b.size+len(m.Body) > b.limit {
		return azservicebus.ErrMessageTooLarge
	}
	b.size += len(m.Body)
	b.msgs = append(b.msgs, m)
	return nil
}

func (b *fakeBatch) NumMessages() int32 { return int32(len(b.msgs)) }

// fakeSender records the batches it sends; failAfter > 0 fails that send.
type fakeSender struct {
	limit     int
	sent      [][]*azservicebus.Message
	failAfter int
}

func (s *fakeSender) NewBatch(context.Context) (batch, error) { return &fakeBatch{limit: s.limit}, nil }
func (s *fakeSender) SendBatch(_ context.Context, b batch) error {
	if s.failAfter > 0 && len(s.sent)+1 == s.failAfter {
		return errors.New("connection lost")
	}
	s.sent = append(s.sent, b.(*fakeBatch).msgs)
	return nil
}

func msgs(sizes ...int) []outgoing {
	var out []outgoing
	for i, n := range sizes {
		out = append(out, outgoing{id: string(rune('a' + i)), body: make([]byte, n)})
	}
	return out
}

func TestSendAllBatches(t *testing.T) {
	tests := []struct {
		name        string
		limit, max  int
		sizes       []int
		wantBatches []int // messages per batch
		wantErr     bool
	}{
		{"one batch", 100, 10, []int{10, 10, 10}, []int{3}, false},
		{"count limit", 100, 2, []int{10, 10, 10}, []int{2, 1}, false},
		{"size limit splits", 25, 10, []int{10, 10, 10, 10}, []int{2, 2}, false},
		{"message larger than any batch", 25, 10, []int{10, 30}, []int{1}, true},
		{"nothing to send", 25, 10, nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &fakeSender{limit: tt.limit}
			progressed := 0
			sent, err := sendAll(context.Background(), s, sendTracing{}, msgs(tt.sizes...), tt.max, func(n int) { progressed += n })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			var got []int
			total := 0
			for _, b := range s.sent {
				got = append(got, len(b))
				total += len(b)
			}
			if len(got) != len(tt.wantBatches) {
				t.Fatalf("batches %v, want %v", got, tt.wantBatches)
			}
			for i := range got {
				if got[i] != tt.wantBatches[i] {
					t.Fatalf("batches %v, want %v", got, tt.wantBatches)
				}
			}
			if sent != total || progressed != total {
				t.Errorf("sent = %d, progress = %d, want %d", sent, progressed, total)
			}
		})
	}
}

func TestSendAllSetsMessageIDAndContentType(t *testing.T) {
	s := &fakeSender{limit: 1000}
	if _, err := sendAll(context.Background(), s, sendTracing{}, []outgoing{{id: "ord-1", body: []byte("{}")}}, 10, func(int) {}); err != nil {
		t.Fatal(err)
	}
	m := s.sent[0][0]
	if *m.MessageID != "ord-1" || *m.ContentType != "application/json" {
		t.Errorf("message id %q, content type %q", *m.MessageID, *m.ContentType)
	}
}

func TestSendAllReportsHowManyWereSent(t *testing.T) {
	s := &fakeSender{limit: 1000, failAfter: 2}
	sent, err := sendAll(context.Background(), s, sendTracing{}, msgs(1, 1, 1, 1, 1), 2, func(int) {})
	if err == nil || sent != 2 {
		t.Errorf("sent %d, err %v; want 2 sent and an error", sent, err)
	}
}

func TestPlan(t *testing.T) {
	c := config{Count: 1000, Duplicates: 0.1, Reused: 0.05, Malformed: 0.02, Seed: 42, IDPrefix: "ord"}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	orders := generate(c, now)
	first, second := plan(c, orders, now)
	counts := map[kind]int{}
	for _, o := range append(first, second...) {
		counts[o.kind]++
	}
	if counts[original] != 1000 || counts[malformed] != 20 {
		t.Errorf("counts = %v, want 1000 originals and 20 malformed", counts)
	}
	if counts[duplicate] < 70 || counts[duplicate] > 130 || counts[reused] < 30 || counts[reused] > 70 {
		t.Errorf("counts = %v, want about 100 duplicates and 50 reused ids", counts)
	}
	bodies := map[string]string{}
	hashes := map[string]string{}
	for _, o := range first {
		if o.kind == original {
			bodies[o.id] = string(o.body)
			d, err := order.Decode(o.body)
			if err != nil {
				t.Fatalf("original %s invalid: %v", o.id, err)
			}
			hashes[o.id] = d.RequestHash()
		} else if _, err := order.Decode(o.body); err == nil {
			t.Errorf("malformed message %s decodes", o.id)
		}
	}
	for _, o := range second {
		switch o.kind {
		case duplicate:
			if bodies[o.id] != string(o.body) {
				t.Errorf("duplicate %s differs from its original", o.id)
			}
		case reused:
			d, err := order.Decode(o.body)
			if err != nil || d.RequestHash() == hashes[o.id] {
				t.Errorf("reused id %s: err %v, or the same request hash as the original", o.id, err)
			}
		}
	}
	again, _ := plan(c, orders, now)
	if len(again) != len(first) {
		t.Error("plan is not deterministic for a seed")
	}
}

func TestReadOrders(t *testing.T) {
	good := `{"orderId":"o-1","customerId":"c","currency":"EUR","lines":[{"sku":"a","quantity":1,"unitPriceMinor":5}],"totalMinor":5,"placedAt":"2026-11-30T10:00:00Z"}`
	got, err := readOrders(strings.NewReader(good + "\n\n" + good + "\n"))
	if err != nil || len(got) != 2 || got[0].order.OrderID != "o-1" {
		t.Fatalf("readOrders = %v, %v", got, err)
	}
	_, err = readOrders(strings.NewReader(good + "\n{bad\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !errors.Is(err, order.ErrInvalid) {
		t.Errorf("readOrders error = %v, want line 2 and ErrInvalid", err)
	}
	if _, err := readOrders(strings.NewReader("\n")); err == nil {
		t.Error("an empty input was accepted")
	}
}

func TestConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"nothing set", nil, nil, "SERVICEBUS_NAMESPACE"},
		{"namespace from env", nil, map[string]string{"SERVICEBUS_NAMESPACE": "x.servicebus.windows.net"}, ""},
		{"both set", nil, map[string]string{"SERVICEBUS_NAMESPACE": "x", "SERVICEBUS_CONNECTION_STRING": "y"}, "only one"},
		{"bad fraction", []string{"-duplicates", "1.5"}, map[string]string{"SERVICEBUS_NAMESPACE": "x"}, "-duplicates"},
		{"bad count", []string{"-count", "0"}, map[string]string{"SERVICEBUS_NAMESPACE": "x"}, "-count"},
		{"flag overrides env", []string{"-queue", ""}, map[string]string{"SERVICEBUS_NAMESPACE": "x", "SERVICEBUS_QUEUE": "q"}, "SERVICEBUS_QUEUE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			_, err := parseConfig(fs, tt.args, env(tt.env))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunHelpAndBadConfig(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, nil, io.Discard, &out); err != nil {
		t.Errorf("-h: %v", err)
	}
	if !strings.Contains(out.String(), "SERVICEBUS_CONNECTION_STRING") {
		t.Error("-h does not document SERVICEBUS_CONNECTION_STRING")
	}
	if err := run(context.Background(), nil, func(string) string { return "" }, nil, io.Discard, io.Discard); err == nil {
		t.Error("run without configuration succeeded")
	}
}

func TestPlanStatusChanges(t *testing.T) {
	c := config{Count: 500, StatusChanges: 0.2, Seed: 9, IDPrefix: "ord"}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	_, second := plan(c, generate(c, now), now)
	var changes []outgoing
	for _, o := range second {
		if o.kind == statusChange {
			changes = append(changes, o)
		}
	}
	if n := len(changes); n < 140 || n > 260 || n%2 != 0 {
		t.Fatalf("%d status changes, want about 200, two per chosen order", n)
	}
	for i := 0; i < len(changes); i += 2 {
		newer, older := changes[i], changes[i+1]
		for _, o := range []outgoing{newer, older} {
			sc, err := order.DecodeStatusChange(o.body)
			if err != nil || o.subject != order.SubjectOrderStatusChanged || o.id != order.StatusMessageID(sc.OrderID, sc.Version) {
				t.Fatalf("status change %s: %+v, %v", o.id, sc, err)
			}
		}
		a, _ := order.DecodeStatusChange(newer.body)
		b, _ := order.DecodeStatusChange(older.body)
		if a.OrderID != b.OrderID || a.Version != 3 || b.Version != 2 {
			t.Errorf("status changes %s, %s: want version 3 before version 2 of one order", newer.id, older.id)
		}
	}
	m := newMessage(changes[0])
	if m.Subject == nil || *m.Subject != order.SubjectOrderStatusChanged {
		t.Errorf("the Service Bus message has subject %v", m.Subject)
	}
	if m := newMessage(outgoing{id: "o"}); m.Subject != nil {
		t.Errorf("an order placement has subject %q", *m.Subject)
	}
}

// TestProgressFirstRate checks the first rate reading of the progress bar:
// it may not exceed the messages added divided by the time since the bar
// was made (it read 38,550,501 msg/s when the bar's clock started at the
// first render).
func TestProgressFirstRate(t *testing.T) {
	var out strings.Builder
	made := time.Now()
	bar := newProgress("always", &out, 1000)
	time.Sleep(10 * time.Millisecond)
	elapsed := time.Since(made)
	if err := bar.Add(100); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(\d+) msg/(s|min|hr)`).FindAllStringSubmatch(out.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no rate in %q", out.String())
	}
	last := m[len(m)-1]
	rate, _ := strconv.ParseFloat(last[1], 64)
	rate /= map[string]float64{"s": 1, "min": 60, "hr": 3600}[last[2]]
	if bound := 100 / elapsed.Seconds(); rate > bound*1.01+1 {
		t.Errorf("first rate %v msg/s exceeds 100 messages over %v (%.0f msg/s)", rate, elapsed, bound)
	}
}
