package workertest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Record is one captured log record, its attributes flattened with dotted
// group names ("group.key").
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]slog.Value
	Time  time.Time
	PC    uintptr // the record's program counter: 0 when it has none
}

// Capture is a slog.Handler that keeps every record at or above its
// level. It is safe for concurrent use; handlers derived with WithAttrs
// share its records.
type Capture struct {
	level slog.Level
	mu    *sync.Mutex
	recs  *[]Record
	pre   []slog.Attr
}

var _ slog.Handler = (*Capture)(nil)

// NewCapture returns a handler that keeps the records at or above level.
func NewCapture(level slog.Level) *Capture {
	return &Capture{level: level, mu: &sync.Mutex{}, recs: &[]Record{}}
}

// Enabled reports whether l is at or above the handler's level.
func (h *Capture) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

// Handle keeps r.
func (h *Capture) Handle(_ context.Context, r slog.Record) error {
	c := Record{Level: r.Level, Msg: r.Message, Attrs: map[string]slog.Value{}, Time: r.Time, PC: r.PC}
	for _, a := range h.pre {
		flatten(c.Attrs, "", a)
	}
	r.Attrs(func(a slog.Attr) bool { flatten(c.Attrs, "", a); return true })
	h.mu.Lock()
	*h.recs = append(*h.recs, c)
	h.mu.Unlock()
	return nil
}

func flatten(into map[string]slog.Value, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, g := range v.Group() {
			flatten(into, prefix+a.Key+".", g)
		}
		return
	}
	into[prefix+a.Key] = v
}

// WithAttrs returns a handler that adds as to every record it keeps.
func (h *Capture) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.pre = append(append([]slog.Attr(nil), h.pre...), as...)
	return &c
}

// WithGroup returns h: the worker and its options use no WithGroup.
func (h *Capture) WithGroup(string) slog.Handler { return h }

// Records returns the records kept so far, in order.
func (h *Capture) Records() []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Record(nil), *h.recs...)
}

// Matching returns the records whose message contains substr.
func (h *Capture) Matching(substr string) []Record {
	var out []Record
	for _, r := range h.Records() {
		if strings.Contains(r.Msg, substr) {
			out = append(out, r)
		}
	}
	return out
}
