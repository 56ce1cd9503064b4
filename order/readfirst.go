package order

import "sync/atomic"

// The adaptive choice between create-first and read-first for a first
// delivery (DeliveryCount 1) that the fact cache cannot answer.
//
// Create-first costs one round trip for a new order and two for a copy (the
// create conflicts, a read decides); read-first costs two for a new order
// (the read misses, the create writes) and one for a copy. With p the share
// of first deliveries that turn out to be copies, create-first costs 1+p on
// average and read-first 2-p, so reading first pays when p > 1/2, and the
// cheaper of the two, min(1+p, 2-p), is never more than the 2-p of the naive
// read-then-insert recipe. Either way the create stays the arbiter of every
// race: a read that finds nothing leads to the create, and a create that
// conflicts is decided by a read, so the choice changes what a delivery
// costs, never what it decides.

// Fixed-point parameters of copyShare.
const (
	// shareOne is the estimate's 1 (every first delivery a copy).
	shareOne = 1 << 20
	// shareWindowShift sets the window: each finding moves the estimate
	// 1/32 of the way to 0 or 1, so that the estimate forgets the
	// findings older than about 32 first deliveries (a finding weighs
	// (31/32)^k after k more), and a stream of nothing but copies moves a
	// fresh estimate past the read-first threshold after 27 findings.
	shareWindowShift = 5
	// readFirstOn and readFirstOff are the hysteresis band around 1/2:
	// read-first starts when the estimate rises above 9/16 and stops when
	// it falls below 7/16, so that a share near 1/2, where both choices
	// cost the same, does not make the choice flap.
	readFirstOn  = shareOne * 9 / 16
	readFirstOff = shareOne * 7 / 16
)

// copyShare estimates the share of first deliveries that turn out to be
// copies of stored orders, as an exponentially weighted moving average of
// the findings (see shareWindowShift), and decides from it whether to read
// first. It starts at 0, choosing create-first. It is safe for concurrent
// use: the estimate and the choice are one word, updated by
// compare-and-swap, so every reader sees a choice consistent with the
// estimate it came from. Findings of concurrent deliveries may be applied in
// any order, which an average of this window does not notice.
type copyShare struct {
	// word holds the estimate (in units of 1/shareOne) shifted left by
	// one, and in its lowest bit the choice: 1 reads first.
	word atomic.Uint64
}

// readFirst reports whether a first delivery should read before it creates.
func (c *copyShare) readFirst() bool { return c.word.Load()&1 == 1 }

// share returns the current estimate, between 0 and 1.
func (c *copyShare) share() float64 { return float64(c.word.Load()>>1) / shareOne }

// observe records one first delivery's finding: copy reports that the order
// was stored already (a conflicting create or a read that found it), !copy
// that this delivery created it.
func (c *copyShare) observe(copy bool) {
	for {
		old := c.word.Load()
		est, rf := int64(old>>1), old&1
		target := int64(0)
		if copy {
			target = shareOne
		}
		est += (target - est) >> shareWindowShift
		est = max(0, min(est, shareOne))
		switch {
		case est > readFirstOn:
			rf = 1
		case est < readFirstOff:
			rf = 0
		}
		if c.word.CompareAndSwap(old, uint64(est)<<1|rf) {
			return
		}
	}
}
