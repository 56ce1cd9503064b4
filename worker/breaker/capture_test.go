package breaker_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// captured is one log record, its attributes flattened with dotted group
// names.
type captured struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
	time  time.Time
	pc    uintptr // the record's program counter: 0 when it has none
}

// captureHandler is a slog.Handler that keeps every record at or above
// its level. It is safe for concurrent use.
type captureHandler struct {
	level slog.Level
	mu    *sync.Mutex
	recs  *[]captured
	pre   []slog.Attr
}

func newCapture(level slog.Level) *captureHandler {
	return &captureHandler{level: level, mu: &sync.Mutex{}, recs: &[]captured{}}
}

func (h *captureHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	c := captured{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}, time: r.Time, pc: r.PC}
	for _, a := range h.pre {
		flatten(c.attrs, "", a)
	}
	r.Attrs(func(a slog.Attr) bool { flatten(c.attrs, "", a); return true })
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

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.pre = append(append([]slog.Attr(nil), h.pre...), as...)
	return &c
}

func (h *captureHandler) WithGroup(string) slog.Handler { return h } // the worker uses no WithGroup

func (h *captureHandler) records() []captured {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]captured(nil), *h.recs...)
}

// matching returns the records whose message contains substr.
func (h *captureHandler) matching(substr string) []captured {
	var out []captured
	for _, r := range h.records() {
		if strings.Contains(r.msg, substr) {
			out = append(out, r)
		}
	}
	return out
}
