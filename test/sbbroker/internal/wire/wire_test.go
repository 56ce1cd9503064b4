package wire_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker/internal/wire"
)

func TestValueRoundTrip(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_123).UTC()
	long := string(bytes.Repeat([]byte("x"), 300))
	tests := []struct {
		name string
		in   any
		want any // nil means in
	}{
		{"null", nil, nil},
		{"true", true, nil},
		{"false", false, nil},
		{"ubyte", uint8(200), nil},
		{"ushort", uint16(65000), nil},
		{"uint0", uint32(0), nil},
		{"smalluint", uint32(7), nil},
		{"uint", uint32(1 << 30), nil},
		{"ulong0", uint64(0), nil},
		{"smallulong", uint64(255), nil},
		{"ulong", uint64(math.MaxUint64), nil},
		{"byte", int8(-3), nil},
		{"short", int16(-30000), nil},
		{"smallint", int32(-100), nil},
		{"int", int32(math.MinInt32), nil},
		{"smalllong", int64(100), nil},
		{"long", int64(math.MaxInt64), nil},
		{"int as long", 5, int64(5)},
		{"float", float32(1.5), nil},
		{"double", math.Pi, nil},
		{"timestamp", ts, nil},
		{"uuid", wire.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, nil},
		{"binary", []byte{0, 1, 2}, nil},
		{"str8", "hello", nil},
		{"str32", long, nil},
		{"sym8", wire.Symbol("amqp:not-found"), nil},
		{"list0", []any{}, nil},
		{"list8", []any{uint32(1), "a", nil, true}, nil},
		{"list32", []any{long, long}, nil},
		{"map", wire.Map{{Key: wire.Symbol("k"), Value: int64(1)}, {Key: "s", Value: []any{}}}, nil},
		{"array of uuid", wire.Array{wire.UUID{1}, wire.UUID{2}}, nil},
		{"array of timestamp", wire.Array{ts}, nil},
		{"array of small uint widened", wire.Array{uint32(1), uint32(1 << 20)}, nil},
		{"array of long", wire.Array{int64(-1), int64(1 << 40)}, nil},
		{"array of symbol", []wire.Symbol{"ANONYMOUS", "PLAIN"}, wire.Array{wire.Symbol("ANONYMOUS"), wire.Symbol("PLAIN")}},
		{"array of bool", wire.Array{true, false}, nil},
		{"empty array", wire.Array{}, nil},
		{"described", wire.Described{Descriptor: uint64(0x24), Value: []any{}}, nil},
		{"nested", []any{wire.Map{{Key: "a", Value: []any{wire.Array{"x", "y"}}}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := wire.Append(nil, tt.in)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			got, n, err := wire.Decode(b)
			if err != nil {
				t.Fatalf("Decode(%x): %v", b, err)
			}
			if n != len(b) {
				t.Errorf("Decode used %d of %d bytes", n, len(b))
			}
			want := tt.want
			if want == nil {
				want = tt.in
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip = %#v, want %#v", got, want)
			}
		})
	}
}

// TestEncodingMatchesSpec pins exact encodings from the AMQP 1.0 type
// system and the Service Bus notes.
func TestEncodingMatchesSpec(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{uint64(0x10), "5310"},
		{uint32(0), "43"},
		{int32(-1), "54ff"},
		{int32(200), "71000000c8"},
		{"ab", "a1026162"},
		{wire.Symbol("x"), "a30178"},
		{[]any{}, "45"},
		{[]any{true}, "c00201" + "41"},
		{wire.Map{{Key: "a", Value: nil}}, "c1050" + "2a1016140"},
		{wire.Array{wire.UUID{}}, "e01201" + "98" + "00000000000000000000000000000000"},
	}
	for _, tt := range tests {
		b, err := wire.Append(nil, tt.in)
		if err != nil {
			t.Fatalf("Append(%#v): %v", tt.in, err)
		}
		if got := hex.EncodeToString(b); got != tt.want {
			t.Errorf("Append(%#v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	tests := []struct {
		name string
		hex  string
	}{
		{"empty", ""},
		{"unknown code", "ff"},
		{"short uint", "7000"},
		{"string past end", "a10561"},
		{"str32 size past end", "b1ffffffff61"},
		{"list32 count too large", "d0000000080fffffff00000000"},
		{"map with odd count", "c1020140"},
		{"bad boolean", "5602"},
		{"list element past end", "c0030270"},
		{"described arrays", "e0040200" + "5310"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := wire.Decode(b); !errors.Is(err, wire.ErrMalformed) {
				t.Errorf("Decode(%s) error = %v, want ErrMalformed", tt.hex, err)
			}
		})
	}
}

func TestDecodeBoundsNesting(t *testing.T) {
	// 100 nested one-element lists: deeper than the decoder allows.
	b := []byte{0x40}
	for range 100 {
		b = append([]byte{0xd0, 0, 0, 0, 0, 0, 0, 0, 1}, b...)
		size := len(b) - 5
		b[1], b[2], b[3], b[4] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	}
	if _, _, err := wire.Decode(b); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("Decode of deep nesting: %v, want ErrMalformed", err)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	one, id, format := uint32(1), uint32(9), uint32(0)
	ch := uint16(3)
	tests := []struct {
		name    string
		typ     byte
		body    wire.Performative
		payload []byte
	}{
		{"empty", wire.FrameAMQP, nil, nil},
		{"open", wire.FrameAMQP, &wire.Open{ContainerID: "c", Hostname: "h", MaxFrameSize: 65536, ChannelMax: 255, IdleTimeout: 30 * time.Second}, nil},
		{"begin", wire.FrameAMQP, &wire.Begin{RemoteChannel: &ch, NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 7}, nil},
		{"attach", wire.FrameAMQP, &wire.Attach{Name: "l", Handle: 1, Role: wire.RoleReceiver, Source: &wire.Terminus{Address: "orders"}, Target: &wire.Terminus{}, InitialDeliveryCount: &one, MaxMessageSize: 262144}, nil},
		{"flow", wire.FrameAMQP, &wire.Flow{NextIncomingID: &one, IncomingWindow: 5000, NextOutgoingID: 2, OutgoingWindow: 5000, Handle: &one, DeliveryCount: &one, LinkCredit: &one, Echo: true}, nil},
		{"transfer", wire.FrameAMQP, &wire.Transfer{Handle: 1, DeliveryID: &id, DeliveryTag: []byte{1, 2}, MessageFormat: &format, More: true}, []byte("payload")},
		{"continuation transfer", wire.FrameAMQP, &wire.Transfer{Handle: 1}, []byte("rest")},
		{"disposition accepted", wire.FrameAMQP, &wire.Disposition{Role: wire.RoleSender, First: 4, Last: &id, Settled: true, State: wire.Accepted{}}, nil},
		{"disposition rejected", wire.FrameAMQP, &wire.Disposition{Role: wire.RoleReceiver, First: 4, State: wire.Rejected{Error: &wire.Error{Condition: "com.microsoft:dead-letter", Info: wire.Map{{Key: "DeadLetterReason", Value: "r"}}}}}, nil},
		{"disposition modified", wire.FrameAMQP, &wire.Disposition{Role: wire.RoleReceiver, First: 4, State: wire.Modified{DeliveryFailed: true, MessageAnnotations: wire.Map{{Key: wire.Symbol("k"), Value: "v"}}}}, nil},
		{"disposition released", wire.FrameAMQP, &wire.Disposition{Role: wire.RoleReceiver, First: 4, State: wire.Released{}}, nil},
		{"detach", wire.FrameAMQP, &wire.Detach{Handle: 2, Closed: true, Error: &wire.Error{Condition: "amqp:link:detach-forced", Description: "d"}}, nil},
		{"end", wire.FrameAMQP, &wire.End{}, nil},
		{"close", wire.FrameAMQP, &wire.Close{Error: &wire.Error{Condition: "amqp:internal-error"}}, nil},
		{"sasl mechanisms", wire.FrameSASL, &wire.SASLMechanisms{Mechanisms: []wire.Symbol{"ANONYMOUS"}}, nil},
		{"sasl init", wire.FrameSASL, &wire.SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous")}, nil},
		{"sasl outcome", wire.FrameSASL, &wire.SASLOutcome{OutcomeCode: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := wire.AppendFrame(nil, tt.typ, 5, tt.body, tt.payload)
			if err != nil {
				t.Fatalf("AppendFrame: %v", err)
			}
			f, err := wire.ReadFrame(bytes.NewReader(b), 1<<20)
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			if f.Type != tt.typ || f.Channel != 5 {
				t.Errorf("type %d channel %d, want %d 5", f.Type, f.Channel, tt.typ)
			}
			if !reflect.DeepEqual(f.Body, tt.body) {
				t.Errorf("body = %#v, want %#v", f.Body, tt.body)
			}
			if !bytes.Equal(f.Payload, tt.payload) {
				t.Errorf("payload = %q, want %q", f.Payload, tt.payload)
			}
		})
	}
}

func TestReadFrameLimits(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		want error
	}{
		{"size below header", "0000000402000000", wire.ErrMalformed},
		{"doff below 2", "0000000801000000", wire.ErrMalformed},
		{"doff past size", "0000000803000000", wire.ErrMalformed},
		{"4 GB size field", "ffffffff02000000", wire.ErrFrameTooLarge},
		{"body not described", "0000000a020000004040", wire.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := hex.DecodeString(tt.hex)
			if _, err := wire.ReadFrame(bytes.NewReader(b), 65536); !errors.Is(err, tt.want) {
				t.Errorf("ReadFrame error = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestSDKEncodingsDecode decodes frames exactly as go-amqp v1.7.0 put them
// on the wire for the Service Bus SDK (captured from its sources' field
// layout): an attach of a PeekLock receiver and a dead-letter disposition.
func TestSDKEncodingsDecode(t *testing.T) {
	// attach(name="r", handle=1, role=receiver, rcv-settle-mode=second,
	// source(address="orders"), target())
	attach := "0053" + "12" + "c0" + "1c" + "07" +
		"a10172" + "5201" + "41" + "40" + "5001" +
		"0053" + "28" + "c0" + "09" + "01" + "a1066f7264657273" +
		"0053" + "29" + "45"
	p, _, err := wire.DecodePerformative(mustHex(t, attach))
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	second := wire.RcvSecond
	want := &wire.Attach{Name: "r", Handle: 1, Role: wire.RoleReceiver, RcvSettleMode: &second, Source: &wire.Terminus{Address: "orders"}, Target: &wire.Terminus{}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("attach = %#v, want %#v", p, want)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMessageSectionsCrossCheck decodes go-amqp's encoding of a message with
// every section, section by section, and checks the broker's codec agrees
// with the message go-amqp decodes.
func TestMessageSectionsCrossCheck(t *testing.T) {
	ttl := 90 * time.Second
	enq := time.UnixMilli(1_700_000_000_000).UTC()
	ct := "application/json"
	msg := &amqp.Message{
		Header:                &amqp.MessageHeader{TTL: ttl, DeliveryCount: 2, Priority: 4},
		Annotations:           amqp.Annotations{"x-opt-sequence-number": int64(42), "x-opt-enqueued-time": enq},
		Properties:            &amqp.MessageProperties{MessageID: "m-1", ContentType: &ct},
		ApplicationProperties: map[string]any{"n": int64(3)},
		Data:                  [][]byte{[]byte("body")},
	}
	b, err := msg.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var sections []wire.Described
	for len(b) > 0 {
		v, n, err := wire.Decode(b)
		if err != nil {
			t.Fatalf("section %d: %v", len(sections), err)
		}
		d, ok := v.(wire.Described)
		if !ok {
			t.Fatalf("section %d is %T", len(sections), v)
		}
		sections = append(sections, d)
		b = b[n:]
	}
	codes := make([]uint64, len(sections))
	for i, s := range sections {
		codes[i], _ = s.Descriptor.(uint64)
	}
	if want := []uint64{0x70, 0x72, 0x73, 0x74, 0x75}; !reflect.DeepEqual(codes, want) {
		t.Fatalf("section codes = %#x, want %#x", codes, want)
	}
	header := sections[0].Value.([]any)
	if header[2] != uint32(ttl/time.Millisecond) || header[4] != uint32(2) {
		t.Errorf("header = %#v", header)
	}
	ann := sections[1].Value.(wire.Map)
	if v, _ := ann.Get(wire.Symbol("x-opt-sequence-number")); v != int64(42) {
		t.Errorf("sequence number annotation = %#v", v)
	}
	if v, _ := ann.Get("x-opt-enqueued-time"); v != enq {
		t.Errorf("enqueued time annotation = %#v, want %v", v, enq)
	}
	props := sections[2].Value.([]any)
	if props[0] != "m-1" || props[6] != wire.Symbol(ct) {
		t.Errorf("properties = %#v", props)
	}
	if v, _ := sections[3].Value.(wire.Map).Get("n"); v != int64(3) {
		t.Errorf("application properties = %#v", sections[3].Value)
	}
	if !bytes.Equal(sections[4].Value.([]byte), []byte("body")) {
		t.Errorf("data = %#v", sections[4].Value)
	}

	// And the reverse: sections the broker encodes, go-amqp decodes.
	var enc []byte
	for _, s := range []wire.Described{
		{Descriptor: uint64(0x72), Value: wire.Map{{Key: wire.Symbol("x-opt-locked-until"), Value: enq}}},
		{Descriptor: uint64(0x73), Value: []any{"m-2"}},
		{Descriptor: uint64(0x77), Value: wire.Map{{Key: "lock-tokens", Value: wire.Array{wire.UUID{7}}}}},
	} {
		if enc, err = wire.Append(enc, s); err != nil {
			t.Fatal(err)
		}
	}
	var got amqp.Message
	if err := got.UnmarshalBinary(enc); err != nil {
		t.Fatalf("go-amqp cannot decode the broker's encoding: %v", err)
	}
	if lu, _ := got.Annotations["x-opt-locked-until"].(time.Time); !lu.Equal(enq) || got.Properties.MessageID != "m-2" {
		t.Errorf("go-amqp decoded annotations %v, properties %+v", got.Annotations, got.Properties)
	}
	body, _ := got.Value.(map[string]any)
	if toks, _ := body["lock-tokens"].([]amqp.UUID); len(toks) != 1 || toks[0] != (amqp.UUID{7}) {
		t.Errorf("go-amqp decoded value %#v", got.Value)
	}
}

// FuzzReadFrame feeds arbitrary bytes to the frame reader: it must return
// a frame or an error, never panic, and what it decodes must re-encode.
func FuzzReadFrame(f *testing.F) {
	id, format := uint32(0), uint32(0)
	for _, p := range []wire.Performative{
		nil,
		&wire.Open{ContainerID: "c", MaxFrameSize: 65536},
		&wire.Attach{Name: "n", Role: wire.RoleSender, Target: &wire.Terminus{Address: "$cbs"}},
		&wire.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{0}, MessageFormat: &format},
		&wire.Disposition{Role: wire.RoleReceiver, State: wire.Rejected{Error: &wire.Error{Condition: "c", Info: wire.Map{{Key: "k", Value: "v"}}}}},
		&wire.SASLInit{Mechanism: "ANONYMOUS"},
	} {
		b, err := wire.AppendFrame(nil, wire.FrameAMQP, 0, p, []byte{0x00, 0x53, 0x75, 0xa0, 0x00})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\x00\x00\x00\x10\x02\x00\x00\x00\x00\x53\x10\xd0\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := wire.ReadFrame(bytes.NewReader(b), 65536)
		if err != nil {
			return
		}
		if _, err := wire.AppendFrame(nil, fr.Type, fr.Channel, fr.Body, fr.Payload); err != nil {
			t.Fatalf("decoded frame %#v does not re-encode: %v", fr.Body, err)
		}
	})
}

// FuzzDecode checks that Decode never panics and that what it decodes
// re-encodes to a value that decodes the same.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"40", "a1026162", "c00201" + "41", "e01201" + "98" + "00000000000000000000000000000000", "0053245045"} {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := wire.Decode(b)
		if err != nil {
			return
		}
		enc, err := wire.Append(nil, v)
		if err != nil {
			return // e.g. a decimal, which the broker never sends
		}
		v2, _, err := wire.Decode(enc)
		if err != nil {
			t.Fatalf("re-encoding of %#v does not decode: %v", v, err)
		}
		if !reflect.DeepEqual(normalise(v), normalise(v2)) {
			t.Fatalf("re-encoding changed %#v to %#v", v, v2)
		}
	})
}

// normalise maps values whose re-encoding legitimately differs (NaN, and
// empty versus null-typed arrays) to comparable forms.
func normalise(v any) any {
	switch v := v.(type) {
	case float32:
		if v != v {
			return "NaN"
		}
	case float64:
		if v != v {
			return "NaN"
		}
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalise(e)
		}
		return out
	case wire.Array:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalise(e)
		}
		return out
	case wire.Map:
		out := make([]any, 0, 2*len(v))
		for _, p := range v {
			out = append(out, normalise(p.Key), normalise(p.Value))
		}
		return out
	case wire.Described:
		return []any{"described", normalise(v.Descriptor), normalise(v.Value)}
	}
	return v
}

// BenchmarkTransferFrame encodes and decodes the frame of one PeekLock
// delivery with a 1 KiB message.
func BenchmarkTransferFrame(b *testing.B) {
	id, format := uint32(12345), uint32(0)
	tag := bytes.Repeat([]byte{0xab}, 16)
	payload := bytes.Repeat([]byte("x"), 1024)
	t := &wire.Transfer{Handle: 1, DeliveryID: &id, DeliveryTag: tag, MessageFormat: &format}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = wire.AppendFrame(buf[:0], wire.FrameAMQP, 1, t, payload)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := wire.ReadFrame(bytes.NewReader(buf), 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
