package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types (part 2, section 2.3).
const (
	FrameAMQP byte = 0
	FrameSASL byte = 1
)

// MinMaxFrameSize is the smallest max-frame-size a peer may announce, and
// the limit that applies before Open has been exchanged.
const MinMaxFrameSize = 512

// Protocol headers (part 2, section 2.2; part 5, section 5.3.1).
var (
	ProtoAMQP = [8]byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	ProtoSASL = [8]byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)

// ErrFrameTooLarge is returned by ReadFrame for a frame whose size field
// exceeds the limit given to it.
var ErrFrameTooLarge = errors.New("wire: frame exceeds max-frame-size")

// Frame is one decoded frame. Body is nil for an empty (heartbeat) frame.
// Payload holds the bytes after the performative: message data for
// transfers, nothing otherwise.
type Frame struct {
	Type    byte
	Channel uint16
	Body    Performative
	Payload []byte
}

// ReadFrame reads one frame from r. A frame larger than maxSize is
// rejected before its body is read, so a hostile size field cannot cause a
// large allocation.
func ReadFrame(r io.Reader, maxSize uint32) (Frame, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	size := binary.BigEndian.Uint32(h[0:4])
	doff := h[4]
	if size < 8 || doff < 2 || uint32(doff)*4 > size {
		return Frame{}, malformed("frame header size=%d doff=%d", size, doff)
	}
	if size > maxSize {
		return Frame{}, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, size, maxSize)
	}
	buf := make([]byte, size-8)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	f := Frame{Type: h[5], Channel: binary.BigEndian.Uint16(h[6:8])}
	body := buf[int(doff)*4-8:]
	if len(body) == 0 {
		return f, nil
	}
	p, n, err := DecodePerformative(body)
	if err != nil {
		return Frame{}, err
	}
	f.Body = p
	f.Payload = body[n:]
	return f, nil
}

// AppendFrame appends the encoding of a frame with body p (nil for an
// empty frame) and payload to b. doff is always 2.
func AppendFrame(b []byte, typ byte, channel uint16, p Performative, payload []byte) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 2, typ, byte(channel>>8), byte(channel))
	if p != nil {
		var err error
		b, err = Append(b, Described{Descriptor: p.Code(), Value: trimNulls(p.fields())})
		if err != nil {
			return nil, err
		}
	}
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b, nil
}

// trimNulls drops trailing null fields, as AMQP encoders do.
func trimNulls(f []any) []any {
	for len(f) > 0 && f[len(f)-1] == nil {
		f = f[:len(f)-1]
	}
	return f
}

// DecodePerformative decodes the performative at the start of a frame
// body and returns it with the number of bytes it used.
func DecodePerformative(b []byte) (Performative, int, error) {
	v, n, err := Decode(b)
	if err != nil {
		return nil, 0, err
	}
	d, ok := v.(Described)
	if !ok {
		return nil, 0, malformed("frame body is %T, not a described type", v)
	}
	code, ok := d.Descriptor.(uint64)
	if !ok {
		return nil, 0, malformed("performative descriptor %T", d.Descriptor)
	}
	fields, ok := d.Value.([]any)
	if !ok {
		return nil, 0, malformed("performative %#x is %T, not a list", code, d.Value)
	}
	var p Performative
	switch code {
	case CodeOpen:
		p = new(Open)
	case CodeBegin:
		p = new(Begin)
	case CodeAttach:
		p = new(Attach)
	case CodeFlow:
		p = new(Flow)
	case CodeTransfer:
		p = new(Transfer)
	case CodeDisposition:
		p = new(Disposition)
	case CodeDetach:
		p = new(Detach)
	case CodeEnd:
		p = new(End)
	case CodeClose:
		p = new(Close)
	case CodeSASLMechanisms:
		p = new(SASLMechanisms)
	case CodeSASLInit:
		p = new(SASLInit)
	case CodeSASLOutcome:
		p = new(SASLOutcome)
	default:
		return nil, 0, malformed("unknown performative %#x", code)
	}
	if err := p.setFields(fieldList(fields)); err != nil {
		return nil, 0, fmt.Errorf("decoding %T: %w", p, err)
	}
	return p, n, nil
}
