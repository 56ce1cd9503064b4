package sbbroker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker/internal/wire"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// errorCounter is a slog.Handler that counts error-level records, so tests
// can assert that the broker never hit its panic guard.
type errorCounter struct{ n atomic.Int64 }

func (h *errorCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *errorCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.n.Add(1)
	}
	return nil
}
func (h *errorCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorCounter) WithGroup(string) slog.Handler      { return h }

var _ slog.Handler = (*errorCounter)(nil)

// rawBroker starts a broker with one queue for tests that speak AMQP
// frames directly.
func rawBroker(t testing.TB, errs *errorCounter) *sbbroker.Broker {
	t.Helper()
	return rawBrokerWith(t, errs, sbbroker.Options{})
}

func rawBrokerWith(t testing.TB, errs *errorCounter, o sbbroker.Options) *sbbroker.Broker {
	t.Helper()
	ns := sbqueue.NewNamespace(nil)
	if _, err := ns.CreateQueue(queueName, sbqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	if errs != nil {
		o.Logger = slog.New(errs)
	}
	b := sbbroker.New(ns, o)
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// rawClient is a minimal AMQP peer for protocol tests.
type rawClient struct {
	t  testing.TB
	nc net.Conn
}

func dialRaw(t testing.TB, b *sbbroker.Broker) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc}
}

func (c *rawClient) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) send(typ byte, ch uint16, p wire.Performative) {
	c.t.Helper()
	b, err := wire.AppendFrame(nil, typ, ch, p, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	c.write(b)
}

func (c *rawClient) expectHeader(want [8]byte) {
	c.t.Helper()
	var h [8]byte
	if _, err := io.ReadFull(c.nc, h[:]); err != nil {
		c.t.Fatal(err)
	}
	if h != want {
		c.t.Fatalf("protocol header %q, want %q", h[:], want[:])
	}
}

func (c *rawClient) read() wire.Frame {
	c.t.Helper()
	f, err := wire.ReadFrame(c.nc, 1<<20)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// handshake performs SASL ANONYMOUS (if sasl) and the Open exchange, and
// returns the broker's Open.
func (c *rawClient) handshake(sasl bool, idle time.Duration) *wire.Open {
	c.t.Helper()
	if sasl {
		c.write(wire.ProtoSASL[:])
		c.expectHeader(wire.ProtoSASL)
		mechs, ok := c.read().Body.(*wire.SASLMechanisms)
		if !ok || len(mechs.Mechanisms) == 0 || mechs.Mechanisms[0] != "ANONYMOUS" {
			c.t.Fatalf("sasl-mechanisms = %#v, want ANONYMOUS", mechs)
		}
		c.send(wire.FrameSASL, 0, &wire.SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous")})
		if out, ok := c.read().Body.(*wire.SASLOutcome); !ok || out.OutcomeCode != 0 {
			c.t.Fatalf("sasl-outcome = %#v, want code 0", out)
		}
	}
	c.write(wire.ProtoAMQP[:])
	c.expectHeader(wire.ProtoAMQP)
	c.send(wire.FrameAMQP, 0, &wire.Open{ContainerID: "raw", MaxFrameSize: 65536, IdleTimeout: idle})
	open, ok := c.read().Body.(*wire.Open)
	if !ok {
		c.t.Fatal("no open from the broker")
	}
	return open
}

// expectClose reads frames until Close and returns its error condition.
func (c *rawClient) expectClose() wire.Symbol {
	c.t.Helper()
	for {
		f, err := wire.ReadFrame(c.nc, 1<<20)
		if err != nil {
			c.t.Fatalf("connection ended without close: %v", err)
		}
		if cl, ok := f.Body.(*wire.Close); ok {
			if cl.Error == nil {
				return ""
			}
			return cl.Error.Condition
		}
	}
}

func TestHandshakeAndHeartbeat(t *testing.T) {
	for _, sasl := range []bool{true, false} {
		b := rawBroker(t, nil)
		c := dialRaw(t, b)
		open := c.handshake(sasl, 100*time.Millisecond)
		if open.ContainerID == "" || open.MaxFrameSize != 65536 || open.IdleTimeout != sbbroker.DefaultIdleTimeout {
			t.Errorf("broker open = %+v", open)
		}
		// With a 100 ms client idle time-out the broker must send empty
		// frames; the next frame is one.
		if f := c.read(); f.Body != nil {
			t.Errorf("sasl=%v: frame %T, want an empty heartbeat frame", sasl, f.Body)
		}
		c.send(wire.FrameAMQP, 0, &wire.Close{})
		if cond := c.expectClose(); cond != "" {
			t.Errorf("close answered with error %q", cond)
		}
	}
}

func TestProtocolErrors(t *testing.T) {
	ch := uint16(0)
	tests := []struct {
		name string
		send func(c *rawClient)
		want wire.Symbol
	}{
		{"malformed frame body", func(c *rawClient) { c.write([]byte("\x00\x00\x00\x0a\x02\x00\x00\x00\x40\x40")) }, "amqp:connection:framing-error"},
		{"oversized frame", func(c *rawClient) { c.write([]byte("\x7f\xff\xff\xff\x02\x00\x00\x00")) }, "amqp:connection:framing-error"},
		{"attach on unknown channel", func(c *rawClient) { c.send(wire.FrameAMQP, 9, &wire.Attach{Name: "x"}) }, "amqp:not-allowed"},
		{"begin with remote channel", func(c *rawClient) { c.send(wire.FrameAMQP, 0, &wire.Begin{RemoteChannel: &ch}) }, "amqp:not-allowed"},
		{"second open", func(c *rawClient) { c.send(wire.FrameAMQP, 0, &wire.Open{ContainerID: "again"}) }, "amqp:not-allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := new(errorCounter)
			c := dialRaw(t, rawBroker(t, errs))
			c.handshake(true, 0)
			tt.send(c)
			if got := c.expectClose(); got != tt.want {
				t.Errorf("close condition %q, want %q", got, tt.want)
			}
			if _, err := io.Copy(io.Discard, c.nc); err != nil {
				t.Errorf("after close: %v, want EOF", err)
			}
			if n := errs.n.Load(); n != 0 {
				t.Errorf("%d error-level log records (a panic in the broker)", n)
			}
		})
	}
}

func TestUnsupportedProtocolHeader(t *testing.T) {
	c := dialRaw(t, rawBroker(t, nil))
	c.write([]byte("GET / HTTP/1.1\r\n\r\n"))
	c.expectHeader(wire.ProtoAMQP)
	// The broker then closes the connection (a reset, as the client's
	// unread request is discarded).
	if n, err := c.nc.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after a bad header: read %d, %v; want the connection closed", n, err)
	}
}

// FuzzConnection sends arbitrary frames to a broker after a valid
// handshake and a begin. The broker must never panic (its guard logs at
// error level) and must keep serving new connections.
func FuzzConnection(f *testing.F) {
	seed := func(ps ...wire.Performative) []byte {
		var b []byte
		for _, p := range ps {
			var err error
			if b, err = wire.AppendFrame(b, wire.FrameAMQP, 0, p, nil); err != nil {
				f.Fatal(err)
			}
		}
		return b
	}
	one, id, zero := uint32(1), uint32(0), uint32(0)
	f.Add(seed(&wire.Attach{Name: "s", Role: wire.RoleSender, Target: &wire.Terminus{Address: queueName}, InitialDeliveryCount: &zero},
		&wire.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{0}, MessageFormat: &zero}))
	f.Add(seed(&wire.Attach{Name: "r", Handle: 1, Role: wire.RoleReceiver, Source: &wire.Terminus{Address: queueName}},
		&wire.Flow{NextIncomingID: &zero, IncomingWindow: 10, Handle: &one, LinkCredit: &one}))
	f.Add(seed(&wire.Attach{Name: "c", Role: wire.RoleSender, Target: &wire.Terminus{Address: "$cbs"}},
		&wire.Transfer{Handle: 0, DeliveryID: &id, DeliveryTag: []byte{0}, MessageFormat: &zero, More: true}))
	f.Add(seed(&wire.Disposition{Role: wire.RoleReceiver, First: 0, Last: &one, State: wire.Rejected{}}, &wire.Detach{Handle: 7}, &wire.End{}))
	errs := new(errorCounter)
	b := rawBroker(f, errs)
	f.Fuzz(func(t *testing.T, data []byte) {
		c := dialRaw(t, b)
		c.handshake(true, 0)
		c.send(wire.FrameAMQP, 0, &wire.Begin{IncomingWindow: 100, OutgoingWindow: 100})
		c.read() // the begin reply
		// The broker may close the connection at any point of data, so
		// write errors are expected.
		closeFrame, _ := wire.AppendFrame(nil, wire.FrameAMQP, 0, &wire.Close{}, nil)
		if _, err := c.nc.Write(data); err == nil {
			c.nc.Write(closeFrame)
		}
		// Half-close, so a frame left incomplete by data ends in EOF.
		c.nc.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c.nc) // until the broker closes
		c.nc.Close()
		if n := errs.n.Load(); n != 0 {
			t.Fatalf("the broker logged %d errors (panic guard)", n)
		}
	})
}

func TestSessionErrorEndsOnlyTheSession(t *testing.T) {
	c := dialRaw(t, rawBroker(t, nil))
	c.handshake(true, 0)
	zero, five := uint32(0), uint32(5)
	for range 2 { // the channel is usable again after the exchange
		c.send(wire.FrameAMQP, 0, &wire.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		if _, ok := c.read().Body.(*wire.Begin); !ok {
			t.Fatal("begin not answered")
		}
		c.send(wire.FrameAMQP, 0, &wire.Flow{NextIncomingID: &zero, IncomingWindow: 10, Handle: &five, LinkCredit: &five})
		end, ok := c.read().Body.(*wire.End)
		if !ok || end.Error == nil || end.Error.Condition != "amqp:session:unattached-handle" {
			t.Fatalf("answer to a flow for an unknown handle: %#v, want end with unattached-handle", end)
		}
		c.send(wire.FrameAMQP, 0, &wire.End{})
	}
	c.send(wire.FrameAMQP, 0, &wire.Close{})
	if cond := c.expectClose(); cond != "" {
		t.Errorf("close answered with %q, want no error: the connection survived", cond)
	}
}

func TestIdleTimeoutDropsSilentClient(t *testing.T) {
	b := rawBrokerWith(t, nil, sbbroker.Options{IdleTimeout: 200 * time.Millisecond})
	c := dialRaw(t, b)
	if open := c.handshake(true, 0); open.IdleTimeout != 200*time.Millisecond {
		t.Fatalf("announced idle time-out %v, want 200ms", open.IdleTimeout)
	}
	// Say nothing: the broker must drop the connection rather than wait
	// for ever. The read deadline of dialRaw bounds the wait.
	for {
		f, err := wire.ReadFrame(c.nc, 1<<20)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the broker kept a silent connection open")
		}
		if err != nil {
			return
		}
		if f.Body != nil {
			t.Fatalf("unexpected %T", f.Body)
		}
	}
}
