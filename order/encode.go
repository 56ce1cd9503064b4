package order

import (
	"strconv"
	"time"
)

// The documents of a new order are encoded by hand, the bytes exactly
// those json.Marshal writes (TestAppendDocumentsMatchMarshal and
// FuzzAppendDocumentsMatchMarshal check it), without reflection and into
// one buffer. Whatever the hand encoding does not cover (a string that
// encoding/json escapes, a status hash recorded, a time that is no RFC
// 3339 timestamp) makes it report false, and json.Marshal encodes that
// document instead.

// appendOrderDocument appends json.Marshal's encoding of d to b, or
// reports false.
func appendOrderDocument(b []byte, d *OrderDocument) ([]byte, bool) {
	if len(d.StatusHashes) > 0 || d.StatusHashes == nil {
		return b, false // a map's keys are sorted; nil is null: left to encoding/json
	}
	ok := true
	str := func(prefix, s string) {
		b = append(b, prefix...)
		b, ok = appendPlainString(b, s, ok)
	}
	str(`{"id":`, d.ID)
	str(`,"orderId":`, d.OrderID)
	str(`,"type":`, d.Type)
	str(`,"customerId":`, d.CustomerID)
	str(`,"currency":`, d.Currency)
	b = append(b, `,"lines":`...)
	if d.Lines == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, l := range d.Lines {
			if i > 0 {
				b = append(b, ',')
			}
			str(`{"sku":`, l.SKU)
			b = append(b, `,"quantity":`...)
			b = strconv.AppendInt(b, l.Quantity, 10)
			b = append(b, `,"unitPriceMinor":`...)
			b = strconv.AppendInt(b, l.UnitPriceMinor, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"totalMinor":`...)
	b = strconv.AppendInt(b, d.TotalMinor, 10)
	b = append(b, `,"placedAt":`...)
	b, ok = appendTime(b, d.PlacedAt, ok)
	str(`,"status":`, d.Status)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, d.Version, 10)
	str(`,"requestHash":`, d.RequestHash)
	str(`,"messageId":`, d.MessageID)
	b = append(b, `,"processedAt":`...)
	b, ok = appendTime(b, d.ProcessedAt, ok)
	if d.StatusChangedAt != nil {
		b = append(b, `,"statusChangedAt":`...)
		b, ok = appendTime(b, *d.StatusChangedAt, ok)
	}
	b = append(b, `,"statusHashes":{},"statusHashCount":`...)
	b = strconv.AppendInt(b, int64(d.StatusHashCount), 10)
	b = append(b, '}')
	return b, ok
}

// appendAcceptedEvent appends json.Marshal's encoding of e to b, or
// reports false.
func appendAcceptedEvent(b []byte, e *AcceptedEvent) ([]byte, bool) {
	ok := true
	str := func(prefix, s string) {
		b = append(b, prefix...)
		b, ok = appendPlainString(b, s, ok)
	}
	str(`{"id":`, e.ID)
	str(`,"orderId":`, e.OrderID)
	str(`,"type":`, e.Type)
	str(`,"eventType":`, e.EventType)
	str(`,"customerId":`, e.CustomerID)
	str(`,"currency":`, e.Currency)
	b = append(b, `,"totalMinor":`...)
	b = strconv.AppendInt(b, e.TotalMinor, 10)
	str(`,"requestHash":`, e.RequestHash)
	b = append(b, `,"occurredAt":`...)
	b, ok = appendTime(b, e.OccurredAt, ok)
	b = append(b, '}')
	return b, ok
}

// appendPlainString appends s quoted, and ok, when encoding/json writes it
// unescaped: printable ASCII other than the quote, the backslash and the
// characters it escapes for HTML (<, >, &). Otherwise it reports false.
func appendPlainString(b []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ok
}

// appendTime appends t as time.Time.MarshalJSON does, and ok, unless
// MarshalJSON fails on it (a year outside [0,9999] or a zone offset of a
// day or more): then it reports false.
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	switch {
	case len(b)-n0 < len("2006-01-02T15:04:05Z") || b[n0+len("2006")] != '-':
		return b, false
	case b[len(b)-1] != 'Z':
		c := b[len(b)-len("Z07:00")]
		h := b[len(b)-len("07:00"):]
		if '0' <= c && c <= '9' || 10*(h[0]-'0')+(h[1]-'0') >= 24 {
			return b, false
		}
	}
	return append(b, '"'), ok
}
