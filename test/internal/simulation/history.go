package simulation

import (
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

// history records everything that happens to each order's messages, on
// every queue: sends, deliveries (with delivery count and lock token),
// handler outcomes, settlements, store calls, payment calls and the
// operator's resubmissions. A failing run prints the history of every
// order involved, so a violation can be understood without a replay. It is
// safe for concurrent use.
//
// What it keeps is bounded, since a run keeps it for every order until the
// end and prints at most maxHistories of them: of each order the first
// histHead and the last histTail events, each cut to maxEventLen bytes, the
// others counted; and in all at most budget bytes of events, past which an
// order's new events only replace its oldest kept ones (histories of
// orders with no event kept yet are counted only). A run of any size then
// keeps at most histHead+histTail events of any order and budget bytes in
// all.
type history struct {
	start  time.Time
	budget int // bytes of event lines kept in all

	mu      sync.Mutex
	byOrder map[string]*keptEvents
	bytes   int // of the event lines kept
}

// The bounds of a history (see history).
const (
	histHead      = 32
	histTail      = 96
	maxEventLen   = 320
	historyBudget = 64 << 20
)

// keptEvents is the kept history of one order: its first events, a ring
// of its last ones, and how many in between were not kept.
type keptEvents struct {
	head    []string
	tail    []string // a ring once full: next is the oldest
	next    int
	omitted int
}

func newHistory(start time.Time) *history {
	return &history{start: start, budget: historyBudget, byOrder: make(map[string]*keptEvents)}
}

// add records an event of order id on queue ("" for the order writers').
func (h *history) add(id, queue, format string, args ...any) {
	if h == nil {
		return
	}
	at := time.Since(h.start)
	where := ""
	if queue != "" {
		where = "[" + queue + "] "
	}
	line := fmt.Sprintf("%12s %s%s", at.Round(time.Millisecond), where, fmt.Sprintf(format, args...))
	line = cutLine(line, maxEventLen)
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.byOrder[id]
	if e == nil {
		e = &keptEvents{}
		h.byOrder[id] = e
	}
	over := h.bytes+len(line) > h.budget
	switch {
	case len(e.head) < histHead && !over:
		e.head = append(e.head, line)
		h.bytes += len(line)
	case len(e.tail) < histTail && !over:
		e.tail = append(e.tail, line)
		h.bytes += len(line)
	case len(e.tail) > 0: // replace the oldest of the last events
		if old := len(e.tail[e.next]); over && len(line) > old {
			line = cutLine(line, old) // spent budget: no growth
		}
		h.bytes += len(line) - len(e.tail[e.next])
		e.tail[e.next] = line
		e.next = (e.next + 1) % len(e.tail)
		e.omitted++
	default:
		e.omitted++
	}
}

// cutLine returns line cut to at most n bytes, at a rune boundary, ending
// in "…" when cut.
func cutLine(line string, n int) string {
	if len(line) <= n {
		return line
	}
	cut := max(n-len("…"), 0)
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	if cut == 0 {
		return line[:0]
	}
	return line[:cut] + "…"
}

// of returns the events of order id, in order, with a line in place of
// those not kept.
func (h *history) of(id string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.byOrder[id]
	if e == nil {
		return nil
	}
	out := slices.Clone(e.head)
	if e.omitted > 0 {
		out = append(out, fmt.Sprintf("%12s … %d events not kept (the history keeps the first %d and the last %d of an order, %d MiB in all) …", "", e.omitted, histHead, histTail, h.budget>>20))
	}
	out = append(out, e.tail[e.next:]...)
	return append(out, e.tail[:e.next]...)
}

// retained returns how many event lines the history keeps, and their
// bytes.
func (h *history) retained() (events, bytes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.byOrder {
		events += len(e.head) + len(e.tail)
	}
	return events, h.bytes
}

// OrderHistory is the history of one order's messages, for the report of a
// failing run: one line per event, with its time since the run started.
type OrderHistory struct {
	OrderID string
	Events  []string
}

// shortToken formats a lock token's first bytes, enough to tell the
// deliveries of a message apart.
func shortToken(t [16]byte) string { return fmt.Sprintf("%x", t[:4]) }
