package wire

import "time"

// fieldList is the list of a composite value, read field by field. Absent
// trailing fields read as null. Every accessor accepts null and reports a
// type mismatch as ErrMalformed.
type fieldList []any

func (f fieldList) at(i int) any {
	if i < len(f) {
		return f[i]
	}
	return nil
}

func asUint(v any) (uint64, bool) {
	switch v := v.(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	}
	return 0, false
}

func (f fieldList) uint(i int, max uint64) (*uint64, error) {
	v := f.at(i)
	if v == nil {
		return nil, nil
	}
	u, ok := asUint(v)
	if !ok || u > max {
		return nil, malformed("field %d: %T %v is not an unsigned integer <= %d", i, v, v, max)
	}
	return &u, nil
}

func (f fieldList) u32(i int) (*uint32, error) {
	u, err := f.uint(i, 1<<32-1)
	if u == nil || err != nil {
		return nil, err
	}
	v := uint32(*u)
	return &v, nil
}

func (f fieldList) u32or(i int, def uint32) (uint32, error) {
	u, err := f.u32(i)
	if u == nil || err != nil {
		return def, err
	}
	return *u, nil
}

func (f fieldList) u8(i int) (*uint8, error) {
	u, err := f.uint(i, 255)
	if u == nil || err != nil {
		return nil, err
	}
	v := uint8(*u)
	return &v, nil
}

func (f fieldList) bool(i int) (bool, error) {
	switch v := f.at(i).(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	}
	return false, malformed("field %d: %T is not a boolean", i, f.at(i))
}

func (f fieldList) str(i int) (string, error) {
	switch v := f.at(i).(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case Symbol:
		return string(v), nil
	}
	return "", malformed("field %d: %T is not a string", i, f.at(i))
}

func (f fieldList) bin(i int) ([]byte, error) {
	switch v := f.at(i).(type) {
	case nil:
		return nil, nil
	case []byte:
		return v, nil
	}
	return nil, malformed("field %d: %T is not binary", i, f.at(i))
}

func (f fieldList) mapv(i int) (Map, error) {
	switch v := f.at(i).(type) {
	case nil:
		return nil, nil
	case Map:
		return v, nil
	}
	return nil, malformed("field %d: %T is not a map", i, f.at(i))
}

// composite returns the fields of a described list with the given code.
func composite(v any, code uint64) (fieldList, bool, error) {
	if v == nil {
		return nil, false, nil
	}
	d, ok := v.(Described)
	if !ok {
		return nil, false, malformed("%T is not a described type", v)
	}
	if c, ok := d.Descriptor.(uint64); !ok || c != code {
		return nil, false, malformed("descriptor %v, want %#x", d.Descriptor, code)
	}
	l, ok := d.Value.([]any)
	if !ok {
		return nil, false, malformed("composite %#x holds %T, not a list", code, d.Value)
	}
	return l, true, nil
}

func (f fieldList) error(i int) (*Error, error) {
	l, ok, err := composite(f.at(i), CodeError)
	if !ok || err != nil {
		return nil, err
	}
	e := new(Error)
	cond, err := l.str(0)
	if err != nil {
		return nil, err
	}
	e.Condition = Symbol(cond)
	if e.Description, err = l.str(1); err != nil {
		return nil, err
	}
	if e.Info, err = l.mapv(2); err != nil {
		return nil, err
	}
	return e, nil
}

func (f fieldList) terminus(i int, code uint64) (*Terminus, error) {
	l, ok, err := composite(f.at(i), code)
	if !ok || err != nil {
		return nil, err
	}
	addr, err := l.str(0)
	if err != nil {
		return nil, err
	}
	return &Terminus{Address: addr}, nil
}

// DecodeState converts a decoded delivery-state value into Accepted,
// Rejected, Released, Modified or Received. Null yields nil.
func DecodeState(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	d, ok := v.(Described)
	if !ok {
		return nil, malformed("delivery state %T", v)
	}
	code, _ := d.Descriptor.(uint64)
	l, _, err := composite(v, code)
	if err != nil {
		return nil, err
	}
	switch code {
	case CodeAccepted:
		return Accepted{}, nil
	case CodeReleased:
		return Released{}, nil
	case CodeRejected:
		e, err := l.error(0)
		return Rejected{Error: e}, err
	case CodeModified:
		var m Modified
		if m.DeliveryFailed, err = l.bool(0); err != nil {
			return nil, err
		}
		if m.UndeliverableHere, err = l.bool(1); err != nil {
			return nil, err
		}
		m.MessageAnnotations, err = l.mapv(2)
		return m, err
	case CodeReceived:
		var r Received
		if r.SectionNumber, err = l.u32or(0, 0); err != nil {
			return nil, err
		}
		off, err := l.uint(1, 1<<64-1)
		if off != nil {
			r.SectionOffset = *off
		}
		return r, err
	}
	return nil, malformed("unknown delivery state %v", d.Descriptor)
}

// collect runs steps in order and returns the first error.
func collect(steps ...func() error) error {
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

func (o *Open) setFields(f fieldList) (err error) {
	return collect(
		func() error { o.ContainerID, err = f.str(0); return err },
		func() error { o.Hostname, err = f.str(1); return err },
		func() error { o.MaxFrameSize, err = f.u32or(2, 1<<32-1); return err },
		func() error {
			c, err := f.uint(3, 1<<16-1)
			o.ChannelMax = 65535
			if c != nil {
				o.ChannelMax = uint16(*c)
			}
			return err
		},
		func() error {
			ms, err := f.u32or(4, 0)
			o.IdleTimeout = time.Duration(ms) * time.Millisecond
			return err
		},
		func() error { o.Properties, err = f.mapv(9); return err },
	)
}

func (b *Begin) setFields(f fieldList) (err error) {
	return collect(
		func() error {
			c, err := f.uint(0, 1<<16-1)
			if c != nil {
				v := uint16(*c)
				b.RemoteChannel = &v
			}
			return err
		},
		func() error { b.NextOutgoingID, err = f.u32or(1, 0); return err },
		func() error { b.IncomingWindow, err = f.u32or(2, 0); return err },
		func() error { b.OutgoingWindow, err = f.u32or(3, 0); return err },
		func() error { b.HandleMax, err = f.u32or(4, 1<<32-1); return err },
	)
}

func (a *Attach) setFields(f fieldList) (err error) {
	return collect(
		func() error { a.Name, err = f.str(0); return err },
		func() error { a.Handle, err = f.u32or(1, 0); return err },
		func() error { a.Role, err = f.bool(2); return err },
		func() error { a.SndSettleMode, err = f.u8(3); return err },
		func() error { a.RcvSettleMode, err = f.u8(4); return err },
		func() error { a.Source, err = f.terminus(5, CodeSource); return err },
		func() error { a.Target, err = f.terminus(6, CodeTarget); return err },
		func() error { a.InitialDeliveryCount, err = f.u32(9); return err },
		func() error {
			m, err := f.uint(10, 1<<64-1)
			if m != nil {
				a.MaxMessageSize = *m
			}
			return err
		},
		func() error { a.Properties, err = f.mapv(13); return err },
	)
}

func (fl *Flow) setFields(f fieldList) (err error) {
	return collect(
		func() error { fl.NextIncomingID, err = f.u32(0); return err },
		func() error { fl.IncomingWindow, err = f.u32or(1, 0); return err },
		func() error { fl.NextOutgoingID, err = f.u32or(2, 0); return err },
		func() error { fl.OutgoingWindow, err = f.u32or(3, 0); return err },
		func() error { fl.Handle, err = f.u32(4); return err },
		func() error { fl.DeliveryCount, err = f.u32(5); return err },
		func() error { fl.LinkCredit, err = f.u32(6); return err },
		func() error { fl.Available, err = f.u32(7); return err },
		func() error { fl.Drain, err = f.bool(8); return err },
		func() error { fl.Echo, err = f.bool(9); return err },
	)
}

func (t *Transfer) setFields(f fieldList) (err error) {
	return collect(
		func() error { t.Handle, err = f.u32or(0, 0); return err },
		func() error { t.DeliveryID, err = f.u32(1); return err },
		func() error { t.DeliveryTag, err = f.bin(2); return err },
		func() error { t.MessageFormat, err = f.u32(3); return err },
		func() error { t.Settled, err = f.bool(4); return err },
		func() error { t.More, err = f.bool(5); return err },
		func() error { t.State, err = DecodeState(f.at(7)); return err },
		func() error { t.Aborted, err = f.bool(9); return err },
	)
}

func (d *Disposition) setFields(f fieldList) (err error) {
	return collect(
		func() error { d.Role, err = f.bool(0); return err },
		func() error { d.First, err = f.u32or(1, 0); return err },
		func() error { d.Last, err = f.u32(2); return err },
		func() error { d.Settled, err = f.bool(3); return err },
		func() error { d.State, err = DecodeState(f.at(4)); return err },
	)
}

func (d *Detach) setFields(f fieldList) (err error) {
	return collect(
		func() error { d.Handle, err = f.u32or(0, 0); return err },
		func() error { d.Closed, err = f.bool(1); return err },
		func() error { d.Error, err = f.error(2); return err },
	)
}

func (e *End) setFields(f fieldList) (err error) {
	e.Error, err = f.error(0)
	return err
}

func (c *Close) setFields(f fieldList) (err error) {
	c.Error, err = f.error(0)
	return err
}

func (m *SASLMechanisms) setFields(f fieldList) error {
	switch v := f.at(0).(type) {
	case Symbol:
		m.Mechanisms = []Symbol{v}
	case Array:
		for _, e := range v {
			s, ok := e.(Symbol)
			if !ok {
				return malformed("mechanism %T", e)
			}
			m.Mechanisms = append(m.Mechanisms, s)
		}
	default:
		return malformed("mechanisms %T", v)
	}
	return nil
}

func (s *SASLInit) setFields(f fieldList) (err error) {
	return collect(
		func() error {
			m, err := f.str(0)
			s.Mechanism = Symbol(m)
			return err
		},
		func() error { s.InitialResponse, err = f.bin(1); return err },
		func() error { s.Hostname, err = f.str(2); return err },
	)
}

func (s *SASLOutcome) setFields(f fieldList) error {
	c, err := f.u8(0)
	if c != nil {
		s.OutcomeCode = *c
	}
	return err
}
