package idempotent

import "sync/atomic"

// CopyShare is the adaptive ReadFirstPolicy: redeliveries read first, and a
// first delivery reads first while most first deliveries turn out to be
// copies of stored entities.
//
// Create-first costs one round trip for a new entity and two for a copy
// (the create conflicts, a read decides); read-first costs two for a new
// entity (the read misses, the create writes) and one for a copy. With p
// the share of first deliveries that are copies, create-first costs 1+p on
// average and read-first 2-p, so reading first pays when p > 1/2, and the
// cheaper of the two, min(1+p, 2-p), is never more than the 2-p of the
// naive read-then-insert recipe.
//
// The estimate is an exponentially weighted moving average of the findings
// of first deliveries: each moves it 1/32 of the way to 0 or 1, so it
// forgets findings older than about 32 first deliveries, and a stream of
// nothing but copies moves a fresh estimate past the threshold after 27
// findings. Read-first starts when the estimate rises above 9/16 and stops
// when it falls below 7/16, so that a share near 1/2, where both choices
// cost the same, does not make the choice flap. The zero value starts at 0,
// creating first.
//
// It is safe for concurrent use: the estimate and the choice are one word,
// updated by compare-and-swap, so every reader sees a choice consistent
// with the estimate it came from. Findings of concurrent deliveries may be
// applied in any order, which an average of this window does not notice.
type CopyShare struct {
	// word holds the estimate (in units of 1/shareOne) shifted left by
	// one, and in its lowest bit the choice: 1 reads first.
	word atomic.Uint64
}

// Fixed-point parameters of CopyShare.
const (
	shareOne         = 1 << 20 // the estimate's 1 (every first delivery a copy)
	shareWindowShift = 5       // each finding moves the estimate 1/32 of the way
	readFirstOn      = shareOne * 9 / 16
	readFirstOff     = shareOne * 7 / 16
)

var _ ReadFirstPolicy = (*CopyShare)(nil)

// ReadFirst reports whether delivery m should read before it creates: a
// redelivery always, a first delivery while the estimate says so.
func (c *CopyShare) ReadFirst(m Message) bool { return m.DeliveryCount > 1 || c.word.Load()&1 == 1 }

// Estimate returns the current estimate of the share of first deliveries
// that are copies, between 0 and 1, and whether first deliveries read
// first because of it.
func (c *CopyShare) Estimate() (share float64, readFirst bool) {
	w := c.word.Load()
	return float64(w>>1) / shareOne, w&1 == 1
}

// Observe records a first delivery's finding (redeliveries are not
// counted): copy reports that the entity was stored already, !copy that
// this delivery created it.
func (c *CopyShare) Observe(m Message, copy bool) {
	if m.DeliveryCount > 1 {
		return
	}
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
