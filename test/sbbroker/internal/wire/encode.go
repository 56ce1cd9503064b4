package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Append appends the AMQP encoding of v to b and returns the extended
// slice. It accepts the Go types Decode produces, plus int (encoded as
// long), []Symbol (encoded as an array of symbols) and map[string]any
// (encoded in Go's random map order; use Map for a fixed order). Lists and
// maps use the one-byte size form when they fit, as AMQP encoders do.
func Append(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, codeNull), nil
	case bool:
		if v {
			return append(b, codeTrue), nil
		}
		return append(b, codeFalse), nil
	case uint8:
		return append(b, codeUbyte, v), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(b, codeUshort), v), nil
	case uint32:
		switch {
		case v == 0:
			return append(b, codeUint0), nil
		case v < 256:
			return append(b, codeSmallUint, byte(v)), nil
		}
		return binary.BigEndian.AppendUint32(append(b, codeUint), v), nil
	case uint64:
		switch {
		case v == 0:
			return append(b, codeUlong0), nil
		case v < 256:
			return append(b, codeSmallUlong, byte(v)), nil
		}
		return binary.BigEndian.AppendUint64(append(b, codeUlong), v), nil
	case int8:
		return append(b, codeByte, byte(v)), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(b, codeShort), uint16(v)), nil
	case int32:
		if v >= math.MinInt8 && v <= math.MaxInt8 {
			return append(b, codeSmallInt, byte(int8(v))), nil
		}
		return binary.BigEndian.AppendUint32(append(b, codeInt), uint32(v)), nil
	case int64:
		if v >= math.MinInt8 && v <= math.MaxInt8 {
			return append(b, codeSmallLong, byte(int8(v))), nil
		}
		return binary.BigEndian.AppendUint64(append(b, codeLong), uint64(v)), nil
	case int:
		return Append(b, int64(v))
	case float32:
		return binary.BigEndian.AppendUint32(append(b, codeFloat), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(b, codeDouble), math.Float64bits(v)), nil
	case time.Time:
		return binary.BigEndian.AppendUint64(append(b, codeTimestamp), uint64(v.UnixMilli())), nil
	case UUID:
		return append(append(b, codeUUID), v[:]...), nil
	case []byte:
		return appendVariable(b, codeVbin8, codeVbin32, v), nil
	case string:
		return appendVariable(b, codeStr8, codeStr32, []byte(v)), nil
	case Symbol:
		return appendVariable(b, codeSym8, codeSym32, []byte(v)), nil
	case []Symbol:
		a := make(Array, len(v))
		for i, s := range v {
			a[i] = s
		}
		return Append(b, a)
	case []any:
		if len(v) == 0 {
			return append(b, codeList0), nil
		}
		var body []byte
		for _, e := range v {
			var err error
			if body, err = Append(body, e); err != nil {
				return nil, err
			}
		}
		return appendCompound(b, codeList8, codeList32, len(v), body), nil
	case Map:
		var body []byte
		for _, p := range v {
			var err error
			if body, err = Append(body, p.Key); err != nil {
				return nil, err
			}
			if body, err = Append(body, p.Value); err != nil {
				return nil, err
			}
		}
		return appendCompound(b, codeMap8, codeMap32, 2*len(v), body), nil
	case map[string]any:
		m := make(Map, 0, len(v))
		for k, e := range v {
			m = append(m, Pair{Key: k, Value: e})
		}
		return Append(b, m)
	case Array:
		return appendArray(b, v)
	case Described:
		b = append(b, codeDescribed)
		b, err := Append(b, v.Descriptor)
		if err != nil {
			return nil, err
		}
		return Append(b, v.Value)
	}
	return nil, fmt.Errorf("wire: cannot encode %T", v)
}

func appendVariable(b []byte, short, long byte, s []byte) []byte {
	if len(s) < 256 {
		b = append(b, short, byte(len(s)))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, long), uint32(len(s)))
	}
	return append(b, s...)
}

// appendCompound writes a list, map or array header and its body. The
// one-byte form is used when size and count fit.
func appendCompound(b []byte, short, long byte, count int, body []byte) []byte {
	if len(body)+1 < 256 && count < 256 {
		b = append(b, short, byte(len(body)+1), byte(count))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, long), uint32(len(body)+4))
		b = binary.BigEndian.AppendUint32(b, uint32(count))
	}
	return append(b, body...)
}

// appendArray encodes an array with the wide constructor of its first
// element's type, so every element has the same width.
func appendArray(b []byte, a Array) ([]byte, error) {
	if len(a) == 0 {
		return append(b, codeArray8, 2, 0, codeNull), nil
	}
	code, err := arrayCode(a[0])
	if err != nil {
		return nil, err
	}
	body := []byte{code}
	for _, e := range a {
		c, err := arrayCode(e)
		if err != nil {
			return nil, err
		}
		if c != code {
			return nil, fmt.Errorf("wire: array mixes %T with %T", a[0], e)
		}
		enc, err := Append(nil, e)
		if err != nil {
			return nil, err
		}
		body = append(body, widen(code, enc)...)
	}
	// The element constructor is part of the body but not of the count.
	return appendCompound(b, codeArray8, codeArray32, len(a), body), nil
}

// arrayCode is the fixed-width constructor used for v inside an array.
func arrayCode(v any) (byte, error) {
	switch v.(type) {
	case bool:
		return codeBool, nil
	case uint8:
		return codeUbyte, nil
	case uint16:
		return codeUshort, nil
	case uint32:
		return codeUint, nil
	case uint64:
		return codeUlong, nil
	case int8:
		return codeByte, nil
	case int16:
		return codeShort, nil
	case int32:
		return codeInt, nil
	case int64, int:
		return codeLong, nil
	case float32:
		return codeFloat, nil
	case float64:
		return codeDouble, nil
	case time.Time:
		return codeTimestamp, nil
	case UUID:
		return codeUUID, nil
	case []byte:
		return codeVbin32, nil
	case string:
		return codeStr32, nil
	case Symbol:
		return codeSym32, nil
	}
	return 0, fmt.Errorf("wire: cannot encode %T in an array", v)
}

// widen converts the single-value encoding enc into the element body for
// an array whose constructor is code: it drops the constructor and widens
// compact forms.
func widen(code byte, enc []byte) []byte {
	switch code {
	case codeBool:
		if enc[0] == codeTrue {
			return []byte{1}
		}
		return []byte{0}
	case codeUint, codeUlong, codeInt, codeLong:
		width := 4
		if code == codeUlong || code == codeLong {
			width = 8
		}
		var u uint64
		switch enc[0] {
		case codeUint0, codeUlong0:
		case codeSmallUint, codeSmallUlong:
			u = uint64(enc[1])
		case codeSmallInt, codeSmallLong:
			u = uint64(int64(int8(enc[1])))
		default:
			return enc[1:]
		}
		out := make([]byte, 8)
		binary.BigEndian.PutUint64(out, u)
		return out[8-width:]
	case codeVbin32, codeStr32, codeSym32:
		if enc[0] == codeVbin8 || enc[0] == codeStr8 || enc[0] == codeSym8 {
			out := binary.BigEndian.AppendUint32(nil, uint32(enc[1]))
			return append(out, enc[2:]...)
		}
	}
	return enc[1:]
}
