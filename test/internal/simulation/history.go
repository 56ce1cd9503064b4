package simulation

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// history records everything that happens to each order's messages, on
// every queue: sends, deliveries (with delivery count and lock token),
// handler outcomes, settlements, store calls, payment calls and the
// operator's resubmissions. A failing run prints the history of every
// order involved, so a violation can be understood without a replay. It is
// safe for concurrent use.
type history struct {
	start time.Time

	mu      sync.Mutex
	byOrder map[string][]string
}

func newHistory(start time.Time) *history {
	return &history{start: start, byOrder: make(map[string][]string)}
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
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byOrder[id] = append(h.byOrder[id], line)
}

// of returns the events of order id, in order.
func (h *history) of(id string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.byOrder[id])
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
