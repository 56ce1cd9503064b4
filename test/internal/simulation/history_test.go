package simulation

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestHistoryIsBounded counts what a history keeps: of each order at most
// histHead+histTail events (its first and its last, the others counted in
// one line), each at most maxEventLen bytes, and in all at most its budget
// of bytes (plus one line), however many events and orders a run has. A
// short history is kept whole. It kept every event of every order: 500
// events of 200 orders were 100,000 lines.
func TestHistoryIsBounded(t *testing.T) {
	const orders, perOrder = 200, 500
	h := newHistory(time.Now())
	long := strings.Repeat("é", maxEventLen) // cut at a rune boundary
	for i := range perOrder {
		for o := range orders {
			msg := fmt.Sprintf("event %d", i)
			if i == 7 {
				msg += " " + long
			}
			h.add(fmt.Sprintf("ord-%03d", o), "", "%s", msg)
		}
	}
	h.add("short", "", "sent short as #1")
	h.add("short", "loyalty", "delivered short #1")

	events, bytes := h.retained()
	if max := orders*(histHead+histTail) + 2; events > max {
		t.Errorf("%d events kept for %d orders of %d events, want at most %d", events, orders, perOrder, max)
	}
	t.Logf("kept %d events, %d bytes: %.0f bytes per order (of %d events each)", events, bytes, float64(bytes)/orders, perOrder)

	ev := h.of("ord-042")
	if len(ev) != histHead+1+histTail {
		t.Fatalf("ord-042: %d lines, want %d kept and one for the others", len(ev), histHead+histTail+1)
	}
	for i, line := range ev {
		if len(line) > maxEventLen {
			t.Errorf("line %d is %d bytes, want at most %d", i, len(line), maxEventLen)
		}
		if !utf8.ValidString(line) {
			t.Errorf("line %d is cut inside a rune: %q", i, line)
		}
	}
	if !strings.HasSuffix(ev[7], "…") {
		t.Errorf("the long event is not cut: %q", ev[7])
	}
	if !strings.HasSuffix(ev[0], "event 0") || !strings.HasSuffix(ev[histHead-1], fmt.Sprintf("event %d", histHead-1)) {
		t.Errorf("the first events are not kept first: %q … %q", ev[0], ev[histHead-1])
	}
	if want := fmt.Sprintf("%d events not kept", perOrder-histHead-histTail); !strings.Contains(ev[histHead], want) {
		t.Errorf("line %d = %q, want %q", histHead, ev[histHead], want)
	}
	for i, line := range ev[histHead+1:] {
		if want := fmt.Sprintf("event %d", perOrder-histTail+i); !strings.HasSuffix(line, want) {
			t.Errorf("last events: line %q, want %q, in order", line, want)
		}
	}
	if ev := h.of("short"); len(ev) != 2 || !strings.HasSuffix(ev[0], "sent short as #1") || !strings.HasSuffix(ev[1], "[loyalty] delivered short #1") {
		t.Errorf("a short history is not kept whole: %q", ev)
	}

	// A budget spent: no new bytes, only the oldest of the last events
	// replaced, no longer than they were.
	small := newHistory(time.Now())
	small.budget = 10 << 10
	for i := range perOrder {
		for o := range orders {
			small.add(fmt.Sprintf("ord-%03d", o), "", "event %d of a run whose history outgrew its budget", i)
		}
	}
	if _, b := small.retained(); b > small.budget+maxEventLen {
		t.Errorf("%d bytes kept, want at most the budget %d and one line", b, small.budget)
	}
}
