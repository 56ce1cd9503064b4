package order

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// hashVersion names the canonical encoding. Changing the encoding must change
// it, so that hashes of different encodings never compare equal by accident.
const hashVersion = "order-request/v1"

// RequestHash returns the hex SHA-256 of the canonical encoding of the order's
// immutable business fields: orderId, customerId, currency, every line (sku,
// quantity, unitPriceMinor, in order), totalMinor and placedAt (UTC, to the
// nanosecond).
//
// The encoding is built from the decoded values, never from the JSON text, so
// JSON key order, white space and the time zone of placedAt do not change the hash, and
// neither do the metadata fields sentAt and traceId. Any change to a business
// field does. Strings are length-prefixed, so no two different orders encode
// to the same bytes.
func (o *Order) RequestHash() string {
	// The encoding of a typical order fits the buffer on the stack; a
	// longer one grows onto the heap.
	var buf [512]byte
	b := buf[:0]
	b = appendString(b, hashVersion)
	b = appendString(b, o.OrderID)
	b = appendString(b, o.CustomerID)
	b = appendString(b, o.Currency)
	b = binary.BigEndian.AppendUint64(b, uint64(len(o.Lines)))
	for _, l := range o.Lines {
		b = appendString(b, l.SKU)
		b = binary.BigEndian.AppendUint64(b, uint64(l.Quantity))
		b = binary.BigEndian.AppendUint64(b, uint64(l.UnitPriceMinor))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(o.TotalMinor))
	// appendString of the RFC 3339 time, without a string in between.
	var ts [len(time.RFC3339Nano) + 8]byte
	t := o.PlacedAt.UTC().AppendFormat(ts[:0], time.RFC3339Nano)
	b = binary.BigEndian.AppendUint64(b, uint64(len(t)))
	b = append(b, t...)
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}
