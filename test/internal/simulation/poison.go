package simulation

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// The poison-message fault (FaultRates.Poison): a valid order whose own
// document cannot be used once it is created, while the store answers
// every other call. A poison order is one of two kinds, half of each:
//
//   - undecodable: its stored document reads back undecodable, as a
//     document written by another tool, or a number a JavaScript-based store
//     kept as a float, does: a read of the order document (the status
//     changes' read, and the read a copy of the order would make) returns
//     it with its version a string, which order.OrderDocument cannot
//     decode, and the status changes' conditional patch (WHERE c.version <
//     v) fails its condition, as Cosmos DB's does when the version is not a
//     number. The consumer may dead-letter such a message at once, with a
//     reason, or retry it;
//   - failing: every read and patch of its document fails with 500, an
//     error that is neither transient nor the message's content: the
//     consumer reports a StoreError, a dependency failure by its reason,
//     and retries it on every delivery until the broker dead-letters it at
//     MaxDeliveryCount.
//
// Either way its status changes can never be applied, while the store's
// probe (Ping) answers: the worker's circuit breaker must not open for them,
// nor the healthy orders wait behind them. The order's own message is
// created on its first delivery (a create reads nothing) and the order is
// spared every other fault, so that nothing else of it reads the document.
// The stored document itself stays intact: the checker reads the store, not
// the fault.

// poisonStream separates the poison draw from the plan's other streams.
const poisonStream = 0x9015_0000

// poisonKind is a kind of poison order.
type poisonKind int

const (
	notPoison poisonKind = iota
	poisonUndecodable
	poisonFailing
)

// poisonDraw returns the poison kind of valid order i. It draws from a
// stream of its own, so the other decisions of a seed stay what they were
// before the fault existed.
func (p *plan) poisonDraw(i int) poisonKind {
	if p.rates.Poison == 0 {
		return notPoison
	}
	r := rand.New(rand.NewPCG(p.seed^planStream^poisonStream, uint64(i)))
	hit, kind := r.Float64(), r.Float64()
	switch {
	case hit >= p.rates.Poison:
		return notPoison
	case kind < 0.5:
		return poisonUndecodable
	}
	return poisonFailing
}

// poisoned returns the poison kind of the order whose document a call on
// document id in partition pk touches, if it is a poison order's.
func (s *faultStore) poisoned(pk, id string) poisonKind {
	if pk != id {
		return notPoison
	}
	return s.poison[pk]
}

// errPoisonPartition is what every read and patch of a failing poison
// order's document returns: no transient error, nor the message's fault.
var errPoisonPartition = errors.New("simulated 500 Internal Server Error: this order's document fails every call")

// poisonCall returns the failure of a read or patch of a failing poison
// order's document, counting it, or nil.
func (s *faultStore) poisonCall(pk, id string) error {
	if s.poisoned(pk, id) != poisonFailing {
		return nil
	}
	s.tr.count(func(c *FaultCounts) { c.PoisonReads++ })
	return fmt.Errorf("document %q in partition %q: %w", id, pk, errPoisonPartition)
}

// undecodable returns body, a stored order document, with its version a
// string: JSON still, but no order.OrderDocument. It counts the fault.
func (s *faultStore) undecodable(body []byte) []byte {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	doc["version"] = fmt.Sprintf("%v (written by another tool)", doc["version"])
	b, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	s.tr.count(func(c *FaultCounts) { c.PoisonReads++ })
	return b
}

// errPoisonPatch is the conditional patch's answer on a poison order's
// document: the condition compares a number with a string, which is false.
var errPoisonPatch = fmt.Errorf("simulated 412: the patch condition c.version < v is false on a document whose version is not a number: %w", idempotent.ErrPreconditionFailed)
