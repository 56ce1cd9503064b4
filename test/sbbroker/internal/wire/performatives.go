package wire

import "time"

// Descriptor codes of performatives, SASL frames, outcomes and termini.
const (
	CodeOpen           uint64 = 0x10
	CodeBegin          uint64 = 0x11
	CodeAttach         uint64 = 0x12
	CodeFlow           uint64 = 0x13
	CodeTransfer       uint64 = 0x14
	CodeDisposition    uint64 = 0x15
	CodeDetach         uint64 = 0x16
	CodeEnd            uint64 = 0x17
	CodeClose          uint64 = 0x18
	CodeError          uint64 = 0x1d
	CodeReceived       uint64 = 0x23
	CodeAccepted       uint64 = 0x24
	CodeRejected       uint64 = 0x25
	CodeReleased       uint64 = 0x26
	CodeModified       uint64 = 0x27
	CodeSource         uint64 = 0x28
	CodeTarget         uint64 = 0x29
	CodeSASLMechanisms uint64 = 0x40
	CodeSASLInit       uint64 = 0x41
	CodeSASLOutcome    uint64 = 0x44
)

// Link roles (part 2, section 2.8.1).
const (
	RoleSender   = false
	RoleReceiver = true
)

// Settle modes (part 2, sections 2.8.2 and 2.8.3).
const (
	SndUnsettled uint8 = 0
	SndSettled   uint8 = 1
	SndMixed     uint8 = 2
	RcvFirst     uint8 = 0
	RcvSecond    uint8 = 1
)

// Performative is the body of a frame.
type Performative interface {
	// Code is the descriptor code of the performative.
	Code() uint64
	fields() []any
	setFields(f fieldList) error
}

// Open is the open performative (part 2, section 2.7.1).
type Open struct {
	ContainerID  string
	Hostname     string
	MaxFrameSize uint32 // 0 on decode means absent, i.e. 4294967295
	ChannelMax   uint16
	IdleTimeout  time.Duration // ms resolution; 0 means none
	Properties   Map
}

// Begin is the begin performative (part 2, section 2.7.2).
type Begin struct {
	RemoteChannel  *uint16
	NextOutgoingID uint32
	IncomingWindow uint32
	OutgoingWindow uint32
	HandleMax      uint32
}

// Terminus is a source or target; only the address is interpreted.
type Terminus struct {
	Address string
}

// Attach is the attach performative (part 2, section 2.7.3).
type Attach struct {
	Name                 string
	Handle               uint32
	Role                 bool
	SndSettleMode        *uint8
	RcvSettleMode        *uint8
	Source               *Terminus
	Target               *Terminus
	InitialDeliveryCount *uint32
	MaxMessageSize       uint64
	Properties           Map
}

// Flow is the flow performative (part 2, section 2.7.4).
type Flow struct {
	NextIncomingID *uint32
	IncomingWindow uint32
	NextOutgoingID uint32
	OutgoingWindow uint32
	Handle         *uint32
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
}

// Transfer is the transfer performative (part 2, section 2.7.5).
type Transfer struct {
	Handle        uint32
	DeliveryID    *uint32
	DeliveryTag   []byte
	MessageFormat *uint32
	Settled       bool
	More          bool
	State         any
	Aborted       bool
}

// Disposition is the disposition performative (part 2, section 2.7.6).
type Disposition struct {
	Role    bool
	First   uint32
	Last    *uint32
	Settled bool
	State   any
}

// Detach is the detach performative (part 2, section 2.7.7).
type Detach struct {
	Handle uint32
	Closed bool
	Error  *Error
}

// End is the end performative (part 2, section 2.7.8).
type End struct {
	Error *Error
}

// Close is the close performative (part 2, section 2.7.9).
type Close struct {
	Error *Error
}

// Error is the AMQP error type (part 2, section 2.8.14).
type Error struct {
	Condition   Symbol
	Description string
	Info        Map
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Description == "" {
		return string(e.Condition)
	}
	return string(e.Condition) + ": " + e.Description
}

// SASLMechanisms is the sasl-mechanisms frame (part 5, section 5.3.3.1).
type SASLMechanisms struct {
	Mechanisms []Symbol
}

// SASLInit is the sasl-init frame (part 5, section 5.3.3.2).
type SASLInit struct {
	Mechanism       Symbol
	InitialResponse []byte
	Hostname        string
}

// SASLOutcome is the sasl-outcome frame (part 5, section 5.3.3.6).
type SASLOutcome struct {
	OutcomeCode uint8 // 0 = ok
}

// Delivery states and outcomes (part 3, section 3.4).
type (
	// Accepted is the accepted outcome.
	Accepted struct{}
	// Rejected is the rejected outcome.
	Rejected struct{ Error *Error }
	// Released is the released outcome.
	Released struct{}
	// Modified is the modified outcome.
	Modified struct {
		DeliveryFailed     bool
		UndeliverableHere  bool
		MessageAnnotations Map
	}
	// Received is the received delivery state.
	Received struct {
		SectionNumber uint32
		SectionOffset uint64
	}
)

// Every performative satisfies Performative.
var (
	_ Performative = (*Open)(nil)
	_ Performative = (*Begin)(nil)
	_ Performative = (*Attach)(nil)
	_ Performative = (*Flow)(nil)
	_ Performative = (*Transfer)(nil)
	_ Performative = (*Disposition)(nil)
	_ Performative = (*Detach)(nil)
	_ Performative = (*End)(nil)
	_ Performative = (*Close)(nil)
	_ Performative = (*SASLMechanisms)(nil)
	_ Performative = (*SASLInit)(nil)
	_ Performative = (*SASLOutcome)(nil)
	_ error        = (*Error)(nil)
)

// Code returns CodeOpen.
func (*Open) Code() uint64 { return CodeOpen }

// Code returns CodeBegin.
func (*Begin) Code() uint64 { return CodeBegin }

// Code returns CodeAttach.
func (*Attach) Code() uint64 { return CodeAttach }

// Code returns CodeFlow.
func (*Flow) Code() uint64 { return CodeFlow }

// Code returns CodeTransfer.
func (*Transfer) Code() uint64 { return CodeTransfer }

// Code returns CodeDisposition.
func (*Disposition) Code() uint64 { return CodeDisposition }

// Code returns CodeDetach.
func (*Detach) Code() uint64 { return CodeDetach }

// Code returns CodeEnd.
func (*End) Code() uint64 { return CodeEnd }

// Code returns CodeClose.
func (*Close) Code() uint64 { return CodeClose }

// Code returns CodeSASLMechanisms.
func (*SASLMechanisms) Code() uint64 { return CodeSASLMechanisms }

// Code returns CodeSASLInit.
func (*SASLInit) Code() uint64 { return CodeSASLInit }

// Code returns CodeSASLOutcome.
func (*SASLOutcome) Code() uint64 { return CodeSASLOutcome }

func optional[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func nonZero[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// binaryOrNull encodes a nil slice as null and any other slice, even an empty
// one, as binary.
func binaryOrNull(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func nonEmpty(m Map) any {
	if len(m) == 0 {
		return nil
	}
	return m
}

func (e *Error) value() any {
	if e == nil {
		return nil
	}
	return Described{Descriptor: CodeError, Value: trimNulls([]any{e.Condition, nonZero(e.Description), nonEmpty(e.Info)})}
}

func (t *Terminus) value(code uint64) any {
	if t == nil {
		return nil
	}
	return Described{Descriptor: code, Value: []any{nonZero(t.Address)}}
}

func (o *Open) fields() []any {
	var idle any
	if o.IdleTimeout > 0 {
		idle = uint32(o.IdleTimeout / time.Millisecond)
	}
	return []any{o.ContainerID, nonZero(o.Hostname), nonZero(o.MaxFrameSize), nonZero(o.ChannelMax), idle, nil, nil, nil, nil, nonEmpty(o.Properties)}
}

func (b *Begin) fields() []any {
	return []any{optional(b.RemoteChannel), b.NextOutgoingID, b.IncomingWindow, b.OutgoingWindow, nonZero(b.HandleMax)}
}

func (a *Attach) fields() []any {
	return []any{a.Name, a.Handle, a.Role, optional(a.SndSettleMode), optional(a.RcvSettleMode),
		a.Source.value(CodeSource), a.Target.value(CodeTarget), nil, nil,
		optional(a.InitialDeliveryCount), nonZero(a.MaxMessageSize), nil, nil, nonEmpty(a.Properties)}
}

func (f *Flow) fields() []any {
	return []any{optional(f.NextIncomingID), f.IncomingWindow, f.NextOutgoingID, f.OutgoingWindow,
		optional(f.Handle), optional(f.DeliveryCount), optional(f.LinkCredit), optional(f.Available),
		nonZero(f.Drain), nonZero(f.Echo)}
}

func (t *Transfer) fields() []any {
	return []any{t.Handle, optional(t.DeliveryID), binaryOrNull(t.DeliveryTag), optional(t.MessageFormat),
		nonZero(t.Settled), nonZero(t.More), nil, StateValue(t.State), nil, nonZero(t.Aborted)}
}

func (d *Disposition) fields() []any {
	return []any{d.Role, d.First, optional(d.Last), nonZero(d.Settled), StateValue(d.State)}
}

func (d *Detach) fields() []any { return []any{d.Handle, nonZero(d.Closed), d.Error.value()} }
func (e *End) fields() []any    { return []any{e.Error.value()} }
func (c *Close) fields() []any  { return []any{c.Error.value()} }

func (m *SASLMechanisms) fields() []any { return []any{m.Mechanisms} }
func (s *SASLInit) fields() []any {
	return []any{s.Mechanism, binaryOrNull(s.InitialResponse), nonZero(s.Hostname)}
}
func (s *SASLOutcome) fields() []any { return []any{s.OutcomeCode} }

// StateValue converts a delivery state (Accepted, Rejected, Released,
// Modified, Received or nil) to its encodable described form.
func StateValue(s any) any {
	switch s := s.(type) {
	case Accepted, *Accepted:
		return Described{Descriptor: CodeAccepted, Value: []any{}}
	case Released, *Released:
		return Described{Descriptor: CodeReleased, Value: []any{}}
	case Rejected:
		return Described{Descriptor: CodeRejected, Value: trimNulls([]any{s.Error.value()})}
	case *Rejected:
		return StateValue(*s)
	case Modified:
		return Described{Descriptor: CodeModified, Value: trimNulls([]any{nonZero(s.DeliveryFailed), nonZero(s.UndeliverableHere), nonEmpty(s.MessageAnnotations)})}
	case *Modified:
		return StateValue(*s)
	case Received:
		return Described{Descriptor: CodeReceived, Value: []any{s.SectionNumber, s.SectionOffset}}
	}
	return nil
}
