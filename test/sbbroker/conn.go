package sbbroker

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbbroker/internal/wire"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// Limits the broker announces and enforces.
const (
	maxFrameSize   = 65536 // announced in Open; inbound frames above it are refused
	channelMax     = 255   // announced in Open
	sessionWindow  = 5000  // incoming-window announced in Begin and kept topped up
	senderCredit   = 1000  // link credit granted to client senders, topped up at half
	transferMargin = 128   // bytes reserved for a frame header and transfer performative
)

// AMQP and Service Bus error conditions the broker sends.
const (
	condNotFound        wire.Symbol = "amqp:not-found"
	condNotAllowed      wire.Symbol = "amqp:not-allowed"
	condDecodeError     wire.Symbol = "amqp:decode-error"
	condInternalError   wire.Symbol = "amqp:internal-error"
	condFramingError    wire.Symbol = "amqp:connection:framing-error"
	condUnattached      wire.Symbol = "amqp:session:unattached-handle"
	condDetachForced    wire.Symbol = "amqp:link:detach-forced"
	condMessageTooLarge wire.Symbol = "amqp:link:message-size-exceeded"
	condLockLost        wire.Symbol = "com.microsoft:message-lock-lost"
)

// conn is one client connection. The serve goroutine reads and dispatches
// frames; one pump goroutine per receive link delivers messages; a
// heartbeat goroutine sends empty frames.
//
// Lock order: mu, then wmu. Queue methods may be called with mu held (the
// queue model never calls back); Queue.Receive, which blocks, never is.
type conn struct {
	b   *Broker
	nc  net.Conn
	log *slog.Logger

	wmu sync.Mutex // serialises writes to nc

	mu           sync.Mutex
	cond         *sync.Cond // broadcast when a session window opens or state closes
	closed       bool
	peerMaxFrame uint32
	sessions     map[uint16]*session
	pumps        sync.WaitGroup
}

// errConnClosed ends the read loop after a Close exchange.
var errConnClosed = errors.New("connection closed")

func newConn(b *Broker, nc net.Conn) *conn {
	c := &conn{
		b:            b,
		nc:           nc,
		log:          b.log.With("remote", nc.RemoteAddr().String()),
		peerMaxFrame: wire.MinMaxFrameSize,
		sessions:     make(map[uint16]*session),
	}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// serve runs the connection until the peer closes it, it fails, or the
// broker drops it. On return every pump has stopped.
func (c *conn) serve() {
	defer func() {
		c.mu.Lock()
		c.closed = true
		for _, s := range c.sessions {
			s.stop()
		}
		c.cond.Broadcast()
		c.mu.Unlock()
		c.nc.Close()
		c.pumps.Wait()
	}()
	remoteIdle, err := c.handshake()
	if err != nil {
		c.log.Debug("handshake failed", "err", err)
		return
	}
	stop := make(chan struct{})
	defer close(stop)
	go c.heartbeat(remoteIdle, stop)
	for {
		c.nc.SetReadDeadline(time.Now().Add(c.b.opts.IdleTimeout))
		f, err := wire.ReadFrame(c.nc, maxFrameSize)
		if err != nil {
			if errors.Is(err, wire.ErrMalformed) || errors.Is(err, wire.ErrFrameTooLarge) {
				c.closeWithError(condFramingError, err.Error())
			}
			c.log.Debug("connection ended", "err", err)
			return
		}
		if err := c.safeDispatch(f); err != nil {
			if !errors.Is(err, errConnClosed) {
				c.log.Debug("connection error", "err", err)
			}
			return
		}
	}
}

// handshake performs the protocol header exchange, SASL ANONYMOUS if the
// client asks for it, and the Open exchange. It returns the client's idle
// time-out.
func (c *conn) handshake() (time.Duration, error) {
	c.nc.SetDeadline(time.Now().Add(c.b.opts.IdleTimeout))
	defer c.nc.SetDeadline(time.Time{})
	var h [8]byte
	if _, err := io.ReadFull(c.nc, h[:]); err != nil {
		return 0, err
	}
	if h == wire.ProtoSASL {
		if err := c.sasl(); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c.nc, h[:]); err != nil {
			return 0, err
		}
	}
	if h != wire.ProtoAMQP {
		c.nc.Write(wire.ProtoAMQP[:])
		return 0, fmt.Errorf("unsupported protocol header %q", h[:])
	}
	if _, err := c.nc.Write(wire.ProtoAMQP[:]); err != nil {
		return 0, err
	}
	f, err := wire.ReadFrame(c.nc, maxFrameSize)
	if err != nil {
		return 0, err
	}
	open, ok := f.Body.(*wire.Open)
	if !ok || f.Type != wire.FrameAMQP {
		return 0, fmt.Errorf("first frame is %T, want open", f.Body)
	}
	c.mu.Lock()
	c.peerMaxFrame = max(open.MaxFrameSize, wire.MinMaxFrameSize)
	c.mu.Unlock()
	err = c.write(0, &wire.Open{
		ContainerID:  "sbbroker-" + randomID(),
		MaxFrameSize: maxFrameSize,
		ChannelMax:   channelMax,
		IdleTimeout:  c.b.opts.IdleTimeout,
	})
	return open.IdleTimeout, err
}

// sasl answers the SASL header and accepts ANONYMOUS, the only mechanism
// the SDK offers; authorisation happens later, per entity, through $cbs.
func (c *conn) sasl() error {
	if _, err := c.nc.Write(wire.ProtoSASL[:]); err != nil {
		return err
	}
	b, err := wire.AppendFrame(nil, wire.FrameSASL, 0, &wire.SASLMechanisms{Mechanisms: []wire.Symbol{"ANONYMOUS"}}, nil)
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	f, err := wire.ReadFrame(c.nc, wire.MinMaxFrameSize)
	if err != nil {
		return err
	}
	init, ok := f.Body.(*wire.SASLInit)
	outcome := &wire.SASLOutcome{}
	if !ok || init.Mechanism != "ANONYMOUS" {
		outcome.OutcomeCode = 1 // auth: authentication failed
	}
	if b, err = wire.AppendFrame(nil, wire.FrameSASL, 0, outcome, nil); err != nil {
		return err
	}
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	if outcome.OutcomeCode != 0 {
		return fmt.Errorf("sasl: unsupported init %T", f.Body)
	}
	return nil
}

// heartbeat sends an empty frame at least every 15 s, or every half of the
// client's idle time-out if that is shorter, until stop is closed.
func (c *conn) heartbeat(remoteIdle time.Duration, stop <-chan struct{}) {
	every := 15 * time.Second
	if remoteIdle > 0 && remoteIdle/2 < every {
		every = max(remoteIdle/2, 10*time.Millisecond)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if c.write(0, nil) != nil {
				return
			}
		}
	}
}

// write encodes one frame and writes it. A nil p writes an empty frame.
func (c *conn) write(channel uint16, p wire.Performative) error {
	return c.writeTransfer(channel, p, nil)
}

func (c *conn) writeTransfer(channel uint16, p wire.Performative, payload []byte) error {
	b, err := wire.AppendFrame(nil, wire.FrameAMQP, channel, p, payload)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(c.b.opts.IdleTimeout))
	_, err = c.nc.Write(b)
	return err
}

// closeWithError sends Close carrying an error; the caller then drops the
// socket.
func (c *conn) closeWithError(cond wire.Symbol, desc string) {
	c.write(0, &wire.Close{Error: &wire.Error{Condition: cond, Description: desc}})
}

// dispatch handles one frame from the client. A non-nil error ends the
// connection.
func (c *conn) dispatch(f wire.Frame) error {
	if f.Body == nil {
		return nil // heartbeat
	}
	if f.Type != wire.FrameAMQP {
		c.closeWithError(condFramingError, "unexpected SASL frame")
		return fmt.Errorf("unexpected frame type %d", f.Type)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch p := f.Body.(type) {
	case *wire.Close:
		c.write(0, &wire.Close{})
		return errConnClosed
	case *wire.Begin:
		return c.begin(f.Channel, p)
	case *wire.Open, *wire.SASLMechanisms, *wire.SASLInit, *wire.SASLOutcome:
		c.closeWithError(condNotAllowed, fmt.Sprintf("unexpected %T", p))
		return fmt.Errorf("unexpected %T", p)
	}
	s := c.sessions[f.Channel]
	if s == nil {
		c.closeWithError(condNotAllowed, fmt.Sprintf("frame on unknown channel %d", f.Channel))
		return fmt.Errorf("frame on unknown channel %d", f.Channel)
	}
	if end, ok := f.Body.(*wire.End); ok {
		s.stop()
		delete(c.sessions, f.Channel)
		c.cond.Broadcast()
		if s.ending {
			return nil // the answer to the broker's own End
		}
		if end.Error != nil {
			c.log.Debug("client ended session with error", "channel", f.Channel, "err", end.Error)
		}
		return c.write(f.Channel, &wire.End{})
	}
	if s.ending {
		return nil // frames in flight before the client saw the broker's End
	}
	switch p := f.Body.(type) {
	case *wire.Attach:
		return s.attach(p)
	case *wire.Flow:
		return s.flow(p)
	case *wire.Transfer:
		return s.transfer(p, f.Payload)
	case *wire.Disposition:
		s.disposition(p)
		return nil
	case *wire.Detach:
		return s.detach(p)
	}
	return fmt.Errorf("unhandled %T", f.Body)
}

// safeDispatch is dispatch with a last line of defence: a panic while
// handling one client's frame is logged at error level and ends that
// connection, not the broker.
func (c *conn) safeDispatch(f wire.Frame) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic handling frame; dropping the connection", "panic", r, "frame", fmt.Sprintf("%T", f.Body))
			c.closeWithError(condInternalError, "internal error")
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return c.dispatch(f)
}

// begin answers a client's Begin; the broker uses the client's channel
// number for its half of the session.
func (c *conn) begin(ch uint16, p *wire.Begin) error {
	if p.RemoteChannel != nil || c.sessions[ch] != nil || ch > channelMax {
		c.closeWithError(condNotAllowed, fmt.Sprintf("unexpected begin on channel %d", ch))
		return fmt.Errorf("unexpected begin on channel %d", ch)
	}
	s := &session{
		c:                    c,
		ch:                   ch,
		nextIncomingID:       p.NextOutgoingID,
		incomingWindow:       sessionWindow,
		remoteIncomingWindow: p.IncomingWindow,
		links:                make(map[uint32]*link),
		unsettled:            make(map[uint32]*delivery),
	}
	c.sessions[ch] = s
	return c.write(ch, &wire.Begin{
		RemoteChannel:  &ch,
		NextOutgoingID: 0,
		IncomingWindow: sessionWindow,
		OutgoingWindow: sessionWindow,
		HandleMax:      1<<32 - 2,
	})
}

// detachReceivers force-detaches the receive links on q.
func (c *conn) detachReceivers(q *sbqueue.Queue) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.sessions {
		for _, l := range s.links {
			if l.kind == kindReceiver && l.queue == q && !l.closed {
				l.close()
				l.detachSent = true
				c.write(s.ch, &wire.Detach{Handle: l.handle, Closed: true, Error: &wire.Error{
					Condition:   condDetachForced,
					Description: "link detached by the test broker's fault control",
				}})
				n++
			}
		}
	}
	c.cond.Broadcast()
	return n
}

// randomID returns a random identifier for container ids.
func randomID() string {
	var b [18]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
