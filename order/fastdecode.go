package order

import "time"

// decodePlain decodes body into o in one pass over its bytes, checking
// every key as it goes, when body is in the plain form the project's
// producers send: one JSON object whose keys are exactly the wire
// contract's field names, each at most once per object; strings of
// printable ASCII without escapes; integers written as plain digits (at
// most 18, so that no int64 overflows); no null. It reports false for
// anything else (a repeated, misspelt or unknown key, an escape, a
// non-ASCII byte, a fraction or exponent, null, malformed JSON, trailing
// data), and o is then to be discarded: decodeStrict decides such a body
// and names its error.
//
// Whatever it accepts, decodeStrict (encoding/json, then the strict key
// check) accepts too, with an equal Order: FuzzDecodePlainAgrees checks
// this for every body the fuzzer finds. It allocates the strings, the
// lines and sentAt, and nothing else. The caller has checked MaxBodySize.
func decodePlain(body []byte, o *Order) bool {
	s := plainScanner{b: body}
	if !s.object(func(key []byte) bool { return s.orderField(o, key) }) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// plainScanner is decodePlain's position in the body.
type plainScanner struct {
	b    []byte
	i    int
	seen uint16 // the order object's keys seen so far, one bit per field
}

// Bits of plainScanner.seen, and of a line's keys in line.
const (
	seenOrderID = 1 << iota
	seenCustomerID
	seenCurrency
	seenLines
	seenTotalMinor
	seenPlacedAt
	seenSentAt
	seenTraceID
)

// orderField decodes the value of the order's key key.
func (s *plainScanner) orderField(o *Order, key []byte) bool {
	var bit uint16
	ok := false
	switch string(key) {
	case "orderId":
		bit = seenOrderID
		o.OrderID, ok = s.str()
	case "customerId":
		bit = seenCustomerID
		o.CustomerID, ok = s.str()
	case "currency":
		bit = seenCurrency
		o.Currency, ok = s.str()
	case "lines":
		bit = seenLines
		o.Lines, ok = s.lines()
	case "totalMinor":
		bit = seenTotalMinor
		o.TotalMinor, ok = s.integer()
	case "placedAt":
		bit = seenPlacedAt
		ok = s.time(&o.PlacedAt)
	case "sentAt":
		bit = seenSentAt
		t := new(time.Time)
		ok = s.time(t)
		o.SentAt = t
	case "traceId":
		bit = seenTraceID
		o.TraceID, ok = s.str()
	default:
		return false
	}
	if s.seen&bit != 0 {
		return false
	}
	s.seen |= bit
	return ok
}

// lines decodes the array of order lines.
func (s *plainScanner) lines() ([]Line, bool) {
	s.space()
	if !s.consume('[') {
		return nil, false
	}
	// Room for a typical order's lines; and encoding/json decodes [] as
	// an empty slice, not nil.
	lines := make([]Line, 0, 4)
	s.space()
	if s.consume(']') {
		return lines, true
	}
	for {
		var l Line
		var seen uint8
		ok := s.object(func(key []byte) bool {
			var bit uint8
			ok := false
			switch string(key) {
			case "sku":
				bit = 1
				l.SKU, ok = s.str()
			case "quantity":
				bit = 2
				l.Quantity, ok = s.integer()
			case "unitPriceMinor":
				bit = 4
				l.UnitPriceMinor, ok = s.integer()
			default:
				return false
			}
			if seen&bit != 0 {
				return false
			}
			seen |= bit
			return ok
		})
		if !ok {
			return nil, false
		}
		lines = append(lines, l)
		s.space()
		if s.consume(']') {
			return lines, true
		}
		if !s.consume(',') {
			return nil, false
		}
	}
}

// object scans one object, calling field with each key (its bytes, no
// escape in them) to decode the value that follows the colon.
func (s *plainScanner) object(field func(key []byte) bool) bool {
	s.space()
	if !s.consume('{') {
		return false
	}
	s.space()
	if s.consume('}') {
		return true
	}
	for {
		s.space()
		key, ok := s.raw()
		if !ok {
			return false
		}
		s.space()
		if !s.consume(':') {
			return false
		}
		if !field(key) {
			return false
		}
		s.space()
		if s.consume('}') {
			return true
		}
		if !s.consume(',') {
			return false
		}
	}
}

func (s *plainScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *plainScanner) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// raw scans a string of printable ASCII without escapes and returns its
// bytes between the quotes.
func (s *plainScanner) raw() ([]byte, bool) {
	if !s.consume('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20 || c == '\\' || c >= 0x7f:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

func (s *plainScanner) str() (string, bool) {
	s.space()
	r, ok := s.raw()
	return string(r), ok
}

// integer scans an integer of at most 18 digits, with an optional minus
// sign, in JSON's grammar (no leading zero, no plus sign), followed by a
// delimiter: a fraction or an exponent is left to encoding/json.
func (s *plainScanner) integer() (int64, bool) {
	s.space()
	neg := s.consume('-')
	start := s.i
	var v int64
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		v = v*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	n := s.i - start
	if n == 0 || n > 18 || (n > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r', ',', '}', ']':
		default:
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, true
}

// time decodes a timestamp with time.Time's own UnmarshalJSON, as
// encoding/json does, from the quoted string.
func (s *plainScanner) time(t *time.Time) bool {
	s.space()
	start := s.i
	if _, ok := s.raw(); !ok {
		return false
	}
	return t.UnmarshalJSON(s.b[start:s.i]) == nil
}

// decodeStoredPlain decodes a stored order document into d in one pass,
// when it is in the form the project writes it, with the system
// properties Cosmos DB adds (keys that begin with an underscore, whose
// values are strings or integers). It reports false for anything else
// (another key, a repeated one, an escape in a field's string, a number
// that is not a plain integer, null, trailing data), and d is then to be
// discarded: json.Unmarshal decides such a body, as ReadOrder always did.
// Whatever it accepts, json.Unmarshal accepts with an equal document
// (FuzzDecodeStoredPlainAgrees).
func decodeStoredPlain(body []byte, d *OrderDocument) bool {
	s := plainScanner{b: body}
	var seen uint32
	field := func(key []byte) bool {
		if len(key) > 0 && key[0] == '_' {
			return s.skipSystem()
		}
		bit, ok := uint32(0), false
		switch string(key) {
		case "id":
			bit = 1 << 0
			d.ID, ok = s.str()
		case "orderId":
			bit = 1 << 1
			d.OrderID, ok = s.str()
		case "type":
			bit = 1 << 2
			d.Type, ok = s.str()
		case "customerId":
			bit = 1 << 3
			d.CustomerID, ok = s.str()
		case "currency":
			bit = 1 << 4
			d.Currency, ok = s.str()
		case "lines":
			bit = 1 << 5
			d.Lines, ok = s.lines()
		case "totalMinor":
			bit = 1 << 6
			d.TotalMinor, ok = s.integer()
		case "placedAt":
			bit = 1 << 7
			ok = s.time(&d.PlacedAt)
		case "status":
			bit = 1 << 8
			d.Status, ok = s.str()
		case "version":
			bit = 1 << 9
			d.Version, ok = s.integer()
		case "requestHash":
			bit = 1 << 10
			d.RequestHash, ok = s.str()
		case "messageId":
			bit = 1 << 11
			d.MessageID, ok = s.str()
		case "processedAt":
			bit = 1 << 12
			ok = s.time(&d.ProcessedAt)
		case "statusChangedAt":
			bit = 1 << 13
			t := new(time.Time)
			ok = s.time(t)
			d.StatusChangedAt = t
		case "statusHashes":
			bit = 1 << 14
			d.StatusHashes, ok = s.statusHashes()
		case "statusHashCount":
			bit = 1 << 15
			var n int64
			n, ok = s.integer()
			d.StatusHashCount = int(n)
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return ok
	}
	if !s.object(field) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// statusHashes decodes the map of status hashes: keys of plain integers,
// each once, values of plain strings.
func (s *plainScanner) statusHashes() (map[int64]string, bool) {
	m := map[int64]string{}
	ok := s.object(func(key []byte) bool {
		if len(key) == 0 || key[0] != '-' && (key[0] < '0' || key[0] > '9') {
			return false // strconv.ParseInt takes no space or plus sign
		}
		k := plainScanner{b: key}
		v, ok := k.integer()
		if !ok || k.i != len(key) {
			return false
		}
		if _, dup := m[v]; dup {
			return false
		}
		m[v], ok = s.str()
		return ok
	})
	return m, ok
}

// skipSystem skips the value of a system property: a string (escapes
// allowed, and checked) or a plain integer.
func (s *plainScanner) skipSystem() bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] != '"' {
		_, ok := s.integer()
		return ok
	}
	s.i++ // '"'
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
			continue
		}
		s.i++
	}
	return false
}
