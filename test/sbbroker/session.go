package sbbroker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker/internal/wire"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// batchFormat is the message-format of an SDK batch: its data sections are
// complete encoded messages.
const batchFormat = 0x80013700

// session is the broker's half of one AMQP session. Its fields are guarded
// by c.mu.
type session struct {
	c  *conn
	ch uint16

	nextIncomingID       uint32 // transfer-id of the client's next transfer frame
	incomingWindow       uint32 // frames the client may still send
	nextOutgoingID       uint32 // transfer-id of the broker's next transfer frame
	remoteIncomingWindow uint32 // frames the broker may still send
	nextDeliveryID       uint32

	ending bool // the broker sent End and waits for the client's

	links     map[uint32]*link     // by the client's handle, which the broker reuses
	unsettled map[uint32]*delivery // broker deliveries awaiting the client's outcome
}

// linkKind says what a link carries.
type linkKind int

const (
	kindSender   linkKind = iota // client sends messages to a queue
	kindReceiver                 // client receives messages from a queue (PeekLock)
	kindRequest                  // client sends $cbs or $management requests
	kindReply                    // client receives $cbs or $management replies
)

// link is one attached link. Its fields are guarded by c.mu.
type link struct {
	s       *session
	kind    linkKind
	name    string
	handle  uint32
	address string         // the node address: the entity, $cbs or <entity>/$management; reply links: their target
	entity  string         // the entity path (as the client wrote it) for entity and management links
	queue   *sbqueue.Queue // the queue, dead-letter queue or subscription; nil for a topic
	topic   *sbqueue.Topic // set instead of queue on a sender or management link to a topic

	closed     bool // detached, or the session or connection ended
	detachSent bool // the broker detached first and waits for the client's detach

	// Client-to-broker transfers.
	deliveryCount uint32 // deliveries received from the client
	credit        uint32 // credit the broker has granted (client sender) or holds (client receiver)
	partial       []byte // payload of a multi-frame delivery in progress
	partialID     uint32
	partialFormat uint32
	partialSet    bool
	partialSettle bool

	// Broker-to-client transfers.
	presettled bool          // receive-and-delete: transfers are sent settled
	sent       uint32        // deliveries sent: the broker's delivery-count
	wake       chan struct{} // signalled when credit arrives
	cancel     context.CancelFunc
	replies    [][]byte // encoded replies waiting for credit or window
}

// delivery is an unsettled broker-to-client PeekLock delivery.
type delivery struct {
	link   *link
	entity string
	queue  *sbqueue.Queue
	token  [16]byte // RFC 4122 order
}

// close marks the link closed and stops its pump. c.mu must be held.
func (l *link) close() {
	l.closed = true
	if l.cancel != nil {
		l.cancel()
	}
}

// stop closes every link of the session. c.mu must be held.
func (s *session) stop() {
	for _, l := range s.links {
		l.close()
	}
}

func (s *session) write(p wire.Performative) error { return s.c.write(s.ch, p) }

// end ends the session on the broker's initiative with an error, as AMQP
// requires for session-level protocol errors; the connection stays up.
func (s *session) end(cond wire.Symbol, desc string) error {
	s.stop()
	s.ending = true
	s.c.cond.Broadcast()
	return s.write(&wire.End{Error: &wire.Error{Condition: cond, Description: desc}})
}

// refuse answers an attach with a null terminus and then detaches the link
// with an error, which is how AMQP refuses a link.
func (s *session) refuse(a *wire.Attach, cond wire.Symbol, desc string) error {
	reply := &wire.Attach{Name: a.Name, Handle: a.Handle, Role: !a.Role}
	if err := s.write(reply); err != nil {
		return err
	}
	return s.write(&wire.Detach{Handle: a.Handle, Closed: true, Error: &wire.Error{Condition: cond, Description: desc}})
}

// attach answers a client's Attach.
func (s *session) attach(a *wire.Attach) error {
	if s.links[a.Handle] != nil {
		return s.end("amqp:session:handle-in-use", fmt.Sprintf("handle %d is in use", a.Handle))
	}
	l := &link{s: s, name: a.Name, handle: a.Handle}
	reply := &wire.Attach{
		Name:          a.Name,
		Handle:        a.Handle,
		Role:          !a.Role,
		SndSettleMode: a.SndSettleMode,
		RcvSettleMode: a.RcvSettleMode,
		Source:        a.Source,
		Target:        a.Target,
	}
	if a.Role == wire.RoleSender {
		if a.Target == nil {
			return s.refuse(a, condNotAllowed, "a sender link needs a target")
		}
		l.address = a.Target.Address
		switch {
		case l.address == "$cbs":
			l.kind = kindRequest
		case strings.HasSuffix(l.address, "/$management"):
			l.kind = kindRequest
			l.entity = strings.TrimSuffix(l.address, "/$management")
			if t, ok := s.c.b.ns.Topic(l.entity); ok {
				l.topic = t
				break
			}
			q, ok := s.c.b.ns.Queue(l.entity)
			if !ok {
				return s.refuse(a, condNotFound, fmt.Sprintf("entity %q does not exist", l.entity))
			}
			l.queue = q
		default:
			l.kind = kindSender
			l.entity = l.address
			if t, ok := s.c.b.ns.Topic(l.entity); ok {
				l.topic = t
				break
			}
			q, ok := s.c.b.ns.Queue(l.entity)
			switch {
			case ok && q.Topic() != nil:
				return s.refuse(a, condNotAllowed, fmt.Sprintf("cannot send to %q: it is a subscription (or its dead-letter queue); send to its topic %q", l.entity, q.Topic().Name()))
			case ok && q.DeadLetterQueue() == nil:
				return s.refuse(a, condNotAllowed, fmt.Sprintf("cannot send to %q: it is a dead-letter queue", l.entity))
			case !ok && strings.Contains(l.entity, "/"):
				return s.refuse(a, condNotAllowed, fmt.Sprintf("cannot send to %q", l.entity))
			case !ok:
				return s.refuse(a, condNotFound, fmt.Sprintf("entity %q does not exist", l.entity))
			}
			l.queue = q
		}
		if a.InitialDeliveryCount != nil {
			l.deliveryCount = *a.InitialDeliveryCount
		}
		reply.MaxMessageSize = uint64(s.c.b.opts.MaxMessageSize)
		l.credit = senderCredit
		s.links[a.Handle] = l
		if err := s.write(reply); err != nil {
			return err
		}
		return s.grantCredit(l)
	}

	if a.Source == nil {
		return s.refuse(a, condNotAllowed, "a receiver link needs a source")
	}
	l.address = a.Source.Address
	zero := uint32(0)
	reply.InitialDeliveryCount = &zero
	if l.address == "$cbs" || strings.HasSuffix(l.address, "/$management") {
		if a.Target == nil || a.Target.Address == "" {
			return s.refuse(a, condNotAllowed, "a reply link needs a target address")
		}
		l.kind = kindReply
		l.address = a.Target.Address
		s.links[a.Handle] = l
		return s.write(reply)
	}
	if t, ok := s.c.b.ns.Topic(l.address); ok {
		// Service Bus delivers a topic's messages only through its
		// subscriptions. (The condition Service Bus uses here is not
		// documented; amqp:not-allowed is what it uses for a link on the
		// wrong kind of entity.)
		return s.refuse(a, condNotAllowed, fmt.Sprintf("cannot receive from topic %q: receive from one of its subscriptions, %s%s<name>", t.Name(), t.Name(), sbqueue.SubscriptionsSegment))
	}
	q, ok := s.c.b.ns.Queue(l.address)
	if !ok {
		return s.refuse(a, condNotFound, fmt.Sprintf("entity %q does not exist", l.address))
	}
	l.kind = kindReceiver
	l.entity = l.address
	l.queue = q
	l.presettled = a.SndSettleMode != nil && *a.SndSettleMode == wire.SndSettled
	l.wake = make(chan struct{}, 1)
	s.links[a.Handle] = l
	if err := s.write(reply); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	s.c.pumps.Add(1)
	go func() {
		defer s.c.pumps.Done()
		s.c.pump(ctx, l)
	}()
	return nil
}

// grantCredit tops a client sender's credit up to senderCredit.
func (s *session) grantCredit(l *link) error {
	l.credit = senderCredit
	return s.write(s.flowFrame(l, l.deliveryCount, senderCredit))
}

// flowFrame builds a flow carrying the session state and, for a non-nil
// link, its delivery-count and credit.
func (s *session) flowFrame(l *link, deliveryCount, credit uint32) *wire.Flow {
	next := s.nextIncomingID
	f := &wire.Flow{
		NextIncomingID: &next,
		IncomingWindow: s.incomingWindow,
		NextOutgoingID: s.nextOutgoingID,
		OutgoingWindow: sessionWindow,
	}
	if l != nil {
		h := l.handle
		f.Handle, f.DeliveryCount, f.LinkCredit = &h, &deliveryCount, &credit
	}
	return f
}

// flow applies a client's Flow: its session window and, for a link, the
// credit it grants the broker.
func (s *session) flow(f *wire.Flow) error {
	next := uint32(0)
	if f.NextIncomingID != nil {
		next = *f.NextIncomingID
	}
	s.remoteIncomingWindow = next + f.IncomingWindow - s.nextOutgoingID
	defer s.c.cond.Broadcast()
	var l *link
	if f.Handle != nil {
		if l = s.links[*f.Handle]; l == nil {
			return s.end(condUnattached, fmt.Sprintf("flow for unknown handle %d", *f.Handle))
		}
		if l.kind == kindReceiver || l.kind == kindReply {
			dc := uint32(0)
			if f.DeliveryCount != nil {
				dc = *f.DeliveryCount
			}
			credit := uint32(0)
			if f.LinkCredit != nil {
				credit = *f.LinkCredit
			}
			// credit = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)
			l.credit = dc + credit - l.sent
			if int32(l.credit) < 0 {
				l.credit = 0
			}
			if l.wake != nil {
				select {
				case l.wake <- struct{}{}:
				default:
				}
			}
		}
	}
	if err := s.flushReplies(); err != nil {
		return err
	}
	if f.Echo {
		if l != nil && (l.kind == kindSender || l.kind == kindRequest) {
			return s.write(s.flowFrame(l, l.deliveryCount, l.credit))
		}
		if l != nil {
			return s.write(s.flowFrame(l, l.sent, l.credit))
		}
		return s.write(s.flowFrame(nil, 0, 0))
	}
	return nil
}

// transfer handles one transfer frame from a client sender.
func (s *session) transfer(t *wire.Transfer, payload []byte) error {
	s.nextIncomingID++
	if s.incomingWindow > 0 {
		s.incomingWindow--
	}
	if s.incomingWindow < sessionWindow/2 {
		s.incomingWindow = sessionWindow
		if err := s.write(s.flowFrame(nil, 0, 0)); err != nil {
			return err
		}
	}
	l := s.links[t.Handle]
	if l == nil || (l.kind != kindSender && l.kind != kindRequest) {
		return s.end(condUnattached, fmt.Sprintf("transfer on unknown or receiving handle %d", t.Handle))
	}
	if l.closed {
		return nil // the broker detached it; the client's detach is on its way
	}
	if !l.partialSet {
		if t.DeliveryID == nil {
			return s.detachWithError(l, condNotAllowed, "first transfer frame without delivery-id")
		}
		l.partialSet = true
		l.partialID = *t.DeliveryID
		l.partialFormat = 0
		if t.MessageFormat != nil {
			l.partialFormat = *t.MessageFormat
		}
		l.partialSettle = t.Settled
		l.partial = l.partial[:0]
		l.deliveryCount++
		if l.credit > 0 {
			l.credit--
		}
	}
	if t.Aborted {
		l.partialSet, l.partial = false, nil
		return nil
	}
	// A batch envelope adds a little to the SDK's own size check.
	if limit := 2*int(s.c.b.opts.MaxMessageSize) + 64*1024; len(l.partial)+len(payload) > limit {
		l.partialSet, l.partial = false, nil
		return s.detachWithError(l, condMessageTooLarge, fmt.Sprintf("message larger than %d bytes", limit))
	}
	l.partial = append(l.partial, payload...)
	if t.More {
		return nil
	}
	id, settled, format, data := l.partialID, l.partialSettle || t.Settled, l.partialFormat, l.partial
	l.partialSet, l.partial = false, nil

	var state any
	if l.kind == kindRequest {
		state = s.c.request(l, data)
	} else {
		state = s.c.enqueue(l, format, data)
	}
	if !settled {
		if err := s.write(&wire.Disposition{Role: wire.RoleReceiver, First: id, Settled: true, State: state}); err != nil {
			return err
		}
	}
	if l.credit < senderCredit/2 {
		return s.grantCredit(l)
	}
	return nil
}

// detachWithError detaches a link on the broker's initiative.
func (s *session) detachWithError(l *link, cond wire.Symbol, desc string) error {
	l.close()
	l.detachSent = true
	return s.write(&wire.Detach{Handle: l.handle, Closed: true, Error: &wire.Error{Condition: cond, Description: desc}})
}

// detach handles a client's Detach: the answer to the broker's own detach,
// or a request that the broker answers.
func (s *session) detach(d *wire.Detach) error {
	l := s.links[d.Handle]
	if l == nil {
		return nil
	}
	delete(s.links, d.Handle)
	s.c.cond.Broadcast()
	if l.detachSent {
		return nil
	}
	l.close()
	return s.write(&wire.Detach{Handle: d.Handle, Closed: true})
}

// disposition applies a client's settlement of broker deliveries. Locks
// are held by the queue, not the link, so settlement works on any link of
// the connection's session that received the delivery.
func (s *session) disposition(d *wire.Disposition) {
	if d.Role != wire.RoleReceiver {
		return // the client settling its own transfers: nothing to do
	}
	last := d.First
	if d.Last != nil {
		last = *d.Last
	}
	for id, dl := range s.unsettled {
		if id-d.First > last-d.First {
			continue
		}
		delete(s.unsettled, id)
		if dl.link.closed {
			// Service Bus ignores settlements for a link it has detached;
			// the SDK then settles through $management by lock token.
			continue
		}
		s.c.settle(s, id, dl, d.State, !d.Settled)
	}
}

// settle applies one settlement, subject to the broker's disposition
// faults, and acknowledges it if ack is set. c.mu must be held.
func (c *conn) settle(s *session, id uint32, dl *delivery, state any, ack bool) {
	delay, lose := c.b.takeFault(dl.entity)
	if lose {
		c.log.Debug("disposition lost by fault control", "entity", dl.entity, "delivery", id)
		return
	}
	apply := func() {
		out := applyOutcome(dl.queue, dl.token, state)
		if ack && out != nil {
			s.write(&wire.Disposition{Role: wire.RoleSender, First: id, Settled: true, State: out})
		}
	}
	if delay <= 0 {
		apply()
		return
	}
	time.AfterFunc(delay, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed || c.sessions[s.ch] != s {
			return
		}
		apply()
	})
}

// applyOutcome settles the message locked by token as the AMQP outcome
// state says, and returns the outcome to acknowledge with (nil: none).
func applyOutcome(q *sbqueue.Queue, token [16]byte, state any) any {
	var err error
	ack := state
	switch st := state.(type) {
	case wire.Accepted:
		err = q.Complete(token)
	case wire.Released:
		err = q.Release(token)
	case wire.Modified:
		if st.UndeliverableHere {
			return wire.Rejected{Error: &wire.Error{Condition: condNotAllowed, Description: "the test broker does not support deferral"}}
		}
		err = q.Abandon(token, annotationProperties(st.MessageAnnotations))
	case wire.Rejected:
		// The SDK rejects with com.microsoft:dead-letter; any rejection
		// dead-letters, as the message cannot be delivered elsewhere.
		reason, desc, props := deadLetterInfo(st.Error)
		err = q.DeadLetter(token, reason, desc, props)
		// Service Bus acknowledges a dead-letter without the error; the SDK
		// would treat an echoed error as a failed settlement.
		ack = wire.Rejected{}
	default:
		return nil
	}
	switch {
	case errors.Is(err, sbqueue.ErrLockLost):
		return wire.Rejected{Error: &wire.Error{Condition: condLockLost, Description: err.Error()}}
	case err != nil:
		return wire.Rejected{Error: &wire.Error{Condition: condInternalError, Description: err.Error()}}
	}
	return ack
}

// deadLetterInfo extracts the reason, description and properties to modify
// from a dead-letter rejection's error info.
func deadLetterInfo(e *wire.Error) (reason, desc string, props map[string]any) {
	if e == nil {
		return "", "", nil
	}
	for _, p := range e.Info {
		k, ok := stringKey(p.Key)
		if !ok {
			continue
		}
		switch k {
		case "DeadLetterReason":
			reason, _ = p.Value.(string)
		case "DeadLetterErrorDescription":
			desc, _ = p.Value.(string)
		default:
			if props == nil {
				props = make(map[string]any)
			}
			props[k] = p.Value
		}
	}
	return reason, desc, props
}

// annotationProperties converts an abandon's message-annotations into the
// properties to modify.
func annotationProperties(m wire.Map) map[string]any {
	if len(m) == 0 {
		return nil
	}
	props := make(map[string]any, len(m))
	for _, p := range m {
		if k, ok := stringKey(p.Key); ok {
			props[k] = p.Value
		}
	}
	return props
}

func stringKey(k any) (string, bool) {
	switch k := k.(type) {
	case string:
		return k, true
	case wire.Symbol:
		return string(k), true
	}
	return "", false
}

// errLinkGone stops a pump whose link has closed.
var errLinkGone = errors.New("link closed")

// errNoCredit makes a pump wait for credit.
var errNoCredit = errors.New("no link credit")

// pump delivers messages from l's queue to the client while the link has
// credit. It runs until the link closes.
func (c *conn) pump(ctx context.Context, l *link) {
	for {
		n, ok := c.waitCredit(ctx, l)
		if !ok {
			return
		}
		msgs, err := l.queue.Receive(ctx, n)
		if err != nil {
			return
		}
		for i, m := range msgs {
			err := c.deliver(l, m)
			if err == nil {
				continue
			}
			for _, r := range msgs[i:] {
				l.queue.Release(r.LockToken)
			}
			if errors.Is(err, errLinkGone) {
				return
			}
			break
		}
	}
}

// waitCredit blocks until l has credit and returns it; false once the link
// has closed.
func (c *conn) waitCredit(ctx context.Context, l *link) (int, bool) {
	for {
		c.mu.Lock()
		closed, credit := l.closed || c.closed, l.credit
		c.mu.Unlock()
		if closed {
			return 0, false
		}
		if credit > 0 {
			return int(min(credit, 5000)), true
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-l.wake:
		}
	}
}

// deliver sends m to the client on l as one unsettled (PeekLock) or
// settled (receive-and-delete) delivery.
func (c *conn) deliver(l *link, m sbqueue.ReceivedMessage) error {
	payload, err := encodeDelivery(m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := l.s
	chunk := int(c.peerMaxFrame) - transferMargin
	frames := max(1, (len(payload)+chunk-1)/chunk)
	for !l.closed && !c.closed && l.credit > 0 && s.remoteIncomingWindow < uint32(frames) {
		c.cond.Wait()
	}
	if l.closed || c.closed {
		return errLinkGone
	}
	if l.credit == 0 {
		return errNoCredit
	}
	id := s.nextDeliveryID
	s.nextDeliveryID++
	l.credit--
	l.sent++
	tag := lockTokenTag(m.LockToken)
	format := uint32(0)
	if l.presettled {
		// Receive-and-delete is at most once: the message is gone from the
		// queue before it is sent, so it can never be seen twice.
		l.queue.Complete(m.LockToken)
	} else {
		s.unsettled[id] = &delivery{link: l, entity: l.entity, queue: l.queue, token: m.LockToken}
	}
	for i := 0; i < frames; i++ {
		part := payload[min(i*chunk, len(payload)):min((i+1)*chunk, len(payload))]
		t := &wire.Transfer{Handle: l.handle, More: i < frames-1}
		if i == 0 {
			t.DeliveryID, t.DeliveryTag, t.MessageFormat, t.Settled = &id, tag[:], &format, l.presettled
		}
		if err := c.writeTransfer(s.ch, t, part); err != nil {
			return errLinkGone
		}
		s.nextOutgoingID++
		s.remoteIncomingWindow--
	}
	return nil
}

// request handles a $cbs or $management request and queues the reply for
// the reply link the request names. c.mu must be held.
func (c *conn) request(l *link, data []byte) any {
	var req amqp.Message
	if err := req.UnmarshalBinary(data); err != nil {
		return wire.Rejected{Error: &wire.Error{Condition: condDecodeError, Description: err.Error()}}
	}
	if req.Properties == nil || req.Properties.ReplyTo == nil {
		return wire.Rejected{Error: &wire.Error{Condition: condNotAllowed, Description: "request without reply-to"}}
	}
	var res response
	switch {
	case l.address == "$cbs":
		res = c.b.putToken(&req)
	case l.topic != nil:
		res = manageTopic(l.topic, &req)
	default:
		res = c.b.manage(l.queue, &req)
	}
	reply := &amqp.Message{
		Properties: &amqp.MessageProperties{CorrelationID: req.Properties.MessageID},
		ApplicationProperties: map[string]any{
			"statusCode":        res.status,
			"statusDescription": res.description,
		},
		Value: res.body,
	}
	b, err := reply.MarshalBinary()
	if err != nil {
		return wire.Rejected{Error: &wire.Error{Condition: condInternalError, Description: err.Error()}}
	}
	for _, rl := range l.s.links {
		if rl.kind == kindReply && rl.address == *req.Properties.ReplyTo && !rl.closed {
			rl.replies = append(rl.replies, b)
			if err := l.s.flushReplies(); err != nil {
				c.log.Debug("sending reply", "err", err)
			}
			return wire.Accepted{}
		}
	}
	c.log.Debug("no reply link", "reply-to", *req.Properties.ReplyTo)
	return wire.Accepted{}
}

// flushReplies sends queued replies on the session's reply links while
// they have credit and the session window allows. A reply larger than one
// frame (a peek of big or many messages) goes out as a multi-frame transfer,
// as Service Bus sends it: chunks of the peer's max frame size less the
// transfer's own overhead, more=true on every chunk but the last, the
// delivery id, tag and format on the first. A reply waits, in order, until
// the peer's incoming window holds all of its frames. c.mu must be held.
func (s *session) flushReplies() error {
	chunk := int(s.c.peerMaxFrame) - transferMargin
	for _, l := range s.links {
		for len(l.replies) > 0 && l.credit > 0 && !l.closed {
			payload := l.replies[0]
			frames := max(1, (len(payload)+chunk-1)/chunk)
			if s.remoteIncomingWindow < uint32(frames) {
				break // sent when the peer's flow widens the window
			}
			id, format := s.nextDeliveryID, uint32(0)
			s.nextDeliveryID++
			for i := 0; i < frames; i++ {
				part := payload[min(i*chunk, len(payload)):min((i+1)*chunk, len(payload))]
				t := &wire.Transfer{Handle: l.handle, More: i < frames-1}
				if i == 0 {
					t.DeliveryID, t.MessageFormat, t.Settled = &id, &format, true
					t.DeliveryTag = []byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
				}
				if err := s.c.writeTransfer(s.ch, t, part); err != nil {
					return err
				}
				s.nextOutgoingID++
				s.remoteIncomingWindow--
			}
			l.replies[0] = nil
			l.replies = l.replies[1:]
			l.credit--
			l.sent++
		}
	}
	return nil
}
