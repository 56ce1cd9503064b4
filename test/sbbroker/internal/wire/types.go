// Package wire encodes and decodes the AMQP 1.0 type system and frames that
// the Service Bus test broker speaks.
//
// It covers what a broker needs for performatives and SASL frames: every
// primitive type, lists, maps, arrays and described types. Message sections
// are not handled here; the broker uses go-amqp's exported
// Message.MarshalBinary and Message.UnmarshalBinary for them.
//
// Decoding never trusts a length or count prefix: every size is checked
// against the bytes actually present before anything is allocated, and
// nesting depth is bounded, so a malformed frame yields an error, never a
// panic or an outsized allocation.
//
// All functions are safe for concurrent use; values are plain data.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Symbol is the AMQP symbol type: an ASCII string from a restricted domain
// (conditions, mechanisms, annotation keys).
type Symbol string

// UUID is the AMQP uuid type, in RFC 4122 byte order.
type UUID [16]byte

// Described is an AMQP described type: a descriptor (usually a uint64 code
// or a Symbol) and the value it describes.
type Described struct {
	Descriptor any
	Value      any
}

// Pair is one key/value entry of a Map.
type Pair struct {
	Key   any
	Value any
}

// Map is an AMQP map. It keeps wire order and allows keys of any type,
// including types that are not comparable in Go (binary).
type Map []Pair

// Get returns the value stored under key and whether it was present. A
// string key also matches a Symbol key with the same text, and the reverse,
// because peers use both for the same fields.
func (m Map) Get(key any) (any, bool) {
	for _, p := range m {
		if keyEqual(p.Key, key) {
			return p.Value, true
		}
	}
	return nil, false
}

func keyEqual(a, b any) bool {
	switch a := a.(type) {
	case string:
		switch b := b.(type) {
		case string:
			return a == b
		case Symbol:
			return a == string(b)
		}
	case Symbol:
		switch b := b.(type) {
		case string:
			return string(a) == b
		case Symbol:
			return a == b
		}
	case []byte:
		return false
	}
	if _, ok := b.([]byte); ok {
		return false
	}
	return a == b
}

// Array is an AMQP array: a sequence of values that share one type. When
// encoding, the element type is taken from the first element; an empty Array
// is encoded with the null element constructor.
type Array []any

// Type codes of the AMQP 1.0 type system (part 1, section 1.6).
const (
	codeDescribed  = 0x00
	codeNull       = 0x40
	codeTrue       = 0x41
	codeFalse      = 0x42
	codeUint0      = 0x43
	codeUlong0     = 0x44
	codeList0      = 0x45
	codeUbyte      = 0x50
	codeByte       = 0x51
	codeSmallUint  = 0x52
	codeSmallUlong = 0x53
	codeSmallInt   = 0x54
	codeSmallLong  = 0x55
	codeBool       = 0x56
	codeUshort     = 0x60
	codeShort      = 0x61
	codeUint       = 0x70
	codeInt        = 0x71
	codeFloat      = 0x72
	codeChar       = 0x73
	codeDecimal32  = 0x74
	codeUlong      = 0x80
	codeLong       = 0x81
	codeDouble     = 0x82
	codeTimestamp  = 0x83
	codeDecimal64  = 0x84
	codeDecimal128 = 0x94
	codeUUID       = 0x98
	codeVbin8      = 0xa0
	codeStr8       = 0xa1
	codeSym8       = 0xa3
	codeVbin32     = 0xb0
	codeStr32      = 0xb1
	codeSym32      = 0xb3
	codeList8      = 0xc0
	codeMap8       = 0xc1
	codeList32     = 0xd0
	codeMap32      = 0xd1
	codeArray8     = 0xe0
	codeArray32    = 0xf0
)

// maxDepth bounds the nesting of compound values, so that a hostile frame
// cannot exhaust the stack.
const maxDepth = 32

// maxElements bounds the element count of one compound value. go-amqp uses
// the same limit.
const maxElements = 65536

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("wire: malformed AMQP data")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Decode decodes one AMQP value from the start of b. It returns the value
// and the number of bytes it occupied.
//
// Go types produced: nil, bool, uint8, uint16, uint32, uint64, int8, int16,
// int32, int64, float32, float64, rune (char), time.Time (UTC), UUID,
// []byte, string, Symbol, []any (list), Map, Array and Described. Decimal
// values are returned as their raw bytes in a Described with descriptor
// "decimal".
func Decode(b []byte) (v any, n int, err error) {
	d := decoder{buf: b}
	v, err = d.value(0)
	return v, d.pos, err
}

type decoder struct {
	buf []byte
	pos int
}

func (d *decoder) need(n int) ([]byte, error) {
	if n < 0 || len(d.buf)-d.pos < n {
		return nil, malformed("need %d bytes at offset %d, have %d", n, d.pos, len(d.buf)-d.pos)
	}
	s := d.buf[d.pos : d.pos+n]
	d.pos += n
	return s, nil
}

func (d *decoder) byte() (byte, error) {
	s, err := d.need(1)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, malformed("nesting deeper than %d", maxDepth)
	}
	code, err := d.byte()
	if err != nil {
		return nil, err
	}
	if code == codeDescribed {
		desc, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		val, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		return Described{Descriptor: desc, Value: val}, nil
	}
	return d.body(code, depth)
}

// body decodes the value that follows constructor code.
func (d *decoder) body(code byte, depth int) (any, error) {
	switch code {
	case codeNull:
		return nil, nil
	case codeTrue:
		return true, nil
	case codeFalse:
		return false, nil
	case codeBool:
		b, err := d.byte()
		if err != nil {
			return nil, err
		}
		switch b {
		case 0:
			return false, nil
		case 1:
			return true, nil
		}
		return nil, malformed("boolean byte %#x", b)
	case codeUint0:
		return uint32(0), nil
	case codeUlong0:
		return uint64(0), nil
	case codeUbyte:
		return d.byte()
	case codeByte:
		b, err := d.byte()
		return int8(b), err
	case codeSmallUint:
		b, err := d.byte()
		return uint32(b), err
	case codeSmallUlong:
		b, err := d.byte()
		return uint64(b), err
	case codeSmallInt:
		b, err := d.byte()
		return int32(int8(b)), err
	case codeSmallLong:
		b, err := d.byte()
		return int64(int8(b)), err
	case codeUshort, codeShort:
		s, err := d.need(2)
		if err != nil {
			return nil, err
		}
		u := binary.BigEndian.Uint16(s)
		if code == codeShort {
			return int16(u), nil
		}
		return u, nil
	case codeUint, codeInt, codeFloat, codeChar, codeDecimal32:
		s, err := d.need(4)
		if err != nil {
			return nil, err
		}
		u := binary.BigEndian.Uint32(s)
		switch code {
		case codeUint:
			return u, nil
		case codeInt:
			return int32(u), nil
		case codeFloat:
			return math.Float32frombits(u), nil
		case codeChar:
			return rune(u), nil
		}
		return Described{Descriptor: "decimal", Value: append([]byte(nil), s...)}, nil
	case codeUlong, codeLong, codeDouble, codeTimestamp, codeDecimal64:
		s, err := d.need(8)
		if err != nil {
			return nil, err
		}
		u := binary.BigEndian.Uint64(s)
		switch code {
		case codeUlong:
			return u, nil
		case codeLong:
			return int64(u), nil
		case codeDouble:
			return math.Float64frombits(u), nil
		case codeTimestamp:
			return time.UnixMilli(int64(u)).UTC(), nil
		}
		return Described{Descriptor: "decimal", Value: append([]byte(nil), s...)}, nil
	case codeDecimal128, codeUUID:
		s, err := d.need(16)
		if err != nil {
			return nil, err
		}
		if code == codeUUID {
			return UUID(s), nil
		}
		return Described{Descriptor: "decimal", Value: append([]byte(nil), s...)}, nil
	case codeVbin8, codeStr8, codeSym8, codeVbin32, codeStr32, codeSym32:
		n, err := d.size(code == codeVbin32 || code == codeStr32 || code == codeSym32)
		if err != nil {
			return nil, err
		}
		s, err := d.need(n)
		if err != nil {
			return nil, err
		}
		switch code {
		case codeVbin8, codeVbin32:
			return append([]byte{}, s...), nil
		case codeStr8, codeStr32:
			return string(s), nil
		}
		return Symbol(s), nil
	case codeList0:
		return []any{}, nil
	case codeList8, codeList32, codeMap8, codeMap32:
		wide := code == codeList32 || code == codeMap32
		body, count, err := d.compound(wide)
		if err != nil {
			return nil, err
		}
		sub := decoder{buf: body}
		if code == codeMap8 || code == codeMap32 {
			if count%2 != 0 {
				return nil, malformed("map with odd element count %d", count)
			}
			m := make(Map, 0, count/2)
			for i := 0; i < count; i += 2 {
				k, err := sub.value(depth + 1)
				if err != nil {
					return nil, err
				}
				v, err := sub.value(depth + 1)
				if err != nil {
					return nil, err
				}
				m = append(m, Pair{Key: k, Value: v})
			}
			return m, nil
		}
		l := make([]any, 0, count)
		for i := 0; i < count; i++ {
			v, err := sub.value(depth + 1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case codeArray8, codeArray32:
		body, count, err := d.compound(code == codeArray32)
		if err != nil {
			return nil, err
		}
		sub := decoder{buf: body}
		elem, err := sub.byte()
		if err != nil {
			return nil, err
		}
		if elem == codeDescribed {
			return nil, malformed("arrays of described types are not supported")
		}
		a := make(Array, 0, min(count, len(body)))
		for i := 0; i < count; i++ {
			v, err := sub.body(elem, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	}
	return nil, malformed("unknown type code %#02x", code)
}

// size reads a one- or four-byte length prefix.
func (d *decoder) size(wide bool) (int, error) {
	if !wide {
		b, err := d.byte()
		return int(b), err
	}
	s, err := d.need(4)
	if err != nil {
		return 0, err
	}
	u := binary.BigEndian.Uint32(s)
	if uint64(u) > uint64(len(d.buf)-d.pos) {
		return 0, malformed("size %d exceeds the %d bytes left", u, len(d.buf)-d.pos)
	}
	return int(u), nil
}

// compound reads the size and count of a list, map or array and returns
// the bytes that hold its elements.
func (d *decoder) compound(wide bool) (body []byte, count int, err error) {
	size, err := d.size(wide)
	if err != nil {
		return nil, 0, err
	}
	s, err := d.need(size)
	if err != nil {
		return nil, 0, err
	}
	sub := decoder{buf: s}
	if wide {
		c, err := sub.need(4)
		if err != nil {
			return nil, 0, err
		}
		u := binary.BigEndian.Uint32(c)
		if u > maxElements {
			return nil, 0, malformed("element count %d exceeds %d", u, maxElements)
		}
		count = int(u)
	} else {
		c, err := sub.byte()
		if err != nil {
			return nil, 0, err
		}
		count = int(c)
	}
	return s[sub.pos:], count, nil
}
